"""An outer Nesterov step on the averaged update (DiLoCo), as pure tensor math.

Local mode is local SGD: each converge replaces the replicas by their average. DiLoCo (Douillard et al., 2023)
treats ``anchor - average`` (where the previous converge left the parameters, minus where the replicas got to
together) as an outer gradient and takes a Nesterov-momentum step with it. With ``lr = 1`` and
``momentum = 0`` the step lands exactly on the average, which is plain HDET. Every rank holds the same anchor,
momentum and average, so the step needs no communication and keeps the replicas bit-identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["outer_nesterov_step_", "OuterStep"]


@torch.no_grad()
def outer_nesterov_step_(
    params: Sequence[torch.Tensor],
    anchors: Sequence[torch.Tensor],
    momenta: Sequence[torch.Tensor],
    lr: float,
    momentum: float,
) -> None:
    """In place: ``g = anchor - param``; ``m = momentum*m + g``; ``param = anchor - lr*(g + momentum*m)``;
    ``anchor = param``. ``params`` hold the fresh average on entry."""
    for param, anchor, buf in zip(params, anchors, momenta):
        outer_grad = anchor - param
        buf.mul_(momentum).add_(outer_grad)
        param.copy_(anchor - lr * (outer_grad + momentum * buf))
        anchor.copy_(param)


class OuterStep:
    """The outer step's state: the parameters at the last regular converge (anchors) and the momentum.

    Disabled (a no-op) at ``lr = 1, momentum = 0``. The first regular converge has nothing to extrapolate
    from: its average becomes the anchor.
    """

    def __init__(self, lr: float, momentum: float) -> None:
        self.lr, self.momentum = lr, momentum
        self.enabled = lr != 1.0 or momentum != 0.0
        self.anchors: list[torch.Tensor] | None = None
        self.momenta: list[torch.Tensor] | None = None

    @torch.no_grad()
    def step_(self, params: Sequence[torch.Tensor]) -> None:
        """Move ``params`` (holding the fresh average) in place."""
        if self.anchors is None or self.momenta is None:
            self.anchors = [p.clone() for p in params]
            self.momenta = [torch.zeros_like(p) for p in params]
            return
        outer_nesterov_step_(params, self.anchors, self.momenta, self.lr, self.momentum)

    def state_dict(self) -> dict[str, Any]:
        return {"outer_anchors": self.anchors, "outer_momenta": self.momenta}

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        anchors, momenta = state.get("outer_anchors"), state.get("outer_momenta")
        self.anchors = [t.to(device) for t in anchors] if anchors is not None else None
        self.momenta = [t.to(device) for t in momenta] if momenta is not None else None
