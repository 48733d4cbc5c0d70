"""Every collective HDET issues lives here: the fused converge, the start-up broadcast and one gather of a float.

`fused_average_` follows PyTorch's ``model_averaging.utils.average_parameters``: copy tensors into one
flat buffer, one all-reduce, copy back. It adds two things: the buffer also carries a small per-rank
statistics block (each rank fills its own row, the SUM all-reduce turns it into a gather), and ranks can
abstain (a diverged replica contributes zeros and the sum is divided by the number of contributors).

Memory: the flat buffer holds at most ``bucket_cap_bytes`` (plus the statistics block) at a time; a model
larger than the cap is averaged in several all-reduces, one bucket after another, instead of doubling the
model's memory. Tensors in half precision are averaged in float32 (summing N bf16 values in bf16 loses
bits), so a bf16 bucket of B bytes costs 2B: each tensor is converted straight into its slice of the flat
buffer and back, with no other temporaries (a test measures the peak).

Every rank receives the same reduced bytes and divides them by the same count, so after the call all
ranks hold bit-identical tensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist

__all__ = [
    "fused_average_",
    "broadcast_tensors_",
    "gather_floats",
    "gather_rows",
    "iter_buckets",
    "NoContributorError",
    "Workspace",
    "local_data",
]


class NoContributorError(RuntimeError):
    """Every rank abstained from `fused_average_` (``contribute=False`` everywhere): there is nothing to average.

    Every rank sees the same (zero) count, so every rank raises it at the same call.
    """


class Workspace:
    """A flat buffer kept between `fused_average_` calls (pass the same object each time).

    On CPU PyTorch has no caching allocator: a buffer the size of a model is a fresh ``mmap`` at every call,
    and the first write to each of its pages faults, which costs a sizeable share of a converge. Keeping it
    costs one bucket (at most ``bucket_cap_bytes``) of memory between converges; during a converge the peak is
    the same as without it.
    """

    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = None

    def take(self, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A tensor of ``numel`` elements, from the kept buffer when it is large enough."""
        buffer = self.buffer
        if buffer is None or buffer.numel() < numel or buffer.dtype != dtype or buffer.device != device:
            buffer = self.buffer = torch.empty(numel, dtype=dtype, device=device)
        return buffer[:numel]


def local_data(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor this process holds, without autograd: ``.data``, or an FSDP2 parameter's local shard.

    FSDP2 parameters (and their gradients and optimizer state) are DTensors; HDET averages each rank's own
    shard across replica groups, so it reads and writes the local tensor, which is a view into FSDP's
    sharded storage (in-place writes reach the parameter).
    """
    data = tensor.data
    to_local = getattr(data, "to_local", None)
    return to_local() if to_local is not None else data


def _buffer_dtype(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def iter_buckets(
    tensors: Sequence[torch.Tensor], bucket_cap_bytes: int, element_size: int
) -> Iterator[list[int]]:
    """Indices of ``tensors`` grouped in order into buckets of at most ``bucket_cap_bytes`` (>= 1 tensor each)."""
    bucket: list[int] = []
    size = 0
    for index, tensor in enumerate(tensors):
        nbytes = tensor.numel() * element_size
        if bucket and size + nbytes > bucket_cap_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append(index)
        size += nbytes
    if bucket:
        yield bucket


def fused_average_(
    tensors: Sequence[torch.Tensor],
    stats_row: torch.Tensor,
    rank: int,
    world_size: int,
    *,
    contribute: bool = True,
    weight: float = 1.0,
    bucket_cap_bytes: int = 256 * 2**20,
    group: dist.ProcessGroup | None = None,
    workspace: Workspace | None = None,
) -> tuple[torch.Tensor, float]:
    """Average ``tensors`` in place across ranks and gather ``stats_row`` from every rank.

    Args:
        tensors: floating-point tensors, same shapes and order on every rank (parameters, buffers, optimizer
            state). Averaged in place.
        stats_row: 1-D float tensor of K numbers from this rank (e.g. its mean loss and its multipliers).
        rank, world_size: this rank and the number of ranks in ``group``.
        contribute: False for a replica that must not enter the average (non-finite loss or parameters);
            it still receives the average of the others.
        weight: this replica's weight (> 0) in a weighted average: the result is sum(w_r x_r) / sum(w_r).
            The weights' sum rides in the same all-reduce, so each rank needs only its own weight. With every
            weight 1 (the default) this is the plain mean, bit for bit.
        bucket_cap_bytes: size cap of the flat buffer (see module docstring).
        workspace: keep the flat buffer here between calls instead of allocating it each time (`Workspace`).

    Returns:
        ``(stats, total_weight)``: a ``[world_size, K]`` float64 tensor with every rank's row, and the sum of
        the contributing ranks' weights (the number of contributors when every weight is 1). With a single bucket (the usual case) this is exactly one all-reduce.
    """
    if not tensors:
        raise ValueError("Expected at least one tensor to average, but got none")
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"Expected a finite weight > 0 (use contribute=False to leave a rank out), but got {weight!r}")
    dtype = _buffer_dtype(tensors)
    device = tensors[0].device
    element_size = torch.empty((), dtype=dtype).element_size()
    k = stats_row.numel()
    # Statistics ride in float64 inside the first bucket's buffer when that buffer is float64; otherwise in
    # float32, which is plenty for losses and multipliers. One extra slot per rank carries its weight (1, or 0
    # for a rank that does not contribute), so the divisor needs no second collective.
    stats_block = torch.zeros(world_size, k + 1, dtype=dtype, device=device)
    stats_block[rank, :k] = stats_row.to(dtype)
    stats_block[rank, k] = weight if contribute else 0.0

    stats: torch.Tensor | None = None
    total_weight = float(world_size)
    for bucket_index, bucket in enumerate(iter_buckets(tensors, bucket_cap_bytes, element_size)):
        parts = [tensors[i] for i in bucket]
        numel = sum(t.numel() for t in parts)
        extra = stats_block.numel() if bucket_index == 0 else 0
        if workspace is not None:
            flat = workspace.take(numel + extra, dtype, device)
        else:
            flat = torch.empty(numel + extra, dtype=dtype, device=device)
        if contribute:
            # copy_ converts each tensor straight into its slice: no per-tensor float32 temporaries, so a bf16
            # bucket costs the flat buffer only.
            offset = 0
            for t in parts:
                n = t.numel()
                flat[offset : offset + n].view_as(t).copy_(t)
                offset += n
            if weight != 1.0:
                flat[:numel].mul_(weight)
        else:
            # Zeros, not 0 * x: 0 * NaN is NaN and would poison every rank's average.
            flat[:numel].zero_()
        if extra:
            flat[numel:] = stats_block.reshape(-1)
        if world_size > 1:
            dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
        if bucket_index == 0:
            stats = flat[numel:].view(world_size, k + 1).double().clone()
            total_weight = float(stats[:, k].sum())
            if total_weight <= 0:
                raise NoContributorError("No rank contributed to the average: every replica was flagged unhealthy")
        values = flat[:numel]
        values.div_(total_weight)
        offset = 0
        for t in parts:
            n = t.numel()
            t.copy_(values[offset : offset + n].view_as(t))
            offset += n
    assert stats is not None
    return stats[:, :k], total_weight


def gather_rows(
    stats_row: torch.Tensor,
    rank: int,
    world_size: int,
    *,
    device: torch.device | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Every rank's ``stats_row`` as a ``[world_size, K]`` float64 tensor (on the CPU): the statistics part of
    `fused_average_` alone, one all-reduce of ``world_size x K`` numbers (on ``device``, which NCCL needs to be
    the rank's GPU), for a converge that averages nothing."""
    block = torch.zeros(world_size, stats_row.numel(), dtype=torch.float64, device=device)
    block[rank] = stats_row.to(device=block.device, dtype=torch.float64)
    if world_size > 1:
        dist.all_reduce(block, op=dist.ReduceOp.SUM, group=group)
    return block.cpu()


def broadcast_tensors_(
    tensors: Sequence[torch.Tensor],
    src: int = 0,
    *,
    bucket_cap_bytes: int = 256 * 2**20,
    group: dist.ProcessGroup | None = None,
) -> None:
    """Copy rank ``src``'s tensors to every rank, one flat broadcast per bucket and dtype.

    Used once at start in ``local`` mode, where no DDP wrapper broadcasts the initial parameters.
    ``src`` is a rank within ``group`` (the global rank when ``group`` is None).
    """
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for dtype, same in by_dtype.items():
        element_size = torch.empty((), dtype=dtype).element_size()
        for bucket in iter_buckets(same, bucket_cap_bytes, element_size):
            parts = [same[i] for i in bucket]
            flat = torch.cat([t.reshape(-1) for t in parts])
            # ``src`` is a rank of ``group`` (its global rank differs when the group is a replica group).
            if group is None:
                dist.broadcast(flat, src=src)
            else:
                dist.broadcast(flat, group=group, group_src=src)
            offset = 0
            for t in parts:
                n = t.numel()
                t.copy_(flat[offset : offset + n].view_as(t))
                offset += n


def gather_floats(
    value: float, world_size: int, *, device: torch.device | None = None, group: dist.ProcessGroup | None = None
) -> list[float]:
    """Every rank's ``value``, in rank order: one all-gather of one float64 per rank (on ``device``, which NCCL
    needs to be the rank's GPU)."""
    mine = torch.tensor([value], dtype=torch.float64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(gathered, mine, group=group)
    return [float(t) for t in gathered]
