"""Process-level helpers for scripts launched with ``torchrun``/``accelerate launch``."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = [
    "finish_distributed",
    "offline_cpu_env",
    "torchrun_command",
    "relaunch_as_workers",
    "launched_world_size",
    "accelerator_available",
    "check_launch_seen",
]

# What every CPU/gloo launch of our scripts and tests sets: nothing from the Hub, no GPU picked up from the
# caller's environment (the runs are CPU by design), no tokenizer thread pools fighting the ranks for cores.
OFFLINE_CPU_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PYTHONUNBUFFERED": "1",
    "CUDA_VISIBLE_DEVICES": "",
    "ACCELERATE_USE_CPU": "true",
}


def launched_world_size() -> int:
    """Processes the launcher started (``WORLD_SIZE`` from torchrun / ``accelerate launch``); 1 if none."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


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


def offline_cpu_env(threads: int = 1, pythonpath: str | Path | None = None) -> dict[str, str]:
    """``os.environ`` plus `OFFLINE_CPU_ENV`, ``threads`` torch threads per process, and ``pythonpath`` first."""
    env = dict(os.environ)
    env.update(OFFLINE_CPU_ENV)
    env["OMP_NUM_THREADS"] = str(threads)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_command(program: str | Path | Sequence[str], nproc: int, args: Sequence[str] = ()) -> list[str]:
    """``python -m torch.distributed.run`` on ``nproc`` local processes, rendezvous on a free local port.

    ``program`` is a script path, or the launcher's arguments before ``args`` (e.g. ``["-m", "hdet_hf.launch",
    "run_clm.py"]``).

    (An explicit free port rather than ``--standalone``: several launches from one test session or benchmark
    may be alive at once.)
    """
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        *([str(program)] if isinstance(program, (str, Path)) else program),
        *args,
    ]


def finish_distributed(exit_code: int = 0) -> None:
    """Tear down the process group and end the process.

    With the gloo backend, an interpreter that exits while gloo's worker threads still hold tensors can
    abort at finalisation ("terminate called without an active exception", SIGABRT; seen here in about 1 of
    8 runs of a plain ``transformers.Trainer`` script on 2 CPU processes, with or without
    ``destroy_process_group``; pytorch/pytorch#179291 describes it). The launcher then reports a failed run
    although the work finished. For gloo we therefore flush and leave with ``os._exit`` after a barrier and
    ``destroy_process_group``; 12 of 12 runs exited cleanly that way. Python-level atexit handlers (e.g. a
    logger's final flush) are run first, since ``os._exit`` would skip them. NCCL and single-process runs
    return normally.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    backend = str(dist.get_backend())
    dist.barrier()
    dist.destroy_process_group()
    if "gloo" in backend:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)


def relaunch_as_workers(
    script: str | Path, nproc: int, argv: Sequence[str], repo: str | Path, work_prefix: str = "hdet_"
) -> tuple[int, float]:
    """Run ``script argv --_worker --_work_dir DIR`` on ``nproc`` local CPU processes and wait.

    The benchmark scripts start themselves this way: run plainly, they relaunch under torchrun with a
    scratch folder (removed afterwards) and ``repo`` on the path. Returns (exit code, wall seconds).
    """
    work_dir = tempfile.mkdtemp(prefix=work_prefix)
    cmd = torchrun_command(Path(script).resolve(), nproc, [*argv, "--_worker", "--_work_dir", work_dir])
    start = time.time()
    try:
        code = subprocess.call(cmd, env=offline_cpu_env(threads=1, pythonpath=repo))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return code, round(time.time() - start, 1)
