"""The start race: before the first step, each replica trains a copy of the initial weights at its own constant LR.

Replica ``r`` of ``N`` races ``start x max_factor ** (r / (N - 1))`` (the start LR up to the controller's bound),
all on the same batches, then every replica scores its copy on the same probe examples. The run keeps its
initial weights and starts the base LR at the winner's multiplier when every larger LR beat the start (the start
came last) and the winner beat it by ``significance`` paired standard errors over the probe's examples; otherwise
at 1 (the race changed nothing).

Why the start must come last: the standard error over the probe's examples measures the probe's noise, not the
race's. At or above the right LR a from-scratch language model's candidates sit on a noisy plateau where one of
them beats the start by 4 standard errors by chance (task f at its best LR, reading 45), while another does worse;
far below the right LR every larger candidate does better.

It only ever raises. A race of constant LRs from the initial weights favours small steps (the short-horizon bias,
arXiv 1803.02021): on the from-scratch language models of BENCHMARKS.md it picks 0.1-0.3x the sweep's best LR
(reading 43), so its pick is a lower bound on the right LR. A race that says "higher than the start" is evidence
the start is too low; one that says "lower" is what the race says at any LR. Measured in reading 45.

Pure math, no torch.distributed: the Trainer runs the race and gathers the probe losses (`trainer.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["race_multipliers", "RaceDecision", "decide_race"]


def race_multipliers(world_size: int, max_factor: float) -> list[float]:
    """Each replica's LR multiplier in the race: geometric from 1 (replica 0) to ``max_factor`` (the last)."""
    if world_size < 2:
        raise ValueError(f"The start race needs at least 2 replicas, got {world_size}.")
    return [max_factor ** (r / (world_size - 1)) for r in range(world_size)]


@dataclass(frozen=True)
class RaceDecision:
    """The race's outcome: the base LR's starting scale and what it was decided on (JSON-ready)."""

    scale: float
    multipliers: list[float]
    probe_losses: list[float]  # each replica's mean probe loss (inf where its copy diverged)
    winner: int
    gap: float  # the start replica's mean probe loss minus the winner's
    standard_error: float  # of that gap, paired over the probe's examples
    start_came_last: bool  # every larger LR beat the start

    def to_dict(self) -> dict[str, object]:
        return {
            "scale": self.scale,
            "multipliers": self.multipliers,
            "probe_losses": self.probe_losses,
            "winner": self.winner,
            "gap": self.gap,
            "standard_error": self.standard_error,
            "start_came_last": self.start_came_last,
        }


def decide_race(per_example: torch.Tensor, multipliers: list[float], significance: float) -> RaceDecision:
    """The starting scale from ``per_example`` (``[replicas, examples]`` probe losses; replica 0 raced the start).

    The winner is the replica with the lowest mean probe loss (a non-finite row cannot win). The scale is its
    multiplier when replica 0 (the start) has the highest mean of all and the winner's gap to it is at least
    ``significance`` standard errors of the paired differences over the examples, else 1. With a single example,
    or a start whose copy diverged, there is no standard error to test against and the scale stays 1.
    """
    losses = per_example.detach().to(torch.float64)
    if losses.dim() != 2 or losses.shape[0] != len(multipliers):
        raise ValueError(f"Expected [{len(multipliers)}, examples] probe losses, got shape {tuple(losses.shape)}.")
    finite = torch.isfinite(losses).all(dim=1)
    means = torch.where(finite, losses.mean(dim=1), torch.full_like(losses[:, 0], math.inf))
    winner = int(torch.argmin(means))
    gap, se = 0.0, math.inf
    if winner != 0 and bool(finite[0]) and losses.shape[1] >= 2:
        differences = losses[0] - losses[winner]
        gap = float(differences.mean())
        se = float(differences.std(unbiased=True)) / math.sqrt(losses.shape[1])
    start_came_last = bool(finite[0]) and bool((means[1:] < means[0]).all())
    raised = winner != 0 and start_came_last and gap > 0 and gap >= significance * se
    scale = multipliers[winner] if raised else 1.0
    return RaceDecision(
        scale=float(scale),
        multipliers=[float(m) for m in multipliers],
        probe_losses=[float(m) for m in means],
        winner=winner,
        gap=gap,
        standard_error=se if math.isfinite(se) else 0.0,
        start_came_last=start_came_last,
    )
