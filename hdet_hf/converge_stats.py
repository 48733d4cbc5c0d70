"""The per-rank statistics a converge gathers, by name: one row per rank, one named column per number.

Each rank fills its own row (its window loss, the signal the controller scores it on, whether it is healthy
and whether it is scored, its probe loss at the line's rebuilt centre (`centre_point`; NaN where unused), the variance of its window loss
(`noise_floor`; NaN without an estimate), and its multiplier of every explored hyperparameter); the converge's one
all-reduce turns the rows into a ``[world_size, columns]`` table on every rank (`collectives.fused_average_`).
This module only knows the layout: no torch.distributed here.

Example:
    >>> import torch
    >>> layout = StatsLayout(["lr"])
    >>> row = layout.row(loss=2.0, signal=2.0, healthy=True, scored=True, multipliers={"lr": 1.5})
    >>> table = layout.read(torch.stack([row, row]))
    >>> table.losses.tolist(), table.multipliers["lr"], table.scored.tolist()
    ([2.0, 2.0], [1.5, 1.5], [True, True])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

__all__ = ["StatsLayout", "GatheredStats"]


@dataclass(frozen=True)
class GatheredStats:
    """Every rank's statistics at one converge (index = rank)."""

    losses: torch.Tensor  # float64: window mean loss (NaN: no score)
    signals: torch.Tensor  # float64: what the controller compares (the probe loss, or the window loss)
    healthy: torch.Tensor  # bool: entered the average
    scored: torch.Tensor  # bool: counts for the controller and the divergence reference
    multipliers: dict[str, list[float]]  # per hyperparameter, every rank's multiplier in the interval
    centres: torch.Tensor  # float64: the probe loss at the line's centre as each rank rebuilt it (NaN: none)
    loss_variances: torch.Tensor  # float64: the variance of each rank's window loss (NaN: no estimate)
    # float64: the mean loss since the last converge (the window's, unless votes span converges; NaN: none)
    recent_losses: torch.Tensor

    def excluded_ranks(self) -> list[int]:
        return [rank for rank, ok in enumerate(self.healthy.tolist()) if not ok]


class StatsLayout:
    """Columns of the gathered table: seven fixed ones, then one multiplier column per hyperparameter."""

    LOSS, SIGNAL, HEALTHY, SCORED, CENTRE, LOSS_VARIANCE, RECENT_LOSS = range(7)
    FIXED = 7

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)

    @property
    def width(self) -> int:
        return self.FIXED + len(self.names)

    def row(
        self,
        *,
        loss: float,
        signal: float,
        healthy: bool,
        scored: bool,
        multipliers: Mapping[str, float],
        centre: float = math.nan,
        loss_variance: float = math.nan,
        recent_loss: float | None = None,
    ) -> torch.Tensor:
        """This rank's row (float64); ``recent_loss`` defaults to ``loss`` (a window that began at the last
        converge)."""
        values = [0.0] * self.width
        values[self.LOSS] = loss
        values[self.SIGNAL] = signal
        values[self.HEALTHY] = float(healthy)
        values[self.SCORED] = float(scored)
        values[self.CENTRE] = centre
        values[self.LOSS_VARIANCE] = loss_variance
        values[self.RECENT_LOSS] = loss if recent_loss is None else recent_loss
        for i, name in enumerate(self.names):
            values[self.FIXED + i] = multipliers[name]
        return torch.tensor(values, dtype=torch.float64)

    def read(self, table: torch.Tensor) -> GatheredStats:
        """Name the columns of the ``[world_size, width]`` table."""
        return GatheredStats(
            losses=table[:, self.LOSS],
            signals=table[:, self.SIGNAL],
            # Flags travel as 0.0/1.0 (in float32 when the buffer is): compare with 0.5, not equality.
            healthy=table[:, self.HEALTHY] > 0.5,
            scored=table[:, self.SCORED] > 0.5,
            multipliers={name: table[:, self.FIXED + i].tolist() for i, name in enumerate(self.names)},
            centres=table[:, self.CENTRE],
            loss_variances=table[:, self.LOSS_VARIANCE],
            recent_losses=table[:, self.RECENT_LOSS],
        )
