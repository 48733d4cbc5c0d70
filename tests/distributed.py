"""Launch real multi-process runs (gloo on CPU) from tests and show the workers' output when one fails."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import torch

WORKERS = Path(__file__).parent / "workers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(
    script: str | Path, nproc: int, args: list[str], timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run ``script`` on ``nproc`` processes with torchrun; fail with every worker's output if one fails."""
    script = WORKERS / script if not os.path.isabs(str(script)) else Path(script)
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
            "PYTHONUNBUFFERED": "1",
            # The coding client's and CI's environment may set a device; these tests are CPU/gloo by design.
            "CUDA_VISIBLE_DEVICES": "",
            "ACCELERATE_USE_CPU": "true",
        }
    )
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(script),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise AssertionError(
            f"{nproc}-process run of {Path(script).name} failed (exit {proc.returncode}).\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return proc


def load_ranks(folder: str | Path, nproc: int, prefix: str = "rank") -> list[dict]:
    return [torch.load(Path(folder) / f"{prefix}{r}.pt", weights_only=False) for r in range(nproc)]
