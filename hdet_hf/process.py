"""Process-level helpers the library needs under ``torchrun``/``accelerate launch``: how many processes were
launched, whether an accelerator is present, and a clean exit for gloo runs.

Launch helpers for tests and benchmarks (an offline CPU environment, torchrun command lines) live in
`hdet_hf.testing.processes`.
"""

from __future__ import annotations

import atexit
import os
import sys

import torch
import torch.distributed as dist

__all__ = [
    "finish_distributed",
    "launched_world_size",
    "rank_and_world_size",
    "accelerator_available",
    "check_launch_seen",
]


def launched_world_size() -> int:
    """Processes the launcher started (``WORLD_SIZE`` from torchrun / ``accelerate launch``); 1 if none."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def rank_and_world_size(
    rank: int | None = None, world_size: int | None = None, group: dist.ProcessGroup | None = None
) -> tuple[int, int]:
    """This process's rank in ``group`` and the group's size; given values win, and without an initialized
    process group it is one process (rank 0 of 1)."""
    initialized = dist.is_available() and dist.is_initialized()
    rank = rank if rank is not None else (dist.get_rank(group) if initialized else 0)
    world_size = world_size if world_size is not None else (dist.get_world_size(group) if initialized else 1)
    if world_size > 1 and not initialized:
        raise ValueError(f"world_size={world_size} needs torch.distributed to be initialized")
    return rank, world_size


def accelerator_available() -> bool:
    """Whether torch sees a GPU or other accelerator (CUDA, XPU, MPS, ...)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


def check_launch_seen(seen_world_size: int, what: str, fix: str) -> None:
    """Refuse a run whose launcher started N processes while ``what`` sees a different number.

    Every rank would otherwise train alone on all the data, with no gradient sync, and write every file:
    HDET would explore nothing while reporting N replicas.
    """
    launched = launched_world_size()
    if launched > 1 and seen_world_size != launched:
        raise RuntimeError(
            f"HDET was launched on {launched} processes (WORLD_SIZE={launched}) but {what} sees "
            f"{seen_world_size}: each process would train alone on all the data. {fix}"
        )


# The backend of the process group a Trainer was created under (`remember_backend`): a script may destroy the group
# itself before `finish_distributed` runs (TRL's stock scripts call `trainer.end()`, which Accelerate's
# `end_training` turns into `destroy_process_group`), and gloo's finalisation abort can still follow.
_remembered_backend: str | None = None


def remember_backend() -> None:
    """Note the current process group's backend for `finish_distributed` (None without one: the last call wins)."""
    global _remembered_backend
    initialized = dist.is_available() and dist.is_initialized()
    _remembered_backend = str(dist.get_backend()) if initialized else None


def finish_distributed(exit_code: int = 0) -> None:
    """Tear down the process group and end the process.

    With the gloo backend, an interpreter that exits while gloo's worker threads still hold tensors can
    abort at finalisation ("terminate called without an active exception", SIGABRT; pytorch/pytorch#179291),
    with or without ``destroy_process_group``, and the launcher then reports a failed run although the work
    finished. For gloo we therefore flush and leave with ``os._exit`` after a barrier and
    ``destroy_process_group``, which skips that finalisation. Python-level atexit handlers (e.g. a logger's
    final flush) are run first, since ``os._exit`` would skip them. NCCL and single-process runs return
    normally. A group the script already destroyed (see `remember_backend`) ends the same way, without the barrier.
    """
    if dist.is_available() and dist.is_initialized():
        backend = str(dist.get_backend())
        dist.barrier()
        dist.destroy_process_group()
    else:
        backend = _remembered_backend or ""
    if "gloo" in backend:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
