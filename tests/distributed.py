"""Launch real multi-process runs (gloo on CPU) from tests and show the workers' output when one fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import torch

from hdet_hf.process import offline_cpu_env, torchrun_command

WORKERS = Path(__file__).parent / "workers"


def torchrun(
    script: str | Path, nproc: int, args: list[str], timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run ``script`` on ``nproc`` processes with torchrun; fail with every worker's output if one fails."""
    script = WORKERS / script if not os.path.isabs(str(script)) else Path(script)
    cmd = torchrun_command(script, nproc, args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=offline_cpu_env())
    if proc.returncode != 0:
        raise AssertionError(
            f"{nproc}-process run of {Path(script).name} failed (exit {proc.returncode}).\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return proc


def load_ranks(folder: str | Path, nproc: int, prefix: str = "rank") -> list[dict]:
    return [torch.load(Path(folder) / f"{prefix}{r}.pt", weights_only=False) for r in range(nproc)]
