"""An outer Nesterov step on the averaged update (DiLoCo), as pure tensor math.

Local mode is local SGD: each converge replaces the replicas by their average. DiLoCo (Douillard et al., 2023)
treats ``anchor - average`` (where the previous converge left the parameters, minus where the replicas got to
together) as an outer gradient and takes a Nesterov-momentum step with it. With ``lr = 1`` and
``momentum = 0`` the step lands exactly on the average, which is plain HDET. Every rank holds the same anchor,
momentum and average, so the step needs no communication and keeps the replicas bit-identical.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["outer_nesterov_step_"]


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
