"""Fitness-weighted converges (``converge_weights="fitness"``): exploit as well as average.

A plain converge gives every replica the same weight, so a replica whose hyperparameters just did harm (say the
highest LR of a spread that started too high) pulls the shared weights as much as the best one. PBT-style
exploitation copies the best replica instead; a weighted average is its soft form: each replica enters with
weight ``exp(-z)``, where ``z`` is how far its score lies above the ensemble's, in units of the controller's
temperature (``temperature x std`` of the scores in adaptive mode).

Each rank computes its own weight, so the weighted average still needs one all-reduce (the weights' sum rides
in it, `collectives.fused_average_`). That needs a centre and a scale that every rank knows before the
exchange: those of the previous regular converge's scores. The first weighted converge has none and is plain.
With two score rows (``train_and_*`` signals) ``z`` is the mean of the rows' ``z``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["MAX_Z", "fitness_reference", "fitness_weight", "FitnessWeights"]

# |z| is clipped here: one replica can at most weigh e^(2*MAX_Z) times another, and exp() cannot overflow.
MAX_Z = 3.0


def fitness_reference(
    rows: torch.Tensor, scored: torch.Tensor, temperature: float, mode: str
) -> list[tuple[float, float]] | None:
    """``(centre, scale)`` per score row over the scored ranks: their mean, and ``temperature x std``
    (``adaptive``) or ``temperature`` (``fixed``). None when fewer than two ranks were scored or a row's scale
    is 0 or not finite (nothing tells the replicas apart: the next converge stays plain).

    >>> fitness_reference(torch.tensor([[1.0, 3.0]]), torch.tensor([True, True]), 1.0, "adaptive")
    [(2.0, 1.0)]
    """
    rows = rows.double().reshape(-1, rows.shape[-1])
    if int(scored.sum()) < 2:
        return None
    reference = []
    for row in rows:
        good = row[scored]
        if not bool(torch.isfinite(good).all()):
            return None
        scale = temperature * float(good.std(unbiased=False)) if mode == "adaptive" else temperature
        if not (math.isfinite(scale) and scale > 0):
            return None
        reference.append((float(good.mean()), scale))
    return reference


def fitness_weight(scores: Sequence[float], reference: Sequence[tuple[float, float]] | None) -> float:
    """This replica's weight ``exp(-mean z)``, ``z = (score - centre) / scale`` per row, clipped to
    ``[-MAX_Z, MAX_Z]``; 1 without a reference or with a non-finite score (lower loss, larger weight).

    >>> round(fitness_weight([3.0], [(2.0, 1.0)]), 4), fitness_weight([3.0], None)
    (0.3679, 1.0)
    """
    if reference is None or len(scores) != len(reference) or not all(math.isfinite(s) for s in scores):
        return 1.0
    z = sum((s - centre) / scale for s, (centre, scale) in zip(scores, reference)) / len(scores)
    return math.exp(-min(max(z, -MAX_Z), MAX_Z))


class FitnessWeights:
    """The reference the next weighted converge uses (identical on every rank), and its checkpoint state."""

    def __init__(self, temperature: float, mode: str) -> None:
        self.temperature, self.mode = temperature, mode
        self.reference: list[tuple[float, float]] | None = None

    def weight(self, scores: Sequence[float]) -> float:
        return fitness_weight(scores, self.reference)

    def observe(self, rows: torch.Tensor, scored: torch.Tensor) -> None:
        """Take the reference from a regular converge's gathered scores."""
        self.reference = fitness_reference(rows, scored, self.temperature, self.mode)

    def state_dict(self) -> dict[str, Any]:
        return {"fitness_reference": [list(pair) for pair in self.reference] if self.reference else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("fitness_reference")
        self.reference = [(float(c), float(s)) for c, s in saved] if saved else None
