"""The tensors of one replica that a converge averages, and the checks and resets that go with them.

Averaged: the trainable parameters, persistent floating-point buffers (e.g. BatchNorm running statistics)
and, with ``average_optimizer_state``, the optimizer's floating-point per-parameter tensors (Adam moments).
Non-persistent buffers (derived constants such as rotary frequencies) and integer buffers (counters that
advance identically on every rank) are left alone.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from .collectives import Workspace, broadcast_tensors_, fused_average_, local_data

__all__ = ["ReplicaTensors"]


class ReplicaTensors:
    """Args: the (unwrapped) model, or None to take the optimizer's parameters; the optimizer; whether its
    state is averaged too."""

    def __init__(
        self, model: nn.Module | None, optimizer: torch.optim.Optimizer, average_optimizer_state: bool
    ) -> None:
        self.optimizer = optimizer
        self.average_optimizer_state = average_optimizer_state
        if model is not None:
            params = [p for p in model.parameters() if p.requires_grad]
            persistent = set(model.state_dict(keep_vars=True).keys())
            buffers = [
                b for name, b in model.named_buffers() if name in persistent and torch.is_floating_point(b)
            ]
        else:
            seen: set[int] = set()
            params = []
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.requires_grad and id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
            buffers = []
        if not params:
            raise ValueError("HDET found no trainable parameters to average (all have requires_grad=False)")
        self.params: list[torch.Tensor] = params
        self.buffers: list[torch.Tensor] = buffers
        self._workspace = Workspace()

    @property
    def workspace(self) -> Workspace | None:
        """The converge's kept flat buffer, on CPU only: there a fresh buffer is a fresh ``mmap`` whose pages
        fault at every converge, while CUDA's caching allocator already hands the same block back."""
        return self._workspace if self.params[0].device.type == "cpu" else None

    def param_data(self) -> list[torch.Tensor]:
        """The parameters this process holds (an FSDP2 parameter's local shard), without autograd."""
        return [local_data(p) for p in self.params]

    def buffer_data(self) -> list[torch.Tensor]:
        return [local_data(b) for b in self.buffers]

    def optimizer_tensors(self) -> list[torch.Tensor]:
        """The optimizer's floating-point per-parameter tensors (moments), in parameter order."""
        state = getattr(self.optimizer, "state", {})
        return [
            local_data(value)
            for p in self.params
            for value in state.get(p, {}).values()
            if isinstance(value, torch.Tensor) and value.dim() > 0 and torch.is_floating_point(value)
        ]

    def to_average(self) -> list[torch.Tensor]:
        tensors = self.param_data() + self.buffer_data()
        if self.average_optimizer_state:
            tensors += self.optimizer_tensors()
        return tensors

    def all_finite(self) -> bool:
        """Whether the parameters (and, when averaged, the optimizer state) are finite. One host sync.

        With averaged optimizer state a non-finite moment would enter every rank's average: it is checked too.
        Each tensor's min and max carry any NaN or infinity into a 2-element result, in one vectorised read
        with no temporary of the tensor's size (``isfinite(t).all()`` first writes a bool copy of it).
        """
        tensors = self.param_data() + (self.optimizer_tensors() if self.average_optimizer_state else [])
        extremes = [torch.stack(torch.aminmax(t)).double() for t in tensors if t.numel()]
        return not extremes or bool(torch.isfinite(torch.cat(extremes)).all())

    @torch.no_grad()
    def reset_optimizer_moments(self) -> None:
        """Zero this replica's optimizer moments (they came from a diverged trajectory); zeroed moments make
        the next updates small and let them rebuild. With averaged optimizer state the average was already
        copied in, so nothing is reset."""
        if not self.average_optimizer_state:
            for value in self.optimizer_tensors():
                value.zero_()

    @torch.no_grad()
    def broadcast_from_rank0(self, bucket_cap_bytes: int, group: dist.ProcessGroup | None) -> None:
        """Copy rank 0's parameters and buffers to every rank (what DDP does at wrap time)."""
        tensors = self.param_data() + self.buffer_data()
        broadcast_tensors_(tensors, src=0, bucket_cap_bytes=bucket_cap_bytes, group=group)

    @torch.no_grad()
    def average_gradients(
        self, rank: int, world_size: int, bucket_cap_bytes: int, group: dist.ProcessGroup | None
    ) -> None:
        """DDP's gradient sync, in one flat all-reduce."""
        grads = [local_data(p.grad) for p in self.params if p.grad is not None]
        if grads:
            stats = torch.zeros(1, dtype=torch.float64)
            fused_average_(grads, stats, rank, world_size, bucket_cap_bytes=bucket_cap_bytes, group=group)
