"""What one replica accumulates between two converges to be scored: its loss, and its mean weights.

- The window loss is an item-weighted mean: the sum of (micro-batch mean loss x its labelled items) over the
  summed items, so ranks with ragged batches are compared per token, not per batch. It stays on the
  loss's device (no host sync per micro-batch).
- The noise of that mean (`ScoreWindow.mean_variance`, for `noise_floor`): the variance of one optimizer step's
  loss from the successive differences of the steps' losses (half their mean square; a loss trend within the
  window barely touches it), times ``sum(W^2) / sum(W)^2`` over the steps' items ``W`` (the weighted mean of
  independent steps). Per optimizer step, not per micro-batch: gradient accumulation does not change it.
- With ``controller_time_scale="vote"`` a window spans several converges (the vote's); `mark` notes the sums at
  each converge in between, so `recent_mean_loss` (the divergence guard's) covers only the steps since then.
- With an averaged probe signal, the running mean of the replica's parameters over the vote's steps
  (`averaged_probe`): the probe scores the replica there instead of at its last iterate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["ScoreWindow", "probe_at", "AVERAGED_SIGNALS", "PROBE_ONLY_SIGNALS", "COOLDOWN_SIGNALS"]

# Controller signals scored at each replica's mean weights over the interval, and those that need no train loss.
AVERAGED_SIGNALS = ("averaged_probe", "train_and_averaged_probe")
PROBE_ONLY_SIGNALS = ("probe", "averaged_probe", "cooldown_probe")
# Signals scored after a short LR cool-down on copies of each replica (`cooldown`).
COOLDOWN_SIGNALS = ("cooldown_probe", "train_and_cooldown_probe")


class ScoreWindow:
    """One replica's loss sums and parameter mean since the last vote (every converge, unless votes span several)."""

    _NOISE = ("loss_diff_sq_sum", "loss_diff_count", "loss_weight_sq_sum", "loss_previous")
    _SUMS = ("loss_sum", "loss_weight", "step_loss_sum", "step_loss_weight", *_NOISE)

    def __init__(self, track_noise: bool = True) -> None:
        # Whether the steps' losses are folded into the noise sums (`mean_variance` is NaN otherwise): a few
        # small tensor ops per step, spent only where a run floors its votes (`noise_floor`).
        self.track_noise = track_noise
        self.loss_sum = torch.zeros((), dtype=torch.float64)
        self.loss_weight = torch.zeros((), dtype=torch.float64)
        # The current optimizer step's sums (its micro-batches), folded into the noise sums by `end_step`.
        self.step_loss_sum = torch.zeros((), dtype=torch.float64)
        self.step_loss_weight = torch.zeros((), dtype=torch.float64)
        # The noise of the mean: squared differences of successive steps' losses, their count, the steps'
        # squared item counts, and the last step's loss (NaN: none yet).
        self.loss_diff_sq_sum = torch.zeros((), dtype=torch.float64)
        self.loss_diff_count = torch.zeros((), dtype=torch.float64)
        self.loss_weight_sq_sum = torch.zeros((), dtype=torch.float64)
        self.loss_previous = torch.full((), math.nan, dtype=torch.float64)
        # Steps in the sums: a replica reset at a forced converge restarts its sums, not the interval.
        self.steps = 0
        # The loss sums at the last converge inside this window (`mark`; host floats, read at converges only).
        self.mark_sum = 0.0
        self.mark_weight = 0.0
        # Reset after diverging in this interval: its loss no longer describes its multiplier.
        self.diverged = False
        self.average: list[torch.Tensor] | None = None
        self.average_count = 0

    def add_loss(self, loss: torch.Tensor | float, weight: torch.Tensor | float = 1.0) -> None:
        """Add one micro-batch's mean loss over ``weight`` items; weight 0 is skipped (0/0 gives NaN)."""
        device = loss.device if isinstance(loss, torch.Tensor) else self.loss_sum.device
        if self.loss_sum.device != device:
            for name in self._SUMS:
                setattr(self, name, getattr(self, name).to(device))
        loss = torch.as_tensor(loss.detach() if isinstance(loss, torch.Tensor) else loss, device=device)
        weight = torch.as_tensor(
            weight.detach() if isinstance(weight, torch.Tensor) else weight, device=device
        ).to(torch.float64)
        counted = weight > 0
        weighted, items = torch.where(counted, loss.to(torch.float64) * weight, 0.0), torch.where(counted, weight, 0.0)
        self.loss_sum += weighted
        self.loss_weight += items
        if self.track_noise:
            self.step_loss_sum += weighted
            self.step_loss_weight += items

    def end_step(self) -> None:
        """Count one optimizer step and fold its loss into the noise sums (no host sync)."""
        self.steps += 1
        if not self.track_noise:
            return
        weight = self.step_loss_weight
        counted = weight > 0
        mean = self.step_loss_sum / weight.clamp(min=1e-300)
        follows = counted & torch.isfinite(self.loss_previous) & torch.isfinite(mean)
        self.loss_diff_sq_sum += torch.where(follows, (mean - self.loss_previous) ** 2, 0.0)
        self.loss_diff_count += follows.to(torch.float64)
        self.loss_weight_sq_sum += torch.where(counted, weight * weight, 0.0)
        self.loss_previous = torch.where(counted, mean, self.loss_previous)
        self.step_loss_sum.zero_()
        self.step_loss_weight.zero_()

    def mean_loss(self) -> float | None:
        """The window's item-weighted mean loss; None with no step or no labelled item (no score, not a
        divergence). One host sync."""
        weight = float(self.loss_weight)
        if self.steps == 0 or weight <= 0:
            return None
        return float(self.loss_sum) / weight

    def recent_mean_loss(self) -> float | None:
        """The item-weighted mean loss since the last `mark` (the whole window without one); None with nothing
        labelled since. One host sync."""
        weight = float(self.loss_weight) - self.mark_weight
        if self.steps == 0 or weight <= 0:
            return None
        return (float(self.loss_sum) - self.mark_sum) / weight

    def mark(self) -> None:
        """A converge inside the window: later `recent_mean_loss` calls count only the steps after it."""
        self.mark_sum, self.mark_weight = float(self.loss_sum), float(self.loss_weight)

    def mean_variance(self) -> float:
        """The variance of `mean_loss` from the steps' scatter; NaN with fewer than two counted steps (no
        estimate, or not tracked). One host sync."""
        if not self.track_noise:
            return math.nan
        count, weight = float(self.loss_diff_count), float(self.loss_weight)
        if count < 1 or weight <= 0:
            return math.nan
        per_step = float(self.loss_diff_sq_sum) / (2.0 * count)
        return per_step * float(self.loss_weight_sq_sum) / weight**2

    def reset_loss(self) -> None:
        for name in self._SUMS:
            getattr(self, name).zero_()
        self.loss_previous.fill_(math.nan)
        self.steps = 0
        self.mark_sum = self.mark_weight = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {
            "loss_sum": float(self.loss_sum),
            "loss_weight": float(self.loss_weight),
            "loss_noise": [float(getattr(self, name)) for name in self._NOISE],
            "loss_steps": self.steps,
            "loss_mark": [self.mark_sum, self.mark_weight],
            "diverged_in_interval": self.diverged,
            "window_average": self.average,
            "window_average_count": self.average_count,
        }

    def load_state_dict(self, state: dict[str, Any], device: torch.device, *, restart: bool = False) -> None:
        """Restore the window; ``restart`` (an elastic resume: replicas no longer map one to one) empties it."""
        if restart:
            self.reset_loss()
            self.diverged = False
            return
        dev = self.loss_sum.device
        self.loss_sum = torch.tensor(float(state["loss_sum"]), dtype=torch.float64, device=dev)
        self.loss_weight = torch.tensor(float(state["loss_weight"]), dtype=torch.float64, device=dev)
        # States saved before the noise estimate (or by another layout) restart it: this window has no floor.
        noise = state.get("loss_noise") or [0.0, math.nan, 0.0, math.nan]  # NaN count: no estimate
        for name, value in zip(self._NOISE, noise):
            setattr(self, name, torch.tensor(float(value), dtype=torch.float64, device=dev))
        self.steps = int(state["loss_steps"] if "loss_steps" in state else state["steps_since_sync"])
        self.diverged = bool(state.get("diverged_in_interval", False))
        # Saved before votes spanned converges: every window then started at the last converge.
        self.mark_sum, self.mark_weight = (float(x) for x in state.get("loss_mark", (0.0, 0.0)))
        if state.get("window_average") is not None:
            self.average = [t.to(device) for t in state["window_average"]]
            self.average_count = int(state.get("window_average_count", 0))

    @torch.no_grad()
    def update_average(self, params: Sequence[torch.Tensor]) -> None:
        """Fold this step's parameters into the running mean of the interval's iterates."""
        if self.average is None:
            self.average = [p.clone() for p in params]
        self.average_count += 1
        if self.average_count == 1:
            torch._foreach_copy_(self.average, list(params))
        else:
            torch._foreach_lerp_(self.average, list(params), 1.0 / self.average_count)

    def score(
        self, params: Sequence[torch.nn.Parameter], probe: Callable[[], float], *, at_average: bool
    ) -> float:
        """``probe()`` at the current weights, or (``at_average``) with ``params`` swapped to the interval's
        mean (at the current weights if there is none yet)."""
        if not at_average or not self.average_count or self.average is None:
            return float(probe())
        return probe_at(params, self.average, probe)


def probe_at(params: Sequence[torch.nn.Parameter], weights: Sequence[torch.Tensor], probe: Callable[[], float]) -> float:
    """``probe()`` with ``params`` swapped to ``weights`` (same shapes), then swapped back."""
    current = [p.data for p in params]
    try:
        # Swap storage, not values: no extra copy of the parameters while the probe runs.
        for p, weight in zip(params, weights):
            p.data = weight
        return float(probe())
    finally:
        for p, own in zip(params, current):
            p.data = own
