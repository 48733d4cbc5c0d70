"""A floor under the adaptive temperature: the train-loss vote is never sized by differences smaller than its noise.

The adaptive temperature divides the replicas' score differences by their spread, so that the vote does not depend
on the loss's scale. With two replicas that standardisation leaves nothing: two standardised scores are always
-1 and +1, so every two-replica vote is full-size (softmax weights 0.881 / 0.119) whether the train losses differ
by a tenth of their noise or by ten times it. A run of such noise votes that happen to agree with the probe moves
the LR as far as a real signal would (BENCHMARKS.md, reading 32). With the floor the temperature is
``temperature x max(spread, noise)``, where ``noise`` is the standard deviation of one replica's window loss
(`score_window.ScoreWindow.mean_variance`, averaged over the scored replicas): a gap beyond twice the noise still
votes full-size, a smaller one proportionally less.

The probe scores every replica on the same batch, so its noise is not the train loss's: it is how far the gap
measured on those few examples can sit from the gap on the data they stand for. With
``--hdet_controller_probe_noise_parts K`` the probe batch is scored in K parts (`probe_noise`): the spread of the
replicas' paired part differences gives the standard error of the probe gap, and over sqrt 2 it is in the train
row's units (one replica's score), so both rows are floored alike. With three or more replicas the standardised
scores keep their shape (noise votes point different ways and partly cancel), so ``two_replicas``, the default,
leaves those runs as they were.

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

__all__ = ["NOISE_FLOORS", "uses_noise_floor", "probe_noise_parts", "score_noise", "probe_noise"]


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


def probe_noise_parts(config: HDETConfig, replicas: int) -> int:
    """How many parts the probe batch is scored in (0: one score, no probe noise floor): where the run floors its
    train-loss vote (`uses_noise_floor`), controls a hyperparameter on a probe, and asks for parts
    (``--hdet_controller_probe_noise_parts``)."""
    if config.controller_signal == "train_loss" or not uses_noise_floor(config, replicas):
        return 0
    return config.controller_probe_noise_parts


def probe_noise(parts: torch.Tensor, scored: torch.Tensor) -> float | None:
    """The probe row's floor: the standard deviation of one replica's probe score in the train row's units.

    ``parts`` is ``[replicas, K]``: each replica's loss on the probe batch's K parts (the same parts for every
    replica). For a pair of replicas the gap's variance is ``var_k(a_k - b_k) / K`` (paired, so what the parts have
    in common cancels); the floor is ``sqrt(mean over pairs of that / 2)``, as the train row's noise is one replica's
    and a gap between two independent replicas has twice its variance. None when fewer than two scored replicas
    have every part finite, or there are fewer than two parts.
    """
    table = parts.double()
    keep = scored.flatten().bool() & torch.isfinite(table).all(dim=1)
    rows = table[keep]
    count, width = rows.shape if rows.dim() == 2 else (0, 0)
    if count < 2 or width < 2:
        return None
    variances = [
        float((rows[i] - rows[j]).var(unbiased=True)) / width for i in range(count) for j in range(i + 1, count)
    ]
    # fsum in pair order: every rank computes the same bits from the same gathered numbers.
    return math.sqrt(math.fsum(variances) / len(variances) / 2.0)
