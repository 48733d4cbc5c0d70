"""The explored hyperparameters of one run: their spreads, permutations, controller states and values.

`HyperparameterRegistry` answers "what value does rank r run for hyperparameter h at step s": base (from the
schedule for learning rates, `Hyperparameter.base` otherwise) x the controller's scale x the rank's
multiplier. The multipliers come from `spread`; each hyperparameter has its own permutation, drawn from a
private generator seeded identically on every rank, so every rank knows every rank's multiplier without
communicating. Registration order fixes the order of the permutation draws, so every rank must register the
same hyperparameters in the same order, before the first step.

Example:
    >>> registry = HyperparameterRegistry(world_size=2, seed=0, lr_spread=0.5, auto_lr=False, num_groups=1)
    >>> sorted(registry.multipliers("lr", step=1))
    [0.5, 1.5]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

from .controller import ControllerSettings, ControllerState, controller_step
from .hyperparameters import Hyperparameter
from .spread import permuted_multipliers, shared_permutation

__all__ = ["LR", "HyperparameterRegistry", "ExploredValues"]

LR = "lr"


class HyperparameterRegistry:
    """Explored hyperparameters, one permutation and one controller state each.

    Args:
        world_size: number of replicas.
        seed: seed of the permutation generator (identical on every rank).
        lr_spread, auto_lr: the learning rate's spread and whether the controller moves it.
        num_groups: optimizer param groups; all follow ``"lr"`` until `split_lr_by_group`.
        explore_until_step: after this step every spread is 0 (the end of exploration).
    """

    def __init__(
        self,
        world_size: int,
        seed: int,
        lr_spread: float,
        auto_lr: bool,
        num_groups: int,
        explore_until_step: int = sys.maxsize,
    ) -> None:
        self.world_size = world_size
        self.seed = seed
        self.explore_until_step = explore_until_step
        self.hparams: dict[str, Hyperparameter] = {
            LR: Hyperparameter(LR, lr_spread, auto=auto_lr, is_lr=True)
        }
        # The hyperparameter whose base LR each optimizer param group follows.
        self.group_hparam: list[str] = [LR] * num_groups
        self.generator = torch.Generator()
        self.permutations: dict[str, list[int]] = {}
        self.controllers: dict[str, ControllerState] = {}
        self.reset()

    @property
    def names(self) -> list[str]:
        return list(self.hparams)

    @property
    def any_auto(self) -> bool:
        return any(h.auto for h in self.hparams.values())

    def reset(self) -> None:
        """Re-seed and draw one permutation per hyperparameter; only before the first step."""
        self.generator.manual_seed(self.seed)
        self.permutations = {name: shared_permutation(self.world_size, self.generator) for name in self.hparams}
        self.controllers = {name: ControllerState() for name in self.hparams}

    def redraw(self) -> None:
        """New permutations for the next interval (same draws on every rank)."""
        for name in self.hparams:
            self.permutations[name] = shared_permutation(self.world_size, self.generator)

    def add(self, hparam: Hyperparameter) -> None:
        if hparam.name in self.hparams:
            raise ValueError(f"Hyperparameter {hparam.name!r} is already explored")
        if hparam.is_lr:
            raise ValueError("Learning rates are explored per param group; use split_lr_by_group")
        self.hparams[hparam.name] = hparam
        self.reset()

    def split_lr_by_group(self, group_names: Sequence[str]) -> None:
        """Give each optimizer param group its own base LR trajectory and permutation (``lr/<name>``)."""
        if len(group_names) != len(self.group_hparam):
            raise ValueError(
                f"Expected one name per param group ({len(self.group_hparam)}), got {len(group_names)}"
            )
        lr = self.hparams.pop(LR)
        others = dict(self.hparams)
        self.hparams = {}
        for name in dict.fromkeys(group_names):
            self.hparams[f"{LR}/{name}"] = Hyperparameter(f"{LR}/{name}", lr.spread, auto=lr.auto, is_lr=True)
        self.hparams.update(others)
        self.group_hparam = [f"{LR}/{name}" for name in group_names]
        self.reset()

    def multipliers(self, name: str, step: int) -> list[float]:
        """Every rank's multiplier of ``name`` at optimizer ``step`` (``"lr"`` means the first group's)."""
        if name == LR and LR not in self.hparams:
            name = self.group_hparam[0]
        spread = self.hparams[name].spread if step <= self.explore_until_step else 0.0
        return permuted_multipliers(self.world_size, spread, self.permutations[name])

    def base_value(self, name: str) -> float:
        """The shared value of a non-LR hyperparameter: base x controller scale, clipped."""
        hparam = self.hparams[name]
        if hparam.base is None:
            raise ValueError(f"{name!r} is a learning rate: its base comes from the LR schedule")
        return hparam.clip(hparam.base * self.controllers[name].scale)

    def value(self, name: str, rank: int, step: int) -> float:
        """``rank``'s value of a non-LR hyperparameter at ``step``: base x scale x multiplier, clipped."""
        hparam = self.hparams[name]
        if hparam.base is None:
            raise ValueError(f"{name!r} is a learning rate: its base comes from the LR schedule")
        return hparam.clip(hparam.base * self.controllers[name].scale * self.multipliers(name, step)[rank])

    def apply_values(self, rank: int, step: int) -> None:
        """Push ``rank``'s values at ``step`` of the non-LR hyperparameters into the model/optimizer/loss."""
        for name, hparam in self.hparams.items():
            if not hparam.is_lr and hparam.setter is not None:
                hparam.setter(self.value(name, rank, step))

    def apply_base_values(self) -> None:
        """Push the base values (no per-rank multiplier): the ensemble mean's, for evaluation and the final model."""
        for name, hparam in self.hparams.items():
            if not hparam.is_lr and hparam.setter is not None:
                hparam.setter(self.base_value(name))

    def base_values(self) -> dict[str, float]:
        """Base value of each non-LR hyperparameter (learning rates are in the LR record)."""
        return {name: self.base_value(name) for name, h in self.hparams.items() if not h.is_lr}

    def update_controllers(
        self,
        names: Sequence[str],
        multipliers: dict[str, list[float]],
        signal: torch.Tensor,
        scored: torch.Tensor,
        bases: dict[str, float],
        settings: ControllerSettings,
        delta_caps: dict[str, float] | None = None,
        noise: Sequence[float | None] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """One controller step for each of ``names`` from the gathered multipliers and signal (ranks not
        ``scored`` get weight 0; ``delta_caps``: an upper bound on a name's hypergradient; ``noise``: each score
        row's temperature floor, `noise_floor`); returns each one's info (weights, delta, velocity)."""
        infos = {}
        for name in names:
            new_state, info = controller_step(
                self.controllers[name],
                torch.tensor(multipliers[name], dtype=torch.float64),
                signal,
                settings,
                base_value=bases[name],
                healthy=scored,
                delta_cap=(delta_caps or {}).get(name),
                noise=noise,
            )
            self.controllers[name] = new_state
            infos[name] = info
        return infos

    def clamp_controller(self, name: str, floor: float) -> None:
        """Raise ``name``'s controller factor to ``floor``; a downward velocity is dropped with it (it would
        keep pushing against the floor at every later converge)."""
        state = self.controllers[name]
        if state.scale < floor:
            self.controllers[name] = ControllerState(scale=floor, velocity=max(state.velocity, 0.0))

    def cap_controller(self, name: str, ceiling: float) -> None:
        """Lower ``name``'s controller factor to ``ceiling``; an upward velocity is dropped with it."""
        state = self.controllers[name]
        if state.scale > ceiling:
            self.controllers[name] = ControllerState(scale=ceiling, velocity=min(state.velocity, 0.0))

    def state_dict(self) -> dict[str, Any]:
        return {
            "generator_state": self.generator.get_state(),
            "permutations": {k: list(v) for k, v in self.permutations.items()},
            "controllers": {k: {"scale": v.scale, "velocity": v.velocity} for k, v in self.controllers.items()},
        }

    def load_state_dict(self, state: dict[str, Any], *, redraw: bool = False) -> None:
        """Restore generator, permutations and controllers; ``redraw`` (an elastic resume to another world
        size) draws fresh permutations for this world size from the restored generator instead."""
        self.generator.set_state(state["generator_state"])
        if redraw:
            self.permutations = {k: shared_permutation(self.world_size, self.generator) for k in self.hparams}
        else:
            self.permutations = {k: list(v) for k, v in state["permutations"].items()}
        self.controllers = {k: ControllerState(**v) for k, v in state["controllers"].items()}


class ExploredValues:
    """The engine's public view of its registry: this rank's values, by default for the next optimizer step.

    Mixed into `HDETEngine`, which provides the attributes annotated here.
    """

    registry: HyperparameterRegistry
    rank: int
    step: int
    warmup_steps: int
    explore_until_step: int

    @property
    def hparams(self) -> dict[str, Hyperparameter]:
        return self.registry.hparams

    @property
    def permutations(self) -> dict[str, list[int]]:
        return self.registry.permutations

    @property
    def controllers(self) -> dict[str, ControllerState]:
        return self.registry.controllers

    def _check_not_started(self, what: str) -> None:
        if self.step != 0:
            raise RuntimeError(f"{what} must happen before the first optimizer step")

    def add_hyperparameter(self, hparam: Hyperparameter) -> None:
        """Explore one more scalar (weight decay, dropout, a custom getter/setter...), with its own permutation.

        Every rank must register the same hyperparameters in the same order, before the first step.
        """
        self._check_not_started("add_hyperparameter")
        self.registry.add(hparam)
        self.apply_values()

    def split_lr_by_group(self, group_names: list[str]) -> None:
        """Give each optimizer param group its own base LR trajectory and permutation (``lr/<name>``)."""
        self._check_not_started("split_lr_by_group")
        self.registry.split_lr_by_group(group_names)

    def multiplier(self, name: str = LR, rank: int | None = None, step: int | None = None) -> float:
        """``rank``'s multiplier (this rank's by default) at optimizer ``step`` (by default the next one)."""
        return self.multipliers(name, step)[self.rank if rank is None else rank]

    def multipliers(self, name: str = LR, step: int | None = None) -> list[float]:
        """Every rank's multiplier at optimizer ``step`` (by default the next one)."""
        return self.registry.multipliers(name, self.step + 1 if step is None else step)

    def value(self, name: str) -> float:
        """This rank's next-step value of a non-LR hyperparameter: base x controller scale x multiplier."""
        return self.registry.value(name, self.rank, self.step + 1)

    def base_value(self, name: str) -> float:
        """The shared (ensemble) value of a non-LR hyperparameter: base x controller scale."""
        return self.registry.base_value(name)

    def apply_values(self) -> None:
        """Push this rank's values of the non-LR hyperparameters into the model/optimizer/loss."""
        self.registry.apply_values(self.rank, self.step + 1)

    def apply_base_values(self) -> None:
        """Push the base values (the ensemble mean's): for evaluation and the final model."""
        self.registry.apply_base_values()

    def controller_active(self, name: str | None = None) -> bool:
        """Whether the controller moves ``name`` now (any hyperparameter if None)."""
        if self.step < self.warmup_steps or self.step > self.explore_until_step:
            return False
        return any(self.hparams[n].auto for n in ([name] if name is not None else self.hparams))
