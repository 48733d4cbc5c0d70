"""Learning-rate bookkeeping: schedule LRs in, this rank's per-group LRs out, base LRs recorded per step.

The shells' schedulers give the schedule's LR of each param group for the next step; this rank runs
``schedule LR x controller scale x its multiplier``. The base LR (before the multiplier) of every step is
recorded in the run record's ``lr_per_step`` (row ``i`` is optimizer step ``i + 1``), so the run can be
replayed on one device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .registry import HyperparameterRegistry

__all__ = ["set_group_lr", "narrowed", "LearningRates"]


def narrowed(multiplier: Any, scale: float) -> Any:
    """What a step-size interval steps at for ``multiplier`` (a float or tensor): ``1 + scale x (m - 1)``."""
    return multiplier if scale == 1.0 else 1.0 + scale * (multiplier - 1.0)


def set_group_lr(group: dict[str, Any], value: float) -> None:
    """Set one param group's LR (fused/capturable optimizers keep it in a tensor that must change in place)."""
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(value)
    else:
        group["lr"] = value


class LearningRates:
    """This rank's LRs for each step, and the record of the base LRs.

    Args:
        optimizer: its param groups get the LRs.
        registry: the explored hyperparameters (controller scales, multipliers, which group follows which LR).
        rows: the run record's ``lr_per_step`` list, filled in place.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        registry: HyperparameterRegistry,
        rows: list[list[float]],
        step_spread: bool = True,
        fan_out_scale: float = 1.0,
    ) -> None:
        self.optimizer = optimizer
        self.registry = registry
        self.rows = rows
        # False: every rank steps at the base LR; the LR multipliers act through offsets instead (`horizon`).
        self.step_spread = step_spread
        # A step-size interval runs at 1 + fan_out_scale x (m - 1) for multiplier m (`lr_fan_out_scale`).
        self.fan_out_scale = fan_out_scale
        # The last schedule values, re-applied by `apply(None)` (after a resume or a converge).
        self.schedule_lrs: list[float] | None = None

    def values(self, schedule_lrs: Sequence[float], step: int, rank: int) -> list[float]:
        """``rank``'s LR per param group for optimizer ``step``, recording the base LRs of that step."""
        group_hparam = self.registry.group_hparam
        if len(schedule_lrs) != len(group_hparam):
            raise ValueError(
                f"Expected {len(group_hparam)} scheduled LRs (one per param group), but got {len(schedule_lrs)}"
            )
        self.schedule_lrs = list(schedule_lrs)
        controllers = self.registry.controllers
        bases = [lr * controllers[h].scale for lr, h in zip(schedule_lrs, group_hparam)]
        # Index i holds the base LR of optimizer step i + 1; re-applying for the same step overwrites it.
        del self.rows[step - 1 :]
        self.rows.append(bases)
        if not self.step_spread:
            return bases
        return [base * self.step_multiplier(h, step, rank) for base, h in zip(bases, group_hparam)]

    def step_multiplier(self, name: str, step: int, rank: int) -> float:
        """The factor ``rank`` steps at for LR hyperparameter ``name`` at ``step`` in a step-size interval."""
        return narrowed(self.registry.multipliers(name, step)[rank], self.fan_out_scale)

    def apply(self, schedule_lrs: Sequence[float] | None, step: int, rank: int) -> list[float]:
        """Set every param group's LR for ``step``; with None, re-apply the last schedule values."""
        if schedule_lrs is None:
            if self.schedule_lrs is None:
                raise RuntimeError("apply_lr() needs schedule LRs the first time it is called")
            schedule_lrs = self.schedule_lrs
        values = self.values(schedule_lrs, step, rank)
        for group, value in zip(self.optimizer.param_groups, values):
            set_group_lr(group, value)
        return values

    def bases_at(self, step: int) -> dict[str, float]:
        """Base LR of each LR hyperparameter at optimizer ``step`` (the last recorded one if not recorded)."""
        bases: dict[str, float] = {}
        if self.rows:
            row = self.rows[min(step - 1, len(self.rows) - 1)]
            for value, name in zip(row, self.registry.group_hparam):
                bases.setdefault(name, value)
        return bases
