"""Whether the replicas' gradients are all-reduced every step (``shared`` mode), read after the first step.

HDETTrainer and HDETAccelerate wrap the model themselves, so they know; the drop-in `OneCycleAutoLR` and a
hand-written loop around `HDETEngine` do not: the user decides whether the model is wrapped in
DistributedDataParallel. The comparison horizon (`horizon`) is right only with shared gradients: its offsets
``(m_r - 1) Z`` average to zero only when every rank's direction ``Z`` is the same.

After one optimizer step, each moment (Adam's ``exp_avg``/``exp_avg_sq``, SGD's momentum buffer) is a function
of that step's gradient alone: bit-identical on every rank when the gradients were all-reduced, different when
each rank stepped on its own batch. So one float per rank (a checksum of the moments, or of the gradients for an
optimizer without state) tells the two apart; the engine gathers it once, at the first step of a fresh run
(later, a diverged replica's reset moments would differ in shared mode too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist

from .collectives import gather_floats, local_data
from .replica import ReplicaTensors

__all__ = ["checksum", "checksums_agree", "gradients_shared", "HORIZON_NEEDS_SHARED_GRADIENTS"]

# Shared gradients give bit-identical moments; the tolerance only covers a sum taken in another order (another
# thread count) on some rank. Local gradients differ at the first significant digit.
RELATIVE_TOLERANCE = 1e-6


def checksum(tensors: Sequence[torch.Tensor]) -> float:
    """The float64 sum of every element of ``tensors``; NaN when there are none (nothing to compare).

    >>> checksum([torch.ones(2), torch.full((3,), 0.5)]), math.isnan(checksum([]))
    (3.5, True)
    """
    if not tensors:
        return math.nan
    return float(sum(t.detach().double().sum() for t in tensors))


def checksums_agree(values: Sequence[float]) -> bool | None:
    """Whether every rank's checksum is the same (gradients shared); None when some rank had nothing to sum or a
    non-finite one (no evidence either way).

    >>> checksums_agree([2.0, 2.0]), checksums_agree([2.0, 2.5]), checksums_agree([2.0, math.nan])
    (True, False, None)
    """
    if not values or not all(math.isfinite(v) for v in values):
        return None
    scale = max(abs(v) for v in values)
    return all(abs(v - values[0]) <= RELATIVE_TOLERANCE * scale for v in values)


def gradients_shared(replica: ReplicaTensors, world_size: int, group: dist.ProcessGroup | None) -> bool | None:
    """Every rank's answer, the same on each: were the last step's gradients all-reduced? Call it on every rank
    after the first optimizer step (one gather of a float); None when there is no evidence (no moments, no
    gradients, or a non-finite one)."""
    tensors = replica.optimizer_tensors() or [local_data(p.grad) for p in replica.params if p.grad is not None]
    values = gather_floats(checksum(tensors), world_size, device=replica.params[0].device, group=group)
    return checksums_agree(values)


HORIZON_NEEDS_SHARED_GRADIENTS = (
    "The comparison horizon (HDETConfig.comparison_horizon, --hdet_comparison_horizon; on by default with auto-LR "
    "in shared mode, and OneCycleAutoLR's comparison_horizon) needs the gradients all-reduced every step, but after "
    "the first optimizer step the ranks' optimizer moments differ: each rank stepped on its own gradient, so the "
    "replicas' offsets would not average out. Wrap the model in torch.nn.parallel.DistributedDataParallel "
    "(accelerator.prepare does in shared mode), or turn the horizon off (comparison_horizon=0), or train in local "
    "mode (gradient_sync='local')."
)
