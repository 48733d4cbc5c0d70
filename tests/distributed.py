"""Launch real multi-process runs (gloo on CPU) from tests and show the workers' output when one fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import preloaded
import pytest
import torch

from hdet_hf.testing.processes import offline_cpu_env, torchrun_command

WORKERS = Path(__file__).parent / "workers"
BACKEND_ENV = "HDET_TEST_BACKEND"  # read by tests/workers/dist_backend.py
# The Trainer arguments the multi-process tests share: a small batch, a fixed LR and seed, on CPU, quiet.
TRAINER_ARGS = [
    "--per_device_train_batch_size", "4", "--learning_rate", "1e-2", "--report_to", "none", "--use_cpu", "--seed", "0",
    "--disable_tqdm", "true",
]  # fmt: skip


def test_backend() -> str:
    """gloo (default) or nccl, as ``pytest --dist-backend`` / ``HDET_TEST_BACKEND`` chose."""
    return os.environ.get(BACKEND_ENV, "gloo").strip().lower() or "gloo"


test_backend.__test__ = False  # a helper, not a test


def worker_env() -> dict[str, str]:
    """The workers' environment: offline and CPU-only under gloo; under NCCL the GPUs stay visible."""
    env = offline_cpu_env()
    if test_backend() == "nccl":
        for key in ("CUDA_VISIBLE_DEVICES", "ACCELERATE_USE_CPU"):
            env.pop(key, None)
            if key in os.environ:
                env[key] = os.environ[key]
    return env


def skip_unless_backend_fits(nproc: int) -> None:
    """Under NCCL every process needs its own GPU: skip when there are fewer than ``nproc``."""
    if test_backend() == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus < nproc:
            pytest.skip(f"NCCL needs one GPU per process: {nproc} processes, {gpus} GPU(s)")


def gloo_only() -> None:
    """For tests whose workers run on CPU only: skip them when the NCCL backend was chosen."""
    if test_backend() != "gloo":
        pytest.skip(f"this scenario runs on gloo/CPU only ({BACKEND_ENV}={test_backend()})")


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
    launcher: str = "preloaded",
) -> subprocess.CompletedProcess:
    """Run ``script`` on ``nproc`` processes as torchrun starts them; fail with every worker's output if one
    fails (or, with ``expect_failure``, if none does).

    ``launcher="preloaded"`` (the default) forks the workers from a server that has imported torch and
    transformers once (`preloaded`; the same environment as under torchrun, far less start-up time);
    ``"torchrun"`` runs the real ``python -m torch.distributed.run``, for tests whose subject is the launch
    itself. Under NCCL it is always torchrun (CUDA does not survive a fork).
    """
    script = WORKERS / script if not os.path.isabs(str(script)) else Path(script)
    env = env if env is not None else worker_env()
    if launcher not in ("preloaded", "torchrun"):
        raise ValueError(f"launcher must be 'preloaded' or 'torchrun', got {launcher!r}")
    if launcher == "preloaded" and test_backend() == "gloo":
        proc = preloaded.launch(script, nproc, [str(a) for a in args], env, timeout)
    else:
        cmd = torchrun_command(script, nproc, args)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
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
