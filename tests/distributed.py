"""Launch real multi-process runs (gloo on CPU) from tests and show the workers' output when one fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import torch

from hdet_hf.testing.processes import offline_cpu_env, torchrun_command

WORKERS = Path(__file__).parent / "workers"


def user_env() -> dict[str, str]:
    """The offline CPU environment without ``ACCELERATE_USE_CPU``: what a user's shell has."""
    env = offline_cpu_env()
    env.pop("ACCELERATE_USE_CPU", None)
    return env


def torchrun(
    script: str | Path,
    nproc: int,
    args: list[str],
    timeout: int = 300,
    env: dict[str, str] | None = None,
    expect_failure: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``script`` on ``nproc`` processes with torchrun; fail with every worker's output if one fails
    (or, with ``expect_failure``, if none does)."""
    script = WORKERS / script if not os.path.isabs(str(script)) else Path(script)
    cmd = torchrun_command(script, nproc, args)
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env if env is not None else offline_cpu_env()
    )
    if expect_failure:
        assert proc.returncode != 0, f"expected {Path(script).name} to fail:\n{proc.stdout[-3000:]}"
        return proc
    if proc.returncode != 0:
        raise AssertionError(
            f"{nproc}-process run of {Path(script).name} failed (exit {proc.returncode}).\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return proc


def load_ranks(folder: str | Path, nproc: int, prefix: str = "rank") -> list[dict]:
    return [torch.load(Path(folder) / f"{prefix}{r}.pt", weights_only=False) for r in range(nproc)]
