"""A floor under the adaptive temperature: the train-loss vote is never sized by differences smaller than its noise.

The adaptive temperature divides the replicas' score differences by their spread, so that the vote does not depend
on the loss's scale. With two replicas that standardisation leaves nothing: two standardised scores are always
-1 and +1, so every two-replica vote is full-size (softmax weights 0.881 / 0.119) whether the train losses differ
by a tenth of their noise or by ten times it. A run of such noise votes that happen to agree with the probe moves
the LR as far as a real signal would (BENCHMARKS.md, reading 32). With the floor the temperature is
``temperature x max(spread, noise)``, where ``noise`` is the standard deviation of one replica's window loss
(`score_window.ScoreWindow.mean_variance`, averaged over the scored replicas): a gap beyond twice the noise still
votes full-size, a smaller one proportionally less, or with ``--hdet_controller_abstain_within_noise`` not at all (the
row's vote is 0, so an agreement rule holds).

Only the train-loss row has a noise estimate (each rank's own batches). The probe scores every replica on the same
batch, so its differences are not sampling noise of that kind and keep the plain adaptive temperature: scored in
parts, the probe's paired noise was 2-50x below its gaps, and a floor at it changed no result (BENCHMARKS.md,
reading 33). With three
or more replicas the standardised scores keep their shape (noise votes point different ways and partly cancel),
so ``two_replicas``, the default, leaves those runs as they were.

Pure math (no collectives); the engine gathers the variances with the converge's statistics.

Example:
    >>> import torch
    >>> round(score_noise(torch.tensor([0.04, 0.0036]), torch.tensor([True, True])), 4)  # sqrt(mean variance)
    0.1476
    >>> score_noise(torch.tensor([0.04, float("nan")]), torch.tensor([True, True])) is None  # one has no estimate
    True
"""

from __future__ import annotations

import math

import torch

from .config import NOISE_FLOORS, HDETConfig

__all__ = ["NOISE_FLOORS", "uses_noise_floor", "score_noise"]


def uses_noise_floor(config: HDETConfig, replicas: int) -> bool:
    """Whether a run floors the train-loss row's temperature at its noise (``--hdet_controller_noise_floor``):
    ``always``, or ``two_replicas`` (the default) with exactly two replicas; only the adaptive temperature has a
    spread to floor."""
    if config.controller_temperature_mode != "adaptive" or config.controller_noise_floor == "off":
        return False
    return config.controller_noise_floor == "always" or replicas == 2


def score_noise(variances: torch.Tensor, scored: torch.Tensor) -> float | None:
    """The standard deviation of one replica's window loss: the square root of the scored replicas' mean
    variance. None when a scored replica has no estimate (fewer than two optimizer steps in its window) or none
    was scored: that converge's vote keeps the plain adaptive temperature."""
    values = variances.double().flatten()[scored.flatten().bool()].tolist()
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        return None
    # fsum in rank order: every rank computes the same bits from the same gathered numbers.
    return math.sqrt(math.fsum(values) / len(values))
