"""With two replicas, the line search's third point: the centre of the line (multiplier 1), rebuilt by each replica.

`line_search` fits a parabola through the replicas' ``(m_r, probe loss)`` and needs three distinct multipliers;
two replicas give two, so it could never act (BENCHMARKS.md, reading 30). In shared mode both replicas lie on
one line through its centre (the replicas take the same averaged update), so each can rebuild the centre from
its own weights, with no communication:

- after a step-size interval, from the interval's start ``S`` (the last regular converge's average, which the
  comparison horizon keeps as its anchor): ``w_r = S + m_r D``, so the centre ``S + D = S + (w_r - S) / m_r``;
- after a horizon interval, from the offset it started at: ``w_r = A + c (m_r - 1) Z + D``, so the centre
  ``A + D = w_r - c (m_r - 1) Z``.

The same holds for each replica's interval-mean weights (the averaged probe). Each replica probes its rebuilt
centre (one more forward on the probe batch per converge, on a temporary copy of the trainable parameters that
is freed right after), the score travels in the converge's all-reduce, and
the fit takes the mean over the replicas that were scored: their centres differ only by rounding and by weight
decay's small pull towards each replica's own weights. An interval cut by a forced converge (evaluation,
saving) has no single start, so it has no centre. Runs with three or more replicas never use it.

Pure math (no collectives); the engine decides when it applies (`uses_centre_point`) and probes the weights.

Example:
    >>> import torch
    >>> start, step = [torch.tensor([1.0])], torch.tensor([0.2])
    >>> own = [start[0] + 1.25 * step]   # this replica stepped at 1.25x the base LR
    >>> centre_after_step_size(own, start, 1.25)[0].item()   # where the base LR would have taken it
    1.2000000476837158
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from .line_search import MIN_POINTS
from .score_window import COOLDOWN_SIGNALS

if TYPE_CHECKING:
    from .config import HDETConfig

__all__ = ["uses_centre_point", "centre_after_step_size", "centre_after_offsets", "with_centre"]

CENTRE_MULTIPLIER = 1.0  # the multipliers' mean: the base LR


def uses_centre_point(config: HDETConfig, replicas: int) -> bool:
    """Whether a run adds the rebuilt centre to the line search's points (``--hdet_controller_line_search_centre``,
    on by default): the line search is on and reads a probe scored at the replicas' weights (not after a
    cool-down, which leaves the line), gradients are shared (replicas on one line), the comparison horizon keeps
    the interval start, and there are too few replicas to fit a line without it. (The engine also checks, at each
    converge, that the LR is the only value spread across replicas.)"""
    return (
        config.auto_lr
        and config.controller_line_search_centre
        and config.controller_line_search_threshold > 0
        and config.controller_signal != "train_loss"
        and config.controller_signal not in COOLDOWN_SIGNALS
        and config.gradient_sync == "shared"
        and config.effective_comparison_horizon > 0
        and 1 < replicas < MIN_POINTS
    )


@torch.no_grad()
def centre_after_step_size(
    own: Sequence[torch.Tensor], start: Sequence[torch.Tensor], multiplier: float
) -> list[torch.Tensor]:
    """``start + (own - start) / multiplier``: where the base LR would have taken a replica that stepped at
    ``multiplier`` times it from ``start`` (new tensors)."""
    if not multiplier > 0:
        raise ValueError(f"Expected a step multiplier > 0, but got {multiplier!r}")
    return [s + (w - s) / multiplier for w, s in zip(own, start)]


@torch.no_grad()
def centre_after_offsets(
    own: Sequence[torch.Tensor], direction: Sequence[torch.Tensor], amount: float
) -> list[torch.Tensor]:
    """``own - amount x direction``: a replica that started ``amount x Z`` away from the average, moved back
    (new tensors)."""
    return [w - amount * z for w, z in zip(own, direction)]


def with_centre(
    multipliers: torch.Tensor, losses: torch.Tensor, mask: torch.Tensor, centre_losses: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The line's points with the centre added: ``(1, mean centre loss of the masked-in replicas)`` appended to
    the multipliers, losses and mask. Unchanged when no masked-in replica has a finite centre loss."""
    keep = mask.flatten().bool() & torch.isfinite(centre_losses.double().flatten())
    values = centre_losses.double().flatten()[keep].tolist()
    if not values:
        return multipliers, losses, mask
    # fsum in rank order: every rank computes the same bits from the same gathered numbers.
    centre = math.fsum(values) / len(values)
    return (
        torch.cat([multipliers.double().flatten(), torch.tensor([CENTRE_MULTIPLIER], dtype=torch.float64)]),
        torch.cat([losses.double().flatten(), torch.tensor([centre], dtype=torch.float64)]),
        torch.cat([mask.flatten().bool(), torch.tensor([True])]),
    )
