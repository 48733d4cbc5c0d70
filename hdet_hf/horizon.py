"""Compare replicas over a longer horizon than one interval: offsets along the run's recent direction.

In shared mode every replica takes the ensemble's averaged gradient, so between two converges replica r is
at ``start + m_r * D``: every score is a line search along one interval's update ``D``. Over a few dozen
steps a smaller step looks better (the noise a larger one adds settles fast, its extra progress builds up
slowly), so the controller cuts the LR more the longer the run (short-horizon bias, arXiv 1803.02021;
BENCHMARKS.md, "The controller", readings 10 and 12). A longer interval compares over a longer horizon but
leaves fewer decisions.

Here every rank keeps ``Z``, a discounted sum of the ensemble's interval updates,
``Z = decay * Z + (average - anchor)`` with ``anchor`` the previous regular converge's average and
``decay = exp(-T / H)``: to first order, how much further the run would be had its LR been ``e`` times
larger over about the last ``H`` steps. Every rank then steps at the base LR (no step-size fan-out), and
after each regular converge replica r starts its interval at ``average + (1 - decay) * (m_r - 1) * Z``:
displaced along the LR's tangent over ``H`` steps by about as much as the fan-out would move it in one
interval. Its scores then compare LRs over ``H`` steps while the controller still decides every ``T``
(a first version, with the fan-out kept and offsets ``(m_r - 1) * Z``, compared better LRs but cost too
much: BENCHMARKS.md, reading 12). The offsets average to zero (the multipliers' mean is 1), so the next
average is still the ensemble's.

All ranks compute the same anchor and ``Z`` from the same average: no communication. Costs two copies of
the trainable parameters per process while exploring (freed when exploration ends). Forced converges
(before saving or evaluating) leave the offsets out for the rest of that interval, so a saved or evaluated
model is the plain average.

Early in a run the horizon's comparison asks for a larger LR at every LR, also 3x above the best one, while
one-interval comparisons are biased one way or the other depending on the task (BENCHMARKS.md, reading 13).
Before ``comparison_horizon_start`` the default (``early_comparison='lower_of_both'``) alternates the two
kinds of interval and moves by the lower of their latest hypergradients (`PairedVotes`): the LR goes up only
when both comparisons ask for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["horizon_decay", "compares_by_offsets", "HorizonOffsets", "PairedVotes"]


def horizon_decay(sync_interval: int, horizon_steps: float) -> float:
    """Per-converge discount ``exp(-T / H)`` of the accumulated direction; 0 (off) when ``H`` is 0."""
    if horizon_steps <= 0:
        return 0.0
    return math.exp(-sync_interval / horizon_steps)


def compares_by_offsets(interval_start: int, sync_interval: int, horizon_start: int, early_comparison: str) -> bool:
    """With a horizon: whether the interval starting at ``interval_start`` compares replicas by offsets along ``Z``
    (every rank at the base LR) rather than by step size. From ``horizon_start`` on always; before it
    ``early_comparison="lower_of_both"`` alternates the two kinds (`PairedVotes`), starting with step size."""
    if interval_start >= horizon_start:
        return True
    return early_comparison == "lower_of_both" and (interval_start // sync_interval) % 2 == 1


class HorizonOffsets:
    """The anchor (last regular average) and the discounted direction ``Z``, one tensor per parameter."""

    def __init__(self, decay: float, interval_share: float = 1.0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"Expected a discount in [0, 1), but got {decay!r}")
        if not 0.0 < interval_share <= 1.0:
            raise ValueError(f"Expected an interval share in (0, 1], but got {interval_share!r}")
        self.decay = decay
        self.enabled = decay > 0.0
        # Replica r sits at the average + offset_scale x (m_r - 1) x Z. ``1 - decay`` scales the drift part of
        # Z (about the last ~H/T intervals' updates) back to one interval's: the replicas are as far apart as
        # the step-size fan-out puts them, but along the run's direction over H steps. With T shorter than the
        # default interval (``interval_share`` = T / T_default < 1, `HDETConfig.controller_interval_share`) they
        # are set as far apart as at the default interval: one T's update is too small a gap to show above the
        # noise of a T-step window (BENCHMARKS.md, reading 37).
        self.offset_scale = min(1.0, (1.0 - decay) / interval_share)
        self.anchors: list[torch.Tensor] | None = None
        self.directions: list[torch.Tensor] | None = None
        # Whether the replicas sit at their offsets (set on every rank alike, also where m_r - 1 is 0, because
        # it decides whether a forced converge runs its collective); any converge clears it.
        self.offsets_in_place = False
        # Regular converges taken in since the last release: after the first, Z is still zero (nothing to
        # measure an update from), so the next interval's replicas all start at the average.
        self.updates = 0

    @property
    def has_direction(self) -> bool:
        """Whether ``Z`` holds an update yet, i.e. whether offsets along it displace the replicas at all."""
        return self.directions is not None and self.updates >= 2

    @torch.no_grad()
    def update_(self, average: Sequence[torch.Tensor]) -> None:
        """Take in one interval's update: ``average`` holds the fresh average of a regular converge."""
        self.offsets_in_place = False
        if self.anchors is None or self.directions is None:
            # The first regular converge: no earlier average to measure an update from.
            self.anchors = [p.clone() for p in average]
            self.directions = [torch.zeros_like(p) for p in average]
            self.updates = 1
            return
        self.updates += 1
        for param, anchor, direction in zip(average, self.anchors, self.directions):
            direction.mul_(self.decay).add_(param).sub_(anchor)
            anchor.copy_(param)

    @torch.no_grad()
    def discount_(self) -> None:
        """A regular converge that averaged nothing (`HDETEngine.keeps_fan_out`): ``Z *= decay``, the anchor kept, so
        the next `update_` adds the whole update since the anchor with the discount of every converge between."""
        if self.directions is not None:
            for direction in self.directions:
                direction.mul_(self.decay)

    @torch.no_grad()
    def offset_(self, params: Sequence[torch.Tensor], amount: float) -> None:
        """In place: ``params += amount * Z`` (``amount`` is this replica's ``m_r - 1``)."""
        self.offsets_in_place = True
        if self.directions is None or amount == 0.0:
            return
        for param, direction in zip(params, self.directions):
            param.add_(direction, alpha=amount)

    def release(self) -> None:
        """Free the anchor and ``Z`` (after exploration); a later `update_` would start afresh."""
        self.anchors = self.directions = None
        self.offsets_in_place = False
        self.updates = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "horizon_anchors": self.anchors,
            "horizon_directions": self.directions,
            "horizon_updates": self.updates,
            "horizon_offsets_in_place": self.offsets_in_place,
        }

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        anchors, directions = state.get("horizon_anchors"), state.get("horizon_directions")
        self.anchors = [t.to(device) for t in anchors] if anchors is not None else None
        self.directions = [t.to(device) for t in directions] if directions is not None else None
        # Saved before the count existed: a saved Z is taken to hold an update.
        self.updates = int(state.get("horizon_updates", 2 if directions is not None else 0))
        # Saved before session 35: unknown, taken as not in place (a forced converge right after such a resume,
        # before any step, then skipped its average).
        self.offsets_in_place = bool(state.get("horizon_offsets_in_place", False))


class PairedVotes:
    """The latest hypergradient of each kind of interval (step-size fan-out, horizon offsets) while the two
    alternate; the controller moves by the lower of the current one and the other kind's latest."""

    KINDS = ("one_interval", "horizon")

    def __init__(self) -> None:
        self.latest: dict[str, float | None] = dict.fromkeys(self.KINDS)

    def cap(self, kind: str) -> float:
        """The bound on an interval of ``kind``'s hypergradient: the other kind's latest, or 0 before it has
        one (no raise on one comparison's word)."""
        other = self.latest[self.KINDS[1 - self.KINDS.index(kind)]]
        return 0.0 if other is None else other

    def record(self, kind: str, raw_delta: float) -> None:
        self.latest[kind] = float(raw_delta)

    def state_dict(self) -> dict[str, Any]:
        return {"paired_votes": dict(self.latest)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("paired_votes") or {}
        self.latest = {k: (None if saved.get(k) is None else float(saved[k])) for k in self.KINDS}
