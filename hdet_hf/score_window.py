"""What one replica accumulates between two converges to be scored: its loss, and its mean weights.

- The window loss is an item-weighted mean: the sum of (micro-batch mean loss x its labelled items) over the
  summed items, so ranks with ragged batches are compared per token, not per batch. It stays on the
  loss's device (no host sync per micro-batch).
- With an averaged probe signal, the running mean of the replica's parameters over the interval's steps
  (`averaged_probe`): the probe scores the replica there instead of at its last iterate.
"""

from __future__ import annotations

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
    """One replica's loss sums and parameter mean since the last converge."""

    def __init__(self) -> None:
        self.loss_sum = torch.zeros((), dtype=torch.float64)
        self.loss_weight = torch.zeros((), dtype=torch.float64)
        # Steps in the sums: a replica reset at a forced converge restarts its sums, not the interval.
        self.steps = 0
        # Reset after diverging in this interval: its loss no longer describes its multiplier.
        self.diverged = False
        self.average: list[torch.Tensor] | None = None
        self.average_count = 0

    def add_loss(self, loss: torch.Tensor | float, weight: torch.Tensor | float = 1.0) -> None:
        """Add one micro-batch's mean loss over ``weight`` items; weight 0 is skipped (0/0 gives NaN)."""
        device = loss.device if isinstance(loss, torch.Tensor) else self.loss_sum.device
        if self.loss_sum.device != device:
            self.loss_sum = self.loss_sum.to(device)
            self.loss_weight = self.loss_weight.to(device)
        loss = torch.as_tensor(loss.detach() if isinstance(loss, torch.Tensor) else loss, device=device)
        weight = torch.as_tensor(
            weight.detach() if isinstance(weight, torch.Tensor) else weight, device=device
        ).to(torch.float64)
        counted = weight > 0
        self.loss_sum += torch.where(counted, loss.to(torch.float64) * weight, 0.0)
        self.loss_weight += torch.where(counted, weight, 0.0)

    def mean_loss(self) -> float | None:
        """The window's item-weighted mean loss; None with no step or no labelled item (no score, not a
        divergence). One host sync."""
        weight = float(self.loss_weight)
        if self.steps == 0 or weight <= 0:
            return None
        return float(self.loss_sum) / weight

    def reset_loss(self) -> None:
        self.loss_sum.zero_()
        self.loss_weight.zero_()
        self.steps = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "loss_sum": float(self.loss_sum),
            "loss_weight": float(self.loss_weight),
            "loss_steps": self.steps,
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
        self.steps = int(state.get("loss_steps", state["steps_since_sync"]))
        self.diverged = bool(state.get("diverged_in_interval", False))
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
