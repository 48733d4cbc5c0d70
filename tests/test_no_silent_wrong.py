"""No silent wrong training (issue 11): what used to crash late, mix settings or corrupt state is now a clear
error before anything is written, or correct training.

Single-process tests live here; the multi-process ones (a rank killed while saving, settings that differ
between ranks, an inf in one rank's averaged optimizer state) are marked slow.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode

from hdet_hf.collectives import fused_average_


# ================================================================================== item 11: converge memory


class PeakBytes(TorchDispatchMode):
    """Peak bytes of tensor storage allocated by torch ops inside the block (works on CPU).

    Every op output whose storage was not seen before counts as allocated until its storage is freed
    (storage objects keep their Python wrapper while alive, so a weakref finaliser sees the free).
    """

    def __init__(self, existing: list[torch.Tensor]) -> None:
        super().__init__()
        self.seen = {t.untyped_storage().data_ptr() for t in existing}
        self.live = 0
        self.peak = 0

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self.seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if nbytes == 0 or key in self.seen:
                    continue
                self.seen.add(key)
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._free, key, nbytes)
        return out


def test_a_bf16_converge_costs_twice_the_bucket_not_four_times():
    tensors = [torch.randn(64, 128).to(torch.bfloat16) for _ in range(8)]
    expected = [t.float().clone() for t in tensors]  # one process: the average is the tensor itself
    bucket_bytes = sum(t.numel() * t.element_size() for t in tensors)
    stats = torch.zeros(3, dtype=torch.float64)
    mode = PeakBytes(tensors + [stats])
    with mode:
        fused_average_(tensors, stats, 0, 1)
    # The float32 flat buffer is 2x the bf16 bytes; the statistics block adds a few bytes. The old code also
    # held a float32 copy of every tensor while concatenating them: 4x.
    assert mode.peak <= 2 * bucket_bytes + 1024, f"peak {mode.peak} bytes for a {bucket_bytes}-byte bucket"
    assert mode.peak >= 2 * bucket_bytes  # the measurement sees the flat buffer itself
    for t, e in zip(tensors, expected):
        assert torch.equal(t.float(), e)
