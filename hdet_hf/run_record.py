"""What a run records as it goes: one `ConvergeReport` per converge, filled into the run's `HDETSchedule`.

The engine owns one `RunRecorder`; its `HDETSchedule` is the object written to ``hdet_schedule.json`` (by the
caller: `HDETSchedule.save_pretrained`) and drawn (`plotting.plot_schedule`), with no intermediate dict
form. The recorder fills its trajectory (one entry per regular converge), the per-step base values of the
non-LR hyperparameters and the divergence events; `learning_rates.LearningRates` fills its ``lr_per_step``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .config import HDETConfig
from .schedule_metadata import HDETSchedule

if TYPE_CHECKING:
    from .registry import HyperparameterRegistry

__all__ = ["ConvergeReport", "SyncReport", "RunRecorder", "RunRecordViews"]

logger = logging.getLogger(__name__)


@dataclass
class ConvergeReport:
    """What one converge measured and decided (one entry of the schedule's trajectory)."""

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
    # The train loss's noise that floored the vote's temperature (`noise_floor`; None: no floor at this converge).
    loss_noise: float | None = None
    # The probe's line-search optimum m* at this converge (`line_search`; None: no fit).
    line_search_optimum: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The trajectory entry (``regular`` is left out: only regular converges are recorded)."""
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
            "loss_noise": self.loss_noise,
            "line_search_optimum": self.line_search_optimum,
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
        if self.loss_noise is not None:
            logs["hdet/loss_noise"] = self.loss_noise
        logs["hdet/excluded_ranks"] = float(len(self.excluded_ranks))
        return logs


# The name before "converge" became the one word for parameter averaging; kept for code that imports it.
SyncReport = ConvergeReport


class RunRecorder:
    """Fills the run's `HDETSchedule` (``record``) as the run goes.

    Args:
        config: the run's settings (recorded as a plain dict).
        world_size, total_steps: the run's shape.
        optimizer: its param groups name the ``lr_per_step`` columns.
    """

    def __init__(
        self, config: HDETConfig, world_size: int, total_steps: int, optimizer: torch.optim.Optimizer
    ) -> None:
        self.optimizer = optimizer
        self.record = HDETSchedule(
            config=config.to_dict(),
            world_size=world_size,
            total_steps=total_steps,
            sync_interval=config.sync_interval,
        )

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        return self.record.trajectory

    def record_values(self, base_values: dict[str, float]) -> None:
        """Base values of the non-LR hyperparameters in the step just taken."""
        for name, value in base_values.items():
            self.record.values_per_step.setdefault(name, []).append(value)

    def record_converge(self, report: ConvergeReport, rank: int) -> None:
        """Append a regular converge to the trajectory (and log it on rank 0)."""
        self.record.trajectory.append(report.to_dict())
        if rank == 0:
            logger.info(
                "HDET converge at step %d: base %s, losses %s%s",
                report.step,
                {k: f"{v:.3g}" for k, v in report.base.items()},
                [f"{x:.4f}" for x in report.losses],
                f", scale {report.scale}" if report.controller_active else "",
            )

    def record_divergence(
        self, step: int, excluded: list[int], losses: list[float], multipliers: dict[str, list[float]], rank: int
    ) -> None:
        """One event per replica left out of the average (logged on rank 0)."""
        for bad in excluded:
            event = {
                "step": step,
                "rank": bad,
                "loss": float(losses[bad]),
                "multipliers": {name: values[bad] for name, values in multipliers.items()},
            }
            self.record.divergence_events.append(event)
            if rank == 0:
                logger.warning(
                    "HDET: replica %d (multipliers %s) diverged at step %d (loss %s); it was left out of the "
                    "average and reset to it.",
                    bad,
                    event["multipliers"],
                    step,
                    event["loss"],
                )

    def schedule(self, step: int, names: list[str]) -> HDETSchedule:
        """The record as of optimizer ``step``, exploring ``names`` (a shallow view: no copy of the tables).

        ``lr_per_step`` ends at the last step taken: the row after it holds an LR set for a step that has not
        run (one row before the first step).
        """
        return dataclasses.replace(
            self.record,
            hyperparameters=list(names),
            param_group_names=[
                str(g.get("name", f"group_{i}")) for i, g in enumerate(self.optimizer.param_groups)
            ],
            lr_per_step=self.record.lr_per_step[: max(step, 1)],
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "lr_per_step": [list(row) for row in self.record.lr_per_step],
            "trajectory": self.record.trajectory,
            "values_per_step": self.record.values_per_step,
            "divergence_events": self.record.divergence_events,
            "extra": self.record.extra,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the tables in place (`LearningRates` shares the ``lr_per_step`` list)."""
        self.record.lr_per_step[:] = [list(row) for row in state["lr_per_step"]]
        self.record.trajectory[:] = list(state["trajectory"])
        self.record.values_per_step.clear()
        self.record.values_per_step.update({k: list(v) for k, v in state.get("values_per_step", {}).items()})
        self.record.divergence_events[:] = list(state.get("divergence_events", []))
        self.record.extra.update(state.get("extra", {}))  # e.g. the start race (saved since session 40)


class RunRecordViews:
    """The engine's read-only views of its run record (read by the shells, scripts and tests).

    Mixed into `HDETEngine`, which provides the attributes annotated here.
    """

    recorder: RunRecorder
    registry: HyperparameterRegistry
    step: int

    def schedule(self) -> HDETSchedule:
        """The run record so far (``hdet_schedule.json``'s content): write it with ``save_pretrained``."""
        return self.recorder.schedule(self.step, self.registry.names)

    @property
    def lr_per_step(self) -> list[list[float]]:
        return self.recorder.record.lr_per_step

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        return self.recorder.record.trajectory

    @property
    def values_per_step(self) -> dict[str, list[float]]:
        return self.recorder.record.values_per_step

    @property
    def divergence_events(self) -> list[dict[str, Any]]:
        return self.recorder.record.divergence_events
