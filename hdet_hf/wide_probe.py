"""Far below the right LR, read the probe far along the run's update (``--hdet_controller_wide_probe_threshold``).

After a regular converge every replica holds the average ``A``; the previous regular converge left ``P``. The
ensemble's update over the interval is ``D = A - P``. The probe loss at ``P + k D`` for ``k`` = 1, 2, 4, ..., 32
asks how many times further than it went the run could have stepped along that update. The answer ``k*`` (the
first local minimum scanning up from ``k = 1``) seemed to tell the starts apart on six tasks (seed 0) where the
replicas' own line search (`line_search`, a fit over multipliers 0.7-1.3) could not: in the first 10-15 % of a run
``k*`` was 16-32 at 10x below the sweep's best LR, 2-4 at 2.5x below, and at most 8 at the best LR or 3x above
(BENCHMARKS.md, reading 26; ``benchmarks/controller_wide_probe``). On more seeds it did not: at the best LR two of
six classifier runs read 16 and 32 at step 20 and were raised 4x and 8x (reading 27). So the setting is off by
default and not recommended; it stays, with its measured rows, for the record and for further work.

So while it is on, each regular converge reads ``k*`` (each rank probes its share of the grid on the averaged
weights, restored afterwards; one small all-reduce shares the losses) and, when ``k* >= threshold``, the
controller's factor becomes at least ``min(k* / LONG_STEP_BIAS, max_raise)`` times what it was before this
converge: dividing by 4 allows for the probe's preference for long steps (``k*`` 2-4 at the right LR). The
reading repeats only while it keeps finding ``k* >= threshold``: the first converge that reads less ends it for
the run, so at a right or too-high LR it costs one converge's probes, and the raise it gives always comes first.

Pure math and bookkeeping: the engine does the probing.

Example:
    >>> probe = WideProbe(threshold=16.0, max_raise=4.0)
    >>> wide_optimum(WIDE_GRID, [5.0, 4.8, 4.5, 4.1, 3.9, 4.3])   # falls until k = 16, then rises
    16.0
    >>> probe.observe(16.0), probe.active   # far below: raise 4x, read again at the next converge
    (4.0, True)
    >>> probe.observe(4.0), probe.active    # a right LR now: no raise, and the reading ends for the run
    (1.0, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["WIDE_GRID", "LONG_STEP_BIAS", "wide_optimum", "WideProbe"]

# Multiples of the interval's update at which the probe is read (k = 1 is the average itself).
WIDE_GRID: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# At the sweep's best LR the probe's optimum along the update was 2-4 (reading 26): a raise of k*/4 aims there.
LONG_STEP_BIAS = 4.0


def wide_optimum(grid: Sequence[float], losses: Sequence[float]) -> float:
    """The first local minimum of ``losses`` over ``grid`` scanning up from its first point (a non-finite loss
    stops the scan: a step that far broke the model)."""
    if len(grid) != len(losses) or not grid:
        raise ValueError(f"Expected one loss per grid point, but got {len(losses)} losses for {len(grid)} points")
    index = 0
    while index + 1 < len(grid) and losses[index + 1] < losses[index]:
        index += 1
    return float(grid[index])


class WideProbe:
    """Whether the wide reading still runs, and the raise factor each reading allows (1.0: none)."""

    def __init__(self, threshold: float, max_raise: float) -> None:
        self.threshold = threshold
        self.max_raise = max_raise
        self.finished = False  # a reading found k* < threshold: never read again in this run
        self.readings: list[tuple[int, float]] = []  # (step, k*) for the run record

    @property
    def enabled(self) -> bool:
        return self.threshold > 0

    @property
    def active(self) -> bool:
        return self.enabled and not self.finished

    def observe(self, optimum: float, step: int = -1) -> float:
        """Take in one reading's ``k*`` and return the least raise factor it allows."""
        self.readings.append((step, optimum))
        if optimum < self.threshold:
            self.finished = True
            return 1.0
        return max(1.0, min(optimum / LONG_STEP_BIAS, self.max_raise))

    def state_dict(self) -> dict[str, Any]:
        return {"wide_probe": {"finished": self.finished, "readings": [list(r) for r in self.readings]}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("wide_probe") or {}
        self.finished = bool(saved.get("finished", False))
        self.readings = [(int(step), float(k)) for step, k in saved.get("readings", [])]
