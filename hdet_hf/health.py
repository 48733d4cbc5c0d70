"""Which replicas may enter a converge's average, and the error when none may.

A replica is healthy when its loss(es) and parameters are finite and its window loss passes the divergence
test (`controller.loss_diverged`: above ``divergence_factor`` x the ensemble mean at the last converge and
above the first converge's). Each rank judges itself against ensemble means gathered at earlier converges, so
the check adds no collective: the verdict travels in the converge's statistics row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .controller import loss_diverged

__all__ = ["HDETDivergenceError", "ReplicaHealth"]


class HDETDivergenceError(RuntimeError):
    """Every replica diverged at one converge: there is no healthy average to continue from."""


class ReplicaHealth:
    """This replica's health check and its reference: the ensemble mean losses of earlier converges.

    Example:
        >>> health = ReplicaHealth(divergence_factor=3.0)
        >>> health.observe(losses=[2.0, 2.2], scored=[True, True])  # a converge's gathered losses
        >>> health.healthy(2.5, None, params_finite=lambda: True), health.healthy(9.0, None, lambda: True)
        (True, False)
    """

    def __init__(self, divergence_factor: float) -> None:
        self.divergence_factor = divergence_factor
        # Ensemble mean loss at the previous converge (the divergence test's reference) and at the first.
        self.last_mean_loss: float | None = None
        self.first_mean_loss: float | None = None

    def healthy(
        self, window_loss: float | None, probe_loss: float | None, params_finite: Callable[[], bool]
    ) -> bool:
        """Finite loss(es) and parameters, and a window loss that passes the divergence test (None: no score).

        ``params_finite`` is called last: the parameter scan is the costly part, skipped when a loss fails.
        """
        if not all(math.isfinite(x) for x in (window_loss, probe_loss) if x is not None):
            return False
        if window_loss is not None and loss_diverged(
            window_loss, self.last_mean_loss, self.first_mean_loss, self.divergence_factor
        ):
            return False
        return params_finite()

    def observe(self, losses: Sequence[float], scored: Sequence[bool]) -> None:
        """Move the reference to the mean loss of the scored replicas (kept if any of them is not finite)."""
        good = [loss for loss, ok in zip(losses, scored) if ok]
        if good and all(math.isfinite(x) for x in good):
            self.last_mean_loss = sum(good) / len(good)
            if self.first_mean_loss is None:
                self.first_mean_loss = self.last_mean_loss

    def all_diverged(self, step: int) -> HDETDivergenceError:
        """The error every rank raises when no replica was healthy at the converge of ``step``."""
        return HDETDivergenceError(
            f"Every HDET replica diverged by step {step} (non-finite loss or parameters, or loss above "
            f"{self.divergence_factor}x the last ensemble mean and above the first converge's): nothing "
            "healthy to average. "
            "Training stopped; earlier checkpoints are untouched. Lower --learning_rate or --hdet_lr_spread."
        )

    def state_dict(self) -> dict[str, Any]:
        return {"last_mean_loss": self.last_mean_loss, "first_mean_loss": self.first_mean_loss}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_mean_loss = state.get("last_mean_loss")
        self.first_mean_loss = state.get("first_mean_loss")
