"""Start real multi-process CPU runs from tests and benchmark scripts (not needed by the library itself).

Example:
    >>> from hdet_hf.testing.processes import torchrun_command
    >>> command = torchrun_command("train.py", 2, ["--hdet"])
    >>> command[2:5], command[-2:]
    (['torch.distributed.run', '--nproc_per_node=2', '--master_addr=127.0.0.1'], ['train.py', '--hdet'])
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["OFFLINE_CPU_ENV", "offline_cpu_env", "torchrun_command", "relaunch_as_workers"]

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
