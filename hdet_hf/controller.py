"""The auto controller: a zero-order hypergradient from replica losses, as pure tensor math.

Nothing here knows about processes. The engine gathers each rank's mean loss and multiplier at a converge
and calls `controller_step`; tests call it with hand-made numbers.

The paper's update, for values ``x_r = base * m_r`` run by the ranks:
    w = softmax((mean(loss) - loss) / sigma)
    delta = sum_r w_r x_r - mean_r x_r
    v = beta * v + (1 - beta) * delta
    base = base * (1 - gamma) + lambda * v
We apply it as a *correction factor* on top of the configured schedule (the schedule supplies the decay
that the paper's gamma approximates; its published gamma is negative for OneCycle's defaults and made the
LR grow ~1.3x per converge). Two update rules:
- ``additive`` (paper): ``base += lambda * v`` in value units, then clamped to the allowed range;
- ``multiplicative`` (default): delta measured on ``log m_r``, ``log(scale) += lambda * v``. Scale-free and
  always positive. With ``raise_gain`` g, a move up (v > 0) is ``g * lambda * v``.
Ranks flagged unhealthy (non-finite loss) get weight 0: their multiplier counts as the worst.
With ``noise`` per score row (`noise_floor`), the adaptive temperature's spread is floored at that row's noise. With
``abstain_within_noise`` a row whose spread is below its floor votes 0 (no direction) instead of a smaller vote:
always, or (``raises``) where it asks for a raise.

Example:
    >>> import torch
    >>> state = ControllerState()
    >>> settings = ControllerSettings(temperature=1.0, temperature_mode="adaptive", lr=1.0, momentum=0.0)
    >>> m = torch.tensor([0.5, 1.0, 1.5])
    >>> new, info = controller_step(state, m, torch.tensor([3.0, 2.0, 1.0]), settings, base_value=1e-3)
    >>> new.scale > 1.0   # the high-LR rank had the lowest loss, so the base LR goes up
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "ControllerSettings",
    "ControllerState",
    "loss_weights",
    "within_noise",
    "controller_step",
    "combine_votes",
    "reference_gamma",
    "loss_diverged",
]


@dataclass(frozen=True)
class ControllerSettings:
    temperature: float = 1.0
    temperature_mode: str = "adaptive"
    lr: float = 0.5
    momentum: float = 0.9
    update: str = "multiplicative"
    max_factor: float = 10.0
    # Moves that raise the scale take raise_gain x lr (multiplicative update only; 1 = the paper's symmetry).
    raise_gain: float = 1.0
    # Moves that lower the scale take cut_gain x lr (the engine sets it from controller_two_replica_cut_gain with
    # exactly two replicas, 1 otherwise: `from_config`).
    cut_gain: float = 1.0
    # How several rows of scores (train loss and a probe) make one hypergradient: see `combine_votes`.
    combination: str = "mean"
    # Which votes of a row whose gap is within its noise floor are 0 instead of smaller: "off", "raises" or
    # "always" (`noise_floor`).
    abstain_within_noise: str = "off"

    @classmethod
    def from_config(
        cls, config: Any, replicas: int | None = None, interval_share: float = 1.0
    ) -> ControllerSettings:
        """The ``controller_*`` fields of an `HDETConfig` for a run of ``replicas`` replicas (None: not known,
        cuts at full step). ``interval_share`` (`HDETConfig.controller_interval_share`): one converge's share of
        the interval that lambda and beta are given per; lambda scales with it and beta's memory stays as long in
        steps (``beta ** share``), so a shorter T moves the LR as far over the run, not further."""
        return cls(
            temperature=config.controller_temperature,
            temperature_mode=config.controller_temperature_mode,
            lr=config.controller_lr * interval_share,
            momentum=config.controller_momentum**interval_share,
            update=config.controller_update,
            max_factor=config.controller_max_factor,
            raise_gain=config.controller_raise_gain,
            cut_gain=config.controller_two_replica_cut_gain if replicas == 2 else 1.0,
            combination=config.controller_signal_combination,
            abstain_within_noise=config.controller_abstain_within_noise,
        )


@dataclass(frozen=True)
class ControllerState:
    """Correction factor on the schedule (1 = follow it) and the momentum velocity."""

    scale: float = 1.0
    velocity: float = 0.0


def loss_weights(
    losses: torch.Tensor,
    temperature: float,
    mode: str,
    healthy: torch.Tensor | None = None,
    noise: float | None = None,
) -> torch.Tensor:
    """Softmax weights ``softmax((mean - loss) / sigma)`` over healthy ranks; unhealthy ranks get 0.

    In ``adaptive`` mode ``sigma = temperature * std(healthy losses)``; identical losses give uniform weights.
    ``noise`` (adaptive mode; `noise_floor`): the std is floored at it, so differences within the losses' noise
    give weights near uniform instead of being standardised to full size.
    """
    losses = losses.double()
    healthy = _healthy_mask(losses, healthy)
    if not bool(healthy.any()):
        raise ValueError("Expected at least one healthy rank (finite loss), but all losses are non-finite")
    good = losses[healthy]
    sigma = temperature
    if mode == "adaptive":
        spread = _spread(good)
        if noise is not None and good.numel() > 1:
            spread = max(spread, noise)
        if spread == 0.0:
            sigma = math.inf
        else:
            sigma = temperature * spread
    logits = torch.full_like(losses, -math.inf)
    logits[healthy] = (good.mean() - good) / sigma if math.isfinite(sigma) else torch.zeros_like(good)
    return torch.softmax(logits, dim=0)


def within_noise(
    losses: torch.Tensor, noise: float | None, mode: str, healthy: torch.Tensor | None = None
) -> bool:
    """Whether a row's noise floor binds (`loss_weights`): the healthy replicas' spread of ``losses`` is below
    ``noise``, so their gap is within the noise (adaptive temperature only; False without a floor)."""
    if noise is None or mode != "adaptive":
        return False
    losses = losses.double()
    good = losses[_healthy_mask(losses, healthy)]
    return good.numel() > 1 and _spread(good) < noise


def _healthy_mask(losses: torch.Tensor, healthy: torch.Tensor | None) -> torch.Tensor:
    """The ranks that count: flagged healthy (all by default) and with a finite loss."""
    finite = torch.isfinite(losses)
    return finite if healthy is None else healthy & finite


def _spread(good: torch.Tensor) -> float:
    """The standard deviation of the healthy ranks' losses (0 for one rank): the adaptive temperature's unit."""
    return float(good.std(unbiased=False)) if good.numel() > 1 else 0.0


def controller_step(
    state: ControllerState,
    multipliers: torch.Tensor,
    losses: torch.Tensor,
    settings: ControllerSettings,
    base_value: float,
    healthy: torch.Tensor | None = None,
    delta_cap: float | None = None,
    noise: Sequence[float | None] | None = None,
) -> tuple[ControllerState, dict[str, float | list[float]]]:
    """One controller update. ``base_value`` is the current base (schedule x scale) at this converge.

    ``delta_cap``: the hypergradient used is ``min(delta, delta_cap)`` (the lower of two comparisons' votes,
    see `horizon.PairedVotes`); ``info["raw_delta"]`` keeps the uncapped one.

    ``losses`` holds one score per rank, or several rows of scores (e.g. train loss and averaged probe):
    each row gets its own softmax weights and the update uses the rows' hypergradients combined as
    ``settings.combination`` says (`combine_votes`). ``noise``: per row, the floor under its adaptive temperature
    (`noise_floor`; None: none). Returns the new state and what happened (weights, delta,
    each row's delta) for logs and the schedule metadata.
    """
    rows = losses.reshape(-1, losses.shape[-1])
    floors = list(noise) if noise is not None else [None] * len(rows)
    if len(floors) != len(rows):
        raise ValueError(f"Expected one noise floor per score row ({len(rows)}), but got {len(floors)}")
    row_weights = [
        loss_weights(row, settings.temperature, settings.temperature_mode, healthy, floor)
        for row, floor in zip(rows, floors)
    ]
    weights = torch.stack(row_weights).mean(0)
    m = multipliers.double()
    if settings.update not in ("multiplicative", "additive"):
        raise ValueError(
            f"Expected controller update 'multiplicative' or 'additive', but got {settings.update!r}"
        )
    # The hypergradient is measured on log multipliers (multiplicative) or on the values themselves.
    signal = m.log() if settings.update == "multiplicative" else base_value * m
    row_deltas = [float((w * signal).sum() - signal.mean()) for w in row_weights]
    abstained = [
        settings.abstain_within_noise != "off"
        and (settings.abstain_within_noise == "always" or d > 0)
        and within_noise(row, floor, settings.temperature_mode, healthy)
        for row, floor, d in zip(rows, floors, row_deltas)
    ]
    if any(abstained):
        # A gap inside the noise says nothing about the direction: that row votes 0 (`noise_floor`).
        row_deltas = [0.0 if quiet else d for d, quiet in zip(row_deltas, abstained)]
        delta = raw_delta = combine_votes(row_deltas, settings.combination)
    elif settings.combination == "mean":
        # The mean of the rows' hypergradients, computed from the mean weights as it always was (bit for bit).
        delta = raw_delta = float((weights * signal).sum() - signal.mean())
    else:
        delta = raw_delta = combine_votes(row_deltas, settings.combination)
    if delta_cap is not None:
        delta = min(delta, delta_cap)
    velocity = settings.momentum * state.velocity + (1 - settings.momentum) * delta
    if settings.update == "multiplicative":
        # A raise takes a larger step: the climb from a too-low LR is what the step size limits (one move is
        # at most lr x the largest delta), while a cut needs few moves (BENCHMARKS.md, reading 15).
        gain = settings.raise_gain if velocity > 0 else settings.cut_gain
        # Clamp in log space: exp() of a huge step would overflow before the clamp below.
        log_scale = math.log(state.scale) + gain * settings.lr * velocity
        bound = math.log(settings.max_factor)
        scale = math.exp(min(max(log_scale, -bound), bound))
    else:
        new_base = base_value + settings.lr * velocity
        scale = state.scale * new_base / base_value if base_value > 0 else state.scale
    # Keep the value legal (> 0) and within the allowed band around the schedule; NaN scale cannot happen
    # because non-finite losses were given weight 0 above.
    low, high = 1.0 / settings.max_factor, settings.max_factor
    scale = min(max(scale, low), high)
    info = {
        "weights": weights.tolist(), "delta": delta, "raw_delta": raw_delta, "row_deltas": row_deltas,
        "abstained": abstained,
        "velocity": velocity, "scale": scale,
    }
    return ControllerState(scale=scale, velocity=velocity), info


def combine_votes(row_deltas: list[float], combination: str) -> float:
    """One hypergradient from several signals' (rows') hypergradients.

    ``mean``: their mean. ``agree``: 0 unless every row asks for the same direction, then the smallest move
    any row asks for. ``agree_mean``: 0 unless every row asks for the same direction, then their mean. The
    train loss and the averaged probe are biased in opposite directions (the train loss towards too-small
    steps, the probe towards too-large ones), so the LR that is right lies between what they ask for: when
    they disagree the current LR may be right and the controller holds; when both ask for a move, even the
    one whose bias opposes it does.
    """
    if combination == "mean" or len(row_deltas) == 1:
        return sum(row_deltas) / len(row_deltas)
    if combination not in ("agree", "agree_mean"):
        raise ValueError(
            f"Expected signal combination 'mean', 'agree' or 'agree_mean', but got {combination!r}"
        )
    if all(d > 0 for d in row_deltas):
        return min(row_deltas) if combination == "agree" else sum(row_deltas) / len(row_deltas)
    if all(d < 0 for d in row_deltas):
        return max(row_deltas) if combination == "agree" else sum(row_deltas) / len(row_deltas)
    return 0.0


def reference_gamma(div_factor: float, final_div_factor: float, num_syncs: float) -> float:
    """The reference implementation's per-converge decay ``1 - exp(-log(div/final_div)/K)``.

    Kept to document (and test) its sign error: for OneCycle's defaults (25, 1e4) it is negative, so
    ``base * (1 - gamma)`` grows. The decay that reaches the floor in K converges is ``1 - (1/final_div)**(1/K)``.
    """
    return 1.0 - math.exp(-math.log(div_factor / final_div_factor) / num_syncs)


def loss_diverged(loss: float, last_mean: float | None, first_mean: float | None, factor: float) -> bool:
    """Whether a replica's finite mean loss counts as diverged (``factor`` 0: never).

    Diverged means above ``factor`` x the ensemble mean at the last converge *and* above the ensemble mean at
    the first converge. The second condition keeps the test meaningful near zero loss: once the ensemble has
    nearly memorised its data (mean 0.05), a replica at 0.6 is 12x the mean yet far better than where
    training started, and treating it as diverged (reset, Adam moments zeroed) makes its next steps jump,
    which looked like a chain of divergences in the speed benchmark. A replica that really blew up is back
    at or above the loss it started from.
    """
    if not factor or last_mean is None or not last_mean > 0:
        return False
    return loss > factor * last_mean and (first_mean is None or loss > first_mean)
