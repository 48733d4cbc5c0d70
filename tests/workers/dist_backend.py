"""The process-group backend and device of the multi-process tests: gloo on CPU (default), or NCCL on CUDA.

``HDET_TEST_BACKEND=nccl`` (set by ``pytest --dist-backend nccl``, which ``scripts/gpu_check.sh`` runs) puts
each worker on GPU ``LOCAL_RANK`` with NCCL. Only scenarios written against :data:`DEVICE` run there; the tests
of the others skip under NCCL (``tests/distributed.py: gloo_only``).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

ENV = "HDET_TEST_BACKEND"
BACKENDS = ("gloo", "nccl")


def backend() -> str:
    """The backend named by ``HDET_TEST_BACKEND`` (default gloo), validated."""
    name = os.environ.get(ENV, "gloo").strip().lower() or "gloo"
    if name not in BACKENDS:
        raise ValueError(f"{ENV} must be one of {BACKENDS}, but got {name!r}; unset it for gloo on CPU")
    return name


def device() -> torch.device:
    """Where a worker's tensors live: ``cuda:LOCAL_RANK`` under NCCL (one GPU per process), else CPU."""
    if backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def init_process_group() -> None:
    """``dist.init_process_group`` on the chosen backend (and the process's GPU first, under NCCL)."""
    if backend() == "nccl":
        if not torch.cuda.is_available():
            raise RuntimeError(f"{ENV}=nccl needs CUDA, but torch.cuda.is_available() is False")
        torch.cuda.set_device(device())
    dist.init_process_group(backend())
