"""No net cut after the base schedule's peak (``--hdet_controller_floor_after_peak``).

Once the base LR schedule has started to decay and the early phase is over
(``--hdet_comparison_horizon_start``, 30 % of the run; on OneCycle, the default base schedule, both happen at
30 %), the controller may still raise the LR and take such raises back, but it does not lower the LR below the
factor it had then. With a short warm-up (the Trainer's linear or cosine schedules) cuts stay allowed until the
early phase ends; on a warm-up/stable/decay schedule the decay starts after exploration, so nothing changes
there. Why: a too-high LR does its damage before and around the peak; after it, the schedule's own decay
removes the noise a high LR leaves, and a cut only gives up progress. A DDP run started 3x too high and cut to the best LR at 30 % of the run or later
ended worse than the same run not cut at all (BENCHMARKS.md, reading 16), and the default controller's cuts
from 3x above cost 1-2 points on tasks where the ensemble alone matched DDP (reading 19).

Pure Python: the engine feeds it the schedule's value at each converge and clamps the controller with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PeakFloor"]

# A schedule value this much below the highest one seen counts as "decaying" (float noise in a flat plateau
# must not).
DECAY_TOLERANCE = 1e-6


class PeakFloor:
    """Tracks the base schedule's peak and, once it is passed, each controller's floor (its factor then).

    Example:
        >>> floor = PeakFloor()
        >>> floor.observe(1e-3, {"lr": 0.8}); floor.floor("lr") is None   # still rising
        True
        >>> floor.observe(2e-3, {"lr": 0.6}); floor.observe(1.5e-3, {"lr": 0.7}, armed=False); floor.floor("lr")
        >>> floor.observe(1.2e-3, {"lr": 0.65}); floor.floor("lr")   # decaying and armed
        0.65
    """

    def __init__(self) -> None:
        self.peak: float | None = None  # the highest schedule value seen at a converge
        self.floors: dict[str, float] = {}

    def observe(self, schedule_value: float, scales: dict[str, float], armed: bool = True) -> None:
        """One converge: the schedule's value (without the controller's factor) and the controllers' factors
        before this converge's move. The first ``armed`` converge that sees the schedule below its peak fixes
        the floors (the engine arms it at the end of the early phase, where cuts are the controller's job)."""
        if self.floors:
            return
        if self.peak is None or schedule_value > self.peak:
            self.peak = schedule_value
        elif armed and schedule_value < self.peak * (1.0 - DECAY_TOLERANCE):
            self.floors = dict(scales)

    def floor(self, name: str) -> float | None:
        """The lowest factor ``name``'s controller may take now (None: before the peak, no floor)."""
        return self.floors.get(name)

    def state_dict(self) -> dict[str, Any]:
        return {"peak_floor": {"peak": self.peak, "floors": dict(self.floors)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("peak_floor") or {}
        self.peak = None if saved.get("peak") is None else float(saved["peak"])
        self.floors = {k: float(v) for k, v in (saved.get("floors") or {}).items()}
