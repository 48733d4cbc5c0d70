"""`HDETEngine`: the one state machine behind the Trainer, the Accelerate API and the drop-in scheduler.

It decides *when* (every ``sync_interval`` optimizer steps, plus forced converges before evaluation,
saving and at the end) and keeps HDET's state; the math lives in `spread`/`controller` and every
collective in `collectives`. The shells call, per optimizer step:

    engine.add_loss(loss, weight)  # every micro-batch: its mean loss over `weight` items (labelled tokens)
    optimizer.step()
    report = engine.end_step()     # counts the step; converges (and runs the controller) on the grid
    engine.apply_lr(schedule_lrs)  # base LR x controller scale x this rank's multiplier, per param group

Between converges nothing is communicated. A converge is one fused all-reduce that averages all trainable
parameters (and floating-point persistent buffers, and optionally optimizer state) and gathers every
rank's mean loss and multipliers.

Buffers: persistent floating-point buffers (e.g. BatchNorm running statistics) are averaged with the
parameters; non-persistent ones (derived constants such as rotary frequencies) and integer buffers
(counters that advance identically on every rank) are left alone. In ``shared`` mode DDP keeps
broadcasting buffers from rank 0 before each forward as usual.
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .collectives import broadcast_tensors_, fused_average_, local_data
from .config import HDETConfig
from .controller import ControllerSettings, ControllerState, controller_step, loss_diverged
from .hyperparameters import Hyperparameter
from .outer import outer_nesterov_step_
from .spread import permuted_multipliers, shared_permutation

__all__ = ["HDETEngine", "SyncReport", "HDETDivergenceError", "STATE_VERSION"]

logger = logging.getLogger(__name__)

# 2: the window loss became an item-weighted mean ("loss_weight" added); version 1 states are migrated.
STATE_VERSION = 2
LR = "lr"
# Signals scored at each replica's mean weights over the interval, and those that need no train loss.
AVERAGED_SIGNALS = ("averaged_probe", "train_and_averaged_probe")
PROBE_ONLY_SIGNALS = ("probe", "averaged_probe")
# Settings a resume may change: they decide how the average is computed (memory), not what it is.
RESUMABLE_CHANGES = ("bucket_size_mb",)


class HDETDivergenceError(RuntimeError):
    """Every replica diverged at one converge: there is no healthy average to continue from."""


@dataclass
class SyncReport:
    """What one converge measured and decided (one entry of the schedule metadata's trajectory)."""

    step: int
    regular: bool
    base: dict[str, float]
    multipliers: dict[str, list[float]]
    losses: list[float]
    probe_losses: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    delta: dict[str, float] = field(default_factory=dict)
    velocity: dict[str, float] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    excluded_ranks: list[int] = field(default_factory=list)
    controller_active: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "base": self.base,
            "multipliers": self.multipliers,
            "losses": self.losses,
            "probe_losses": self.probe_losses,
            "weights": self.weights,
            "delta": self.delta,
            "velocity": self.velocity,
            "scale": self.scale,
            "excluded_ranks": self.excluded_ranks,
            "controller_active": self.controller_active,
        }

    def to_logs(self) -> dict[str, float]:
        """Flat scalars for `Trainer.log` / `report_to` backends."""
        logs: dict[str, float] = {}
        for name, value in self.base.items():
            logs[f"hdet/base_{name}"] = value
        for name, value in self.scale.items():
            logs[f"hdet/scale_{name}"] = value
        for name, value in self.delta.items():
            logs[f"hdet/delta_{name}"] = value
        finite = [x for x in self.losses if math.isfinite(x)]
        if finite:
            logs["hdet/loss_mean"] = sum(finite) / len(finite)
        for rank, loss in enumerate(self.losses):
            logs[f"hdet/loss_rank{rank}"] = loss
        for rank, loss in enumerate(self.probe_losses):
            logs[f"hdet/probe_loss_rank{rank}"] = loss
        for rank, weight in enumerate(self.weights):
            logs[f"hdet/weight_rank{rank}"] = weight
        logs["hdet/excluded_ranks"] = float(len(self.excluded_ranks))
        return logs


def _set_group_lr(group: dict[str, Any], value: float) -> None:
    # Fused/capturable optimizers keep the LR in a tensor that must be updated in place.
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(value)
    else:
        group["lr"] = value


class HDETEngine:
    """HDET state and protocol for one process.

    Args:
        config: the validated `HDETConfig`.
        model: the (unwrapped) model whose trainable parameters are averaged.
        optimizer: the optimizer whose param groups get per-rank LRs.
        total_steps: planned optimizer steps (for the controller warm-up and the final converge).
        rank, world_size, group: the process group; by default the global one (or a single process).

    Example:
        >>> import torch
        >>> from hdet_hf import HDETConfig
        >>> from hdet_hf.engine import HDETEngine
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> engine = HDETEngine(HDETConfig(sync_interval=2), model, opt, total_steps=4)
        >>> engine.apply_lr([0.1])
        [0.1]
    """

    def __init__(
        self,
        config: HDETConfig,
        model: nn.Module | None,
        optimizer: torch.optim.Optimizer,
        total_steps: int,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        config.check_run_length(total_steps)
        self.config = config
        self.optimizer = optimizer
        self.total_steps = total_steps
        self.group = group
        initialized = dist.is_available() and dist.is_initialized()
        self.rank = rank if rank is not None else (dist.get_rank(group) if initialized else 0)
        self.world_size = (
            world_size if world_size is not None else (dist.get_world_size(group) if initialized else 1)
        )
        if self.world_size > 1 and not initialized:
            raise ValueError(f"world_size={self.world_size} needs torch.distributed to be initialized")
        if self.world_size == 1 and config.lr_spread > 0:
            warnings.warn(
                "HDET runs on a single process: there is nothing to spread or average, so it trains like "
                "the base schedule. Launch with `accelerate launch`/`torchrun` on 2+ processes.",
                stacklevel=2,
            )
        self.warmup_steps = config.resolve_warmup_steps(total_steps)
        # After this step the controller stops and every spread is 0 (`explore_until`); exploring to the end
        # never zeroes the spread (not even for values set after the last step, e.g. for evaluation).
        until = config.resolve_explore_until(total_steps)
        self.explore_until_step = until if until < total_steps else sys.maxsize
        self.sync_warmup_steps = (
            config.resolve_warmup_steps(total_steps, "sync_warmup_steps")
            if config.gradient_sync == "local"
            else 0
        )
        # Scores this replica on the shared probe batch (``controller_signal="probe"``); set by the shell.
        self.probe_fn: Callable[[], float] | None = None
        self.settings = ControllerSettings(
            temperature=config.controller_temperature,
            temperature_mode=config.controller_temperature_mode,
            lr=config.controller_lr,
            momentum=config.controller_momentum,
            update=config.controller_update,
            max_factor=config.controller_max_factor,
        )
        self.bucket_cap_bytes = int(config.bucket_size_mb * 2**20)
        # Explored hyperparameters, in registration order (which fixes the order of permutation draws).
        self.hparams: dict[str, Hyperparameter] = {
            LR: Hyperparameter(LR, config.lr_spread, auto=config.auto_lr, is_lr=True)
        }
        self.group_hparam: list[str] = [LR for _ in optimizer.param_groups]
        self._params, self._buffers = self._collect_tensors(model, optimizer)
        # The permutation generator is private and seeded identically on every rank.
        self.generator = torch.Generator()
        self._reset_exploration()
        self.values_per_step: dict[str, list[float]] = {}
        self.step = 0
        self.steps_since_sync = 0  # since the last regular converge; identical on every rank
        # Since the last converge of any kind: 0 means the replicas are identical, so a forced converge
        # (before evaluation or saving) would re-average identical weights and is skipped.
        self.steps_since_converge = 0
        # The window's score is an item-weighted mean: sum of (micro-batch mean loss x its labelled items)
        # over the summed items, so ranks with ragged batches are compared per token, not per batch.
        self._loss_sum = torch.zeros((), dtype=torch.float64)
        self._loss_weight = torch.zeros((), dtype=torch.float64)
        # Steps in the window's sums: a replica reset at a forced converge restarts its sums, not the interval.
        self._loss_steps = 0
        # Reset after diverging in this interval: its loss no longer describes its multiplier.
        self._diverged_in_interval = False
        self._schedule_lrs: list[float] | None = None
        self.lr_per_step: list[list[float]] = []
        self.trajectory: list[dict[str, Any]] = []
        self.last_report: SyncReport | None = None
        # Ensemble mean loss at the previous converge: the reference for the divergence test.
        self._last_mean_loss: float | None = None
        self._first_mean_loss: float | None = None  # the divergence test's floor (see `loss_diverged`)
        # DiLoCo outer step (off at lr 1, momentum 0): parameters at the last regular converge and momentum.
        self._outer_enabled = config.outer_lr != 1.0 or config.outer_momentum != 0.0
        self._outer_anchors: list[torch.Tensor] | None = None
        self._outer_momenta: list[torch.Tensor] | None = None
        self.divergence_events: list[dict[str, Any]] = []
        # `averaged_probe`: the running mean of this replica's parameters since the last converge.
        self._window_average: list[torch.Tensor] | None = None
        self._window_average_count = 0
        if self.world_size > 1:
            self._check_settings_agree()

    def _check_settings_agree(self) -> None:
        """Refuse settings that differ between ranks (one small collective, at start).

        A different sync interval on one rank would hang at the first converge; a different spread or seed
        would train silently with multipliers that do not average to 1.
        """
        mine = {**self.config.to_dict(), "total_steps": self.total_steps}
        gathered: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(gathered, mine, group=self.group)
        differing = [key for key in mine if any(other.get(key) != mine[key] for other in gathered)]
        if differing:
            parts = []
            for key in differing:
                by_value: dict[str, list[int]] = {}
                for rank, other in enumerate(gathered):
                    by_value.setdefault(repr(other.get(key)), []).append(rank)
                name = "total optimizer steps (--max_steps)" if key == "total_steps" else f"--hdet_{key}"
                values = ", ".join(f"{value} on ranks {ranks}" for value, ranks in by_value.items())
                parts.append(f"{name}: {values}")
            raise ValueError(
                "HDET settings differ between processes: "
                + "; ".join(parts)
                + ". Every process must get the "
                "same --hdet_* flags and run length; launch them all with the same command line."
            )

    # ----------------------------------------------------------------------------------------- setup
    @staticmethod
    def _collect_tensors(
        model: nn.Module | None, optimizer: torch.optim.Optimizer
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        if model is not None:
            params = [p for p in model.parameters() if p.requires_grad]
            persistent = set(model.state_dict(keep_vars=True).keys())
            buffers = [
                b for name, b in model.named_buffers() if name in persistent and torch.is_floating_point(b)
            ]
        else:
            seen: set[int] = set()
            params = []
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.requires_grad and id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
            buffers = []
        if not params:
            raise ValueError("HDET found no trainable parameters to average (all have requires_grad=False)")
        return params, buffers

    def broadcast_from_rank0(self) -> None:
        """Make every replica start from rank 0's weights (what DDP does at wrap time; ``local`` mode has no DDP)."""
        if self.world_size > 1:
            with torch.no_grad():
                broadcast_tensors_(
                    [local_data(p) for p in self._params] + [local_data(b) for b in self._buffers],
                    src=0,
                    bucket_cap_bytes=self.bucket_cap_bytes,
                    group=self.group,
                )

    # ------------------------------------------------------------------------------ hyperparameters
    def _reset_exploration(self) -> None:
        """Re-seed and draw one permutation per hyperparameter; only before the first step."""
        self.generator.manual_seed(self.config.seed)
        self.permutations = {
            name: shared_permutation(self.world_size, self.generator) for name in self.hparams
        }
        self.controllers = {name: ControllerState() for name in self.hparams}

    def _check_not_started(self, what: str) -> None:
        if getattr(self, "step", 0) != 0:
            raise RuntimeError(f"{what} must happen before the first optimizer step")

    def add_hyperparameter(self, hparam: Hyperparameter) -> None:
        """Explore one more scalar (weight decay, dropout, a custom getter/setter...), with its own permutation.

        Every rank must register the same hyperparameters in the same order, before the first step.
        """
        self._check_not_started("add_hyperparameter")
        if hparam.name in self.hparams:
            raise ValueError(f"Hyperparameter {hparam.name!r} is already explored")
        if hparam.is_lr:
            raise ValueError("Learning rates are explored per param group; use split_lr_by_group")
        self.hparams[hparam.name] = hparam
        self._reset_exploration()
        self.apply_values()

    def split_lr_by_group(self, group_names: list[str]) -> None:
        """Give each optimizer param group its own base LR trajectory and permutation (``lr/<name>``)."""
        self._check_not_started("split_lr_by_group")
        if len(group_names) != len(self.optimizer.param_groups):
            raise ValueError(
                f"Expected one name per param group ({len(self.optimizer.param_groups)}), got {len(group_names)}"
            )
        lr = self.hparams.pop(LR)
        others = dict(self.hparams)
        self.hparams = {}
        for name in dict.fromkeys(group_names):
            self.hparams[f"{LR}/{name}"] = Hyperparameter(f"{LR}/{name}", lr.spread, auto=lr.auto, is_lr=True)
        self.hparams.update(others)
        self.group_hparam = [f"{LR}/{name}" for name in group_names]
        self._reset_exploration()

    def value(self, name: str) -> float:
        """This rank's current value of a non-LR hyperparameter: base x controller scale x multiplier, clipped."""
        hparam = self.hparams[name]
        assert hparam.base is not None
        return hparam.clip(hparam.base * self.controllers[name].scale * self.multiplier(name))

    def base_value(self, name: str) -> float:
        hparam = self.hparams[name]
        assert hparam.base is not None
        return hparam.clip(hparam.base * self.controllers[name].scale)

    def apply_base_values(self) -> None:
        """Push the base values (no per-rank multiplier) into the model/optimizer/loss: for evaluation and the
        final model, which are the ensemble mean."""
        for name, hparam in self.hparams.items():
            if not hparam.is_lr and hparam.setter is not None:
                hparam.setter(self.base_value(name))

    def apply_values(self) -> None:
        """Push this rank's values of the non-LR hyperparameters into the model/optimizer/loss."""
        for name, hparam in self.hparams.items():
            if not hparam.is_lr and hparam.setter is not None:
                hparam.setter(self.value(name))

    # ------------------------------------------------------------------------------------- values
    def multiplier(self, name: str = LR, rank: int | None = None, step: int | None = None) -> float:
        """``rank``'s multiplier (this rank's by default) at optimizer ``step`` (by default the next one)."""
        rank = self.rank if rank is None else rank
        return self.multipliers(name, step)[rank]

    def multipliers(self, name: str = LR, step: int | None = None) -> list[float]:
        if name == LR and LR not in self.hparams:
            name = self.group_hparam[0]
        step = self.step + 1 if step is None else step
        spread = self.hparams[name].spread if step <= self.explore_until_step else 0.0
        return permuted_multipliers(self.world_size, spread, self.permutations[name])

    def lr_values(self, schedule_lrs: list[float]) -> list[float]:
        """This rank's LR per param group for the next step, and record the base LRs (for metadata/replay)."""
        if len(schedule_lrs) != len(self.group_hparam):
            raise ValueError(
                f"Expected {len(self.group_hparam)} scheduled LRs (one per param group), but got {len(schedule_lrs)}"
            )
        self._schedule_lrs = list(schedule_lrs)
        bases = [lr * self.controllers[h].scale for lr, h in zip(schedule_lrs, self.group_hparam)]
        # Index i holds the base LR of optimizer step i + 1; re-applying for the same step overwrites it.
        del self.lr_per_step[self.step :]
        self.lr_per_step.append(bases)
        return [base * self.multiplier(h) for base, h in zip(bases, self.group_hparam)]

    def apply_lr(self, schedule_lrs: list[float] | None = None) -> list[float]:
        """Set every param group's LR for the next step; with no argument, re-apply the last schedule values."""
        if schedule_lrs is None:
            if self._schedule_lrs is None:
                raise RuntimeError("apply_lr() needs schedule LRs the first time it is called")
            schedule_lrs = self._schedule_lrs
        values = self.lr_values(schedule_lrs)
        for group, value in zip(self.optimizer.param_groups, values):
            _set_group_lr(group, value)
        return values

    # ----------------------------------------------------------------------------------- per step
    def add_loss(self, loss: torch.Tensor | float, weight: torch.Tensor | float = 1.0) -> None:
        """Add one micro-batch's mean loss over ``weight`` items (labelled tokens, examples) to the window.

        The converge compares ranks on the item-weighted mean over the window. A micro-batch with weight 0
        (nothing labelled) is skipped, whatever its loss (0/0 gives NaN). No host sync on accelerators.
        """
        device = loss.device if isinstance(loss, torch.Tensor) else self._loss_sum.device
        if self._loss_sum.device != device:
            self._loss_sum = self._loss_sum.to(device)
            self._loss_weight = self._loss_weight.to(device)
        loss = torch.as_tensor(loss.detach() if isinstance(loss, torch.Tensor) else loss, device=device)
        weight = torch.as_tensor(
            weight.detach() if isinstance(weight, torch.Tensor) else weight, device=device
        ).to(torch.float64)
        counted = weight > 0
        self._loss_sum += torch.where(counted, loss.to(torch.float64) * weight, 0.0)
        self._loss_weight += torch.where(counted, weight, 0.0)

    def _reset_window_loss(self) -> None:
        self._loss_sum.zero_()
        self._loss_weight.zero_()
        self._loss_steps = 0

    def end_step(self) -> SyncReport | None:
        """Count one optimizer step; converge when it lands on the grid (or is the run's last step)."""
        self.step += 1
        self.steps_since_sync += 1
        self.steps_since_converge += 1
        self._loss_steps += 1
        if (
            self.config.controller_signal in AVERAGED_SIGNALS
            and self.step <= self.explore_until_step
            and any(h.auto for h in self.hparams.values())
        ):
            self._update_window_average()
        for name, hparam in self.hparams.items():
            if not hparam.is_lr:
                self.values_per_step.setdefault(name, []).append(self.base_value(name))
        if self.step % self.config.sync_interval == 0:
            return self.converge(regular=True)
        if self.step >= self.total_steps:
            return self.converge(regular=False)
        return None

    @property
    def in_sync_warmup(self) -> bool:
        """True while gradients are still all-reduced every step (``sync_warmup_steps`` in local mode)."""
        return self.step < self.sync_warmup_steps

    @torch.no_grad()
    def average_gradients(self) -> None:
        """DDP's gradient average, in one flat all-reduce; used during the synchronous warm-up only."""
        grads = [local_data(p.grad) for p in self._params if p.grad is not None]
        if self.world_size > 1 and grads:
            fused_average_(
                grads,
                torch.zeros(1, dtype=torch.float64),
                self.rank,
                self.world_size,
                bucket_cap_bytes=self.bucket_cap_bytes,
                group=self.group,
            )

    @torch.no_grad()
    def _update_window_average(self) -> None:
        """Fold this step's parameters into the running mean of the interval's iterates."""
        params = [local_data(p) for p in self._params]
        if self._window_average is None:
            self._window_average = [p.clone() for p in params]
        self._window_average_count += 1
        if self._window_average_count == 1:
            torch._foreach_copy_(self._window_average, params)
        else:
            torch._foreach_lerp_(self._window_average, params, 1.0 / self._window_average_count)

    def _probe(self) -> float:
        """This replica's probe loss: at its current weights, or (`averaged_probe`) at its interval mean."""
        assert self.probe_fn is not None
        if self.config.controller_signal not in AVERAGED_SIGNALS or not self._window_average_count:
            return float(self.probe_fn())
        assert self._window_average is not None
        current = [p.data for p in self._params]
        try:
            # Swap storage, not values: no extra copy of the parameters while the probe runs.
            for p, average in zip(self._params, self._window_average):
                p.data = average
            return float(self.probe_fn())
        finally:
            for p, own in zip(self._params, current):
                p.data = own

    def controller_active(self, name: str | None = None) -> bool:
        """Whether the controller moves ``name`` now (any hyperparameter if None)."""
        if self.step < self.warmup_steps or self.step > self.explore_until_step:
            return False
        names = [name] if name is not None else list(self.hparams)
        return any(self.hparams[n].auto for n in names)

    # ------------------------------------------------------------------------------------ converge
    def _tensors_to_average(self) -> list[torch.Tensor]:
        tensors = [local_data(p) for p in self._params] + [local_data(b) for b in self._buffers]
        if self.config.average_optimizer_state:
            state = getattr(self.optimizer, "state", {})
            for p in self._params:
                for value in state.get(p, {}).values():
                    if isinstance(value, torch.Tensor) and value.dim() > 0 and torch.is_floating_point(value):
                        tensors.append(local_data(value))
        return tensors

    def _is_healthy(self, window_loss: float | None, probe_loss: float | None = None) -> bool:
        """Finite loss(es) and parameters, and a window loss that passes the divergence test (None: no score)."""
        if not all(math.isfinite(x) for x in (window_loss, probe_loss) if x is not None):
            return False
        # Decided locally (no extra collective): compared with ensemble means gathered at earlier converges.
        if window_loss is not None and loss_diverged(
            window_loss, self._last_mean_loss, self._first_mean_loss, self.config.divergence_factor
        ):
            return False
        # One host sync for all parameters, at a converge only.
        finite = [torch.isfinite(local_data(p)).all() for p in self._params] + self._optimizer_state_finite()
        return bool(torch.stack(finite).all())

    def _optimizer_state_finite(self) -> list[torch.Tensor]:
        """With averaged optimizer state, a non-finite moment would enter every rank's average: check it too."""
        if not self.config.average_optimizer_state:
            return []
        return [
            torch.isfinite(t).all()
            for t in self._tensors_to_average()[len(self._params) + len(self._buffers) :]
        ]

    @torch.no_grad()
    def converge(self, regular: bool = True) -> SyncReport:
        """Average replicas now. ``regular`` converges also run the controller and draw new permutations;
        forced ones (before evaluation/saving, at the end) only average, so every saved or evaluated
        model is the ensemble mean without changing the exploration schedule."""
        names = list(self.hparams)
        # No labelled item in the window (or no step): no score, which is not a divergence.
        weight = float(self._loss_weight)
        has_score = self._loss_steps > 0 and weight > 0
        mean_loss = float(self._loss_sum) / weight if has_score else float("nan")
        use_probe = regular and self.config.controller_signal != "train_loss" and self.controller_active()
        if use_probe and self.probe_fn is None:
            raise RuntimeError(
                f"controller_signal={self.config.controller_signal!r} needs engine.probe_fn; HDETTrainer sets it"
            )
        # Scored before averaging: the probe compares the replicas that the interval produced.
        probe_loss = self._probe() if use_probe else mean_loss
        self._window_average_count = 0
        self.steps_since_converge = 0
        healthy = self._is_healthy(mean_loss if has_score else None, probe_loss if use_probe else None)
        # Averaging uses `healthy` (now); the controller also drops a replica reset earlier in this interval,
        # and one with nothing to compare.
        scored = (
            healthy
            and not self._diverged_in_interval
            and math.isfinite(probe_loss)
            and (has_score or self.config.controller_signal in PROBE_ONLY_SIGNALS)
        )
        own = torch.tensor(
            [mean_loss, probe_loss, float(healthy), float(scored)]
            + [self.multiplier(n, step=self.step) for n in names],
            dtype=torch.float64,
        )
        try:
            stats, _ = fused_average_(
                self._tensors_to_average(),
                own,
                self.rank,
                self.world_size,
                contribute=healthy,
                bucket_cap_bytes=self.bucket_cap_bytes,
                group=self.group,
            )
        except RuntimeError as error:
            if "No rank contributed" not in str(error):
                raise
            # Every rank sees the same (zero) count, so every rank stops here, before anything is saved.
            raise HDETDivergenceError(
                f"Every HDET replica diverged by step {self.step} (non-finite loss or parameters, or loss above "
                f"{self.config.divergence_factor}x the last ensemble mean and above the first converge's): nothing "
                "healthy to average. "
                "Training stopped; earlier checkpoints are untouched. Lower --learning_rate or --hdet_lr_spread."
            ) from error
        losses, signal = stats[:, 0], stats[:, 1]
        healthy_ranks, scored_ranks = stats[:, 2] > 0.5, stats[:, 3] > 0.5
        gathered = {n: stats[:, 4 + i].tolist() for i, n in enumerate(names)}
        excluded = [r for r in range(self.world_size) if not bool(healthy_ranks[r])]
        if excluded:
            self._record_divergence(excluded, losses, gathered, healthy)
        if not healthy:
            # This replica now holds the average: its diverged loss must not be counted again.
            self._reset_window_loss()
            self._diverged_in_interval = True
        good = [float(losses[r]) for r in range(self.world_size) if bool(scored_ranks[r])]
        if good and all(math.isfinite(x) for x in good):
            self._last_mean_loss = sum(good) / len(good)
            if self._first_mean_loss is None:
                self._first_mean_loss = self._last_mean_loss
        bases = self._current_bases()
        report = SyncReport(
            step=self.step,
            regular=regular,
            base=bases,
            multipliers=gathered,
            losses=losses.tolist(),
            probe_losses=signal.tolist() if use_probe else [],
            excluded_ranks=excluded,
            scale={n: self.controllers[n].scale for n in names},
        )
        if regular and self._outer_enabled:
            self._outer_step()
        both_signals = self.config.controller_signal == "train_and_averaged_probe"
        if regular:
            if self.controller_active() and bool(scored_ranks.any()):
                report.controller_active = True
                for name in names:
                    if not self.controller_active(name):
                        continue
                    new_state, info = controller_step(
                        self.controllers[name],
                        torch.tensor(gathered[name], dtype=torch.float64),
                        torch.stack([losses, signal]) if both_signals else signal,
                        self.settings,
                        base_value=bases[name],
                        healthy=scored_ranks,
                    )
                    self.controllers[name] = new_state
                    report.weights = info["weights"]  # identical for every hyperparameter
                    report.delta[name] = info["delta"]
                    report.velocity[name] = info["velocity"]
                    report.scale[name] = new_state.scale
            for name in names:
                self.permutations[name] = shared_permutation(self.world_size, self.generator)
            self.apply_values()
            self.trajectory.append(report.to_dict())
            self._reset_window_loss()
            self._diverged_in_interval = False
            self.steps_since_sync = 0
            if self.rank == 0:
                logger.info(
                    "HDET sync at step %d: base %s, losses %s%s",
                    self.step,
                    {k: f"{v:.3g}" for k, v in bases.items()},
                    [f"{x:.4f}" for x in report.losses],
                    f", scale {report.scale}" if report.controller_active else "",
                )
        self.last_report = report
        return report

    def _outer_step(self) -> None:
        params = [local_data(p) for p in self._params]
        if self._outer_anchors is None or self._outer_momenta is None:
            # First regular converge: nothing to extrapolate from yet; the average becomes the anchor.
            self._outer_anchors = [p.clone() for p in params]
            self._outer_momenta = [torch.zeros_like(p) for p in params]
            return
        outer_nesterov_step_(
            params, self._outer_anchors, self._outer_momenta, self.config.outer_lr, self.config.outer_momentum
        )

    def _record_divergence(
        self, excluded: list[int], losses: torch.Tensor, gathered: dict[str, list[float]], healthy: bool
    ) -> None:
        """Log the event, and give a diverged replica (now reset to the average) fresh optimizer state."""
        for rank in excluded:
            event = {
                "step": self.step,
                "rank": rank,
                "loss": float(losses[rank]),
                "multipliers": {name: values[rank] for name, values in gathered.items()},
            }
            self.divergence_events.append(event)
            if self.rank == 0:
                logger.warning(
                    "HDET: replica %d (multipliers %s) diverged at step %d (loss %s); it was left out of the "
                    "average and reset to it.",
                    rank,
                    event["multipliers"],
                    self.step,
                    event["loss"],
                )
        if not healthy:
            # Its moments came from the diverged trajectory; zeroed moments make the next updates small and
            # let them rebuild. With average_optimizer_state the average was already copied in.
            if not self.config.average_optimizer_state:
                for p in self._params:
                    for value in getattr(self.optimizer, "state", {}).get(p, {}).values():
                        if (
                            isinstance(value, torch.Tensor)
                            and value.dim() > 0
                            and torch.is_floating_point(value)
                        ):
                            value.zero_()

    def _current_bases(self) -> dict[str, float]:
        """Base value (before multipliers) of each explored hyperparameter in the step just taken."""
        row = self.lr_per_step[min(self.step - 1, len(self.lr_per_step) - 1)] if self.lr_per_step else []
        bases: dict[str, float] = {}
        for value, name in zip(row, self.group_hparam):
            bases.setdefault(name, value)
        for name, hparam in self.hparams.items():
            if not hparam.is_lr:
                bases[name] = self.base_value(name)
        return bases

    # --------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Plain, versioned state (loadable with ``torch.load(weights_only=True)``)."""
        return {
            "version": STATE_VERSION,
            "world_size": self.world_size,
            "rank": self.rank,
            "step": self.step,
            "steps_since_sync": self.steps_since_sync,
            "loss_sum": float(self._loss_sum),
            "loss_weight": float(self._loss_weight),
            "loss_steps": self._loss_steps,
            "diverged_in_interval": self._diverged_in_interval,
            "generator_state": self.generator.get_state(),
            "permutations": {k: list(v) for k, v in self.permutations.items()},
            "controllers": {
                k: {"scale": v.scale, "velocity": v.velocity} for k, v in self.controllers.items()
            },
            "lr_per_step": [list(row) for row in self.lr_per_step],
            "trajectory": self.trajectory,
            "schedule_lrs": list(self._schedule_lrs) if self._schedule_lrs is not None else None,
            "last_mean_loss": self._last_mean_loss,
            "first_mean_loss": self._first_mean_loss,
            "outer_anchors": self._outer_anchors,
            "outer_momenta": self._outer_momenta,
            "values_per_step": self.values_per_step,
            "divergence_events": self.divergence_events,
            "window_average": self._window_average,
            "window_average_count": self._window_average_count,
            # Checked on load: a resume must continue the same configuration (see `_check_resumed_settings`).
            "config": self.config.to_dict(),
            "total_steps": self.total_steps,
        }

    def load_state_dict(
        self, state: dict[str, Any], elastic: bool = False, *, source: str = "This HDET state"
    ) -> list[str]:
        """Restore state saved by `state_dict`. Returns notes on what an elastic resume changed.

        ``elastic=True`` accepts a state saved with a different number of processes: the shared state
        (step, base values, velocity, permutation generator, trajectory) carries over, multipliers are
        recomputed for this world size with fresh permutations, and the current interval's loss
        accumulator restarts (its replicas no longer map one to one).

        The state is validated first (``source``, e.g. the file name, is named in every error): a damaged or
        edited value, or settings that differ from this run's (except `RESUMABLE_CHANGES`), raise ValueError
        before anything is changed.
        """
        if not isinstance(state, dict):
            raise ValueError(
                f"{source} must be a dict saved by HDETEngine.state_dict(), but got {type(state).__name__}."
            )
        version = state.get("version")
        if version == 1:
            state = _migrate_state_v1(state)
            version = state["version"]
        if version != STATE_VERSION:
            raise ValueError(f"{source}: expected HDET state version {STATE_VERSION}, but got {version!r}")
        _validate_state(state, source)
        self._check_state_fits(state, source)
        resized = state["world_size"] != self.world_size
        if resized and not elastic:
            raise ValueError(
                f"{source} was saved with {state['world_size']} processes but this run has "
                f"{self.world_size}; resume on the same number of processes, or load it with elastic=True."
            )
        self._check_resumed_settings(state, source)
        notes: list[str] = []
        self.step = int(state["step"])
        self.generator.set_state(state["generator_state"])
        if resized:
            self.steps_since_sync = 0
            self._reset_window_loss()
            self._diverged_in_interval = False
            self.permutations = {k: shared_permutation(self.world_size, self.generator) for k in self.hparams}
            notes.append(
                f"world size {state['world_size']} -> {self.world_size}: multipliers recomputed "
                f"({self.multipliers()}), base values and velocity kept, interval loss accumulator restarted"
            )
        else:
            self.steps_since_sync = int(state["steps_since_sync"])
            self._loss_steps = int(state.get("loss_steps", self.steps_since_sync))
            self._diverged_in_interval = bool(state.get("diverged_in_interval", False))
            device = self._loss_sum.device
            self._loss_sum = torch.tensor(float(state["loss_sum"]), dtype=torch.float64, device=device)
            self._loss_weight = torch.tensor(float(state["loss_weight"]), dtype=torch.float64, device=device)
            self.permutations = {k: list(v) for k, v in state["permutations"].items()}
        self.controllers = {k: ControllerState(**v) for k, v in state["controllers"].items()}
        self.lr_per_step = [list(row) for row in state["lr_per_step"]]
        self.trajectory = list(state["trajectory"])
        if state.get("schedule_lrs") is not None:
            self._schedule_lrs = list(state["schedule_lrs"])
        self._last_mean_loss = state.get("last_mean_loss")
        self._first_mean_loss = state.get("first_mean_loss")
        device = self._params[0].device if self._params else None
        anchors, momenta = state.get("outer_anchors"), state.get("outer_momenta")
        self._outer_anchors = [t.to(device) for t in anchors] if anchors is not None else None
        self._outer_momenta = [t.to(device) for t in momenta] if momenta is not None else None
        self.divergence_events = list(state.get("divergence_events", []))
        average = state.get("window_average")
        if average is not None and not resized:
            self._window_average = [t.to(device) for t in average]
            self._window_average_count = int(state.get("window_average_count", 0))
        self.values_per_step = {k: list(v) for k, v in state.get("values_per_step", {}).items()}
        self.apply_values()
        return notes

    def _check_state_fits(self, state: dict[str, Any], source: str) -> None:
        """Saved tensors must match this model's trainable parameters (same count and shapes)."""
        shapes = [tuple(local_data(p).shape) for p in self._params]
        for key in ("outer_anchors", "outer_momenta", "window_average"):
            tensors = state.get(key)
            if tensors is None:
                continue
            if (
                not isinstance(tensors, list)
                or [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in tensors] != shapes
            ):
                raise ValueError(
                    f"{source}: field {key!r} does not match this model's {len(shapes)} trainable parameters "
                    "(count or shapes differ). Resume with the model that wrote the checkpoint."
                )

    def _check_resumed_settings(self, state: dict[str, Any], source: str) -> None:
        """Refuse to mix two configurations in one run (the state, the LRs and hdet_schedule.json would disagree)."""
        saved = state.get("config")
        if isinstance(saved, dict):
            current = self.config.to_dict()
            changed = [
                key
                for key in current
                if key in saved and key not in RESUMABLE_CHANGES and saved[key] != current[key]
            ]
            if changed:
                was = " ".join(f"--hdet_{k} {saved[k]}" for k in changed)
                now = " ".join(f"--hdet_{k} {current[k]}" for k in changed)
                raise ValueError(
                    f"{source} was saved with {was}, but this run has {now}. HDET cannot change these settings in "
                    "the middle of a run (the multipliers, the controller state and hdet_schedule.json describe one "
                    "configuration). Resume with the saved values, or start a new run from the checkpoint's weights."
                )
        saved_steps = state.get("total_steps")
        if saved_steps is not None and saved_steps != self.total_steps:
            raise ValueError(
                f"{source} was saved by a run of {saved_steps} optimizer steps, but this run has {self.total_steps}: "
                "the schedule, the controller warm-up and the end of exploration depend on the run length. Resume "
                f"with the same length ({saved_steps} steps), or start a new run from the checkpoint's weights."
            )
        saved_names, names = list(state["controllers"]), list(self.hparams)
        if sorted(saved_names) != sorted(names):
            added = [n for n in names if n not in saved_names]
            dropped = [n for n in saved_names if n not in names]
            raise ValueError(
                f"{source} explores {saved_names}, but this run explores {names}"
                + (f" (new: {added})" if added else "")
                + (f" (missing: {dropped})" if dropped else "")
                + ". Register the same hyperparameters (the same --hdet_*_spread flags, --hdet_lr_groups and "
                "add_hyperparameter calls) as the run that saved it."
            )

    def schedule_dict(self) -> dict[str, Any]:
        """The ``hdet_schedule.json`` content (see `schedule_metadata.HDETSchedule`)."""
        names = list(self.hparams)
        # The row after the last step holds an LR set for a step that never ran.
        rows = [list(row) for row in self.lr_per_step[: max(self.step, 1)]]
        summary: dict[str, dict[str, float]] = {}
        for i, name in enumerate(self.group_hparam):
            if name in summary or not rows:
                continue
            series = [row[i] for row in rows]
            summary[name] = {"start": series[0], "final": series[-1], "min": min(series), "max": max(series)}
        for name, series in self.values_per_step.items():
            if series:
                summary[name] = {
                    "start": series[0],
                    "final": series[-1],
                    "min": min(series),
                    "max": max(series),
                }
        return {
            "format": "hdet_schedule",
            "version": 1,
            "config": self.config.to_dict(),
            "world_size": self.world_size,
            "total_steps": self.total_steps,
            "sync_interval": self.config.sync_interval,
            "hyperparameters": names,
            "param_group_names": [
                str(g.get("name", f"group_{i}")) for i, g in enumerate(self.optimizer.param_groups)
            ],
            "lr_per_step": rows,
            "trajectory": self.trajectory,
            "summary": summary,
            "divergence_events": self.divergence_events,
            "values_per_step": self.values_per_step,
        }


def _validate_state(state: dict[str, Any], source: str) -> None:
    """Refuse a damaged or edited state with the field's name, before any value is used.

    A world size of 0 or a negative controller scale would otherwise surface as ZeroDivisionError or a
    negative learning rate steps later.
    """

    def fail(key: str, expected: str, value: Any) -> None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"{source}: field {key!r} must be {expected}, but got {shown}. The checkpoint is damaged or was "
            "edited; resume from another checkpoint."
        )

    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def is_number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    required = (
        "world_size",
        "rank",
        "step",
        "steps_since_sync",
        "loss_sum",
        "loss_weight",
        "generator_state",
        "permutations",
        "controllers",
        "lr_per_step",
        "trajectory",
    )
    missing = [key for key in required if key not in state]
    if missing:
        raise ValueError(
            f"{source} is missing field(s) {', '.join(missing)}. The checkpoint is damaged or was not written by "
            "HDETEngine.state_dict(); resume from another checkpoint."
        )
    world = state["world_size"]
    if not (is_int(world) and world >= 1):
        fail("world_size", "an integer >= 1", world)
    if not (is_int(state["rank"]) and 0 <= state["rank"] < world):
        fail("rank", f"an integer in [0, {world})", state["rank"])
    step = state["step"]
    if not (is_int(step) and step >= 0):
        fail("step", "an integer >= 0", step)
    for key in ("steps_since_sync", "loss_steps"):
        if key in state and not (is_int(state[key]) and 0 <= state[key] <= step):
            fail(key, f"an integer in [0, step={step}]", state[key])
    if not is_number(state["loss_sum"]):
        fail("loss_sum", "a number", state["loss_sum"])
    if not (
        is_number(state["loss_weight"]) and math.isfinite(state["loss_weight"]) and state["loss_weight"] >= 0
    ):
        fail("loss_weight", "a finite number >= 0", state["loss_weight"])
    generator = state["generator_state"]
    if not (isinstance(generator, torch.Tensor) and generator.dtype == torch.uint8):
        fail("generator_state", "a uint8 tensor (torch.Generator.get_state())", generator)
    permutations = state["permutations"]
    if not isinstance(permutations, dict):
        fail("permutations", "a dict", permutations)
    for name, perm in permutations.items():
        if not (isinstance(perm, (list, tuple)) and sorted(perm) == list(range(world))):
            fail(f"permutations[{name!r}]", f"a permutation of 0..{world - 1}", perm)
    controllers = state["controllers"]
    if not isinstance(controllers, dict) or set(controllers) != set(permutations):
        fail(
            "controllers", f"a dict with the same names as permutations ({sorted(permutations)})", controllers
        )
    for name, controller in controllers.items():
        if not (isinstance(controller, dict) and set(controller) == {"scale", "velocity"}):
            fail(f"controllers[{name!r}]", "a dict with scale and velocity", controller)
        scale, velocity = controller["scale"], controller["velocity"]
        if not (is_number(scale) and math.isfinite(scale) and scale > 0):
            fail(f"controllers[{name!r}].scale", "a finite number > 0 (a factor on the schedule)", scale)
        if not (is_number(velocity) and math.isfinite(velocity)):
            fail(f"controllers[{name!r}].velocity", "a finite number", velocity)
    rows = state["lr_per_step"]
    if not isinstance(rows, list):
        fail("lr_per_step", "a list of rows", rows)
    for i, row in enumerate(rows):
        if not (
            isinstance(row, (list, tuple)) and all(is_number(v) and math.isfinite(v) and v >= 0 for v in row)
        ):
            fail(f"lr_per_step[{i}]", "a list of finite learning rates >= 0", row)
    schedule_lrs = state.get("schedule_lrs")
    if schedule_lrs is not None and not (
        isinstance(schedule_lrs, list)
        and all(is_number(v) and math.isfinite(v) and v >= 0 for v in schedule_lrs)
    ):
        fail("schedule_lrs", "None or a list of finite learning rates >= 0", schedule_lrs)
    for key in ("last_mean_loss", "first_mean_loss"):
        value = state.get(key)
        if value is not None and not (is_number(value) and math.isfinite(value)):
            fail(key, "None or a finite number", value)
    if not (isinstance(state["trajectory"], list) and all(isinstance(t, dict) for t in state["trajectory"])):
        fail("trajectory", "a list of dicts", state["trajectory"])
    values = state.get("values_per_step", {})
    if not (isinstance(values, dict) and all(isinstance(v, list) for v in values.values())):
        fail("values_per_step", "a dict of lists", values)
    if not isinstance(state.get("divergence_events", []), list):
        fail("divergence_events", "a list", state["divergence_events"])
    count = state.get("window_average_count", 0)
    if not (is_int(count) and count >= 0):
        fail("window_average_count", "an integer >= 0", count)
    saved_steps = state.get("total_steps")
    if saved_steps is not None and not (is_int(saved_steps) and saved_steps >= 1):
        fail("total_steps", "an integer >= 1", saved_steps)
    if state.get("config") is not None and not isinstance(state["config"], dict):
        fail("config", "a dict of HDET settings", state["config"])


def _migrate_state_v1(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 summed one unweighted mean loss per step: the same mean with weight 1 per step."""
    migrated = dict(state)
    steps = int(state.get("loss_steps", state.get("steps_since_sync", 0)))
    migrated["loss_steps"] = steps
    migrated["loss_weight"] = float(steps)
    migrated["version"] = 2
    return migrated
