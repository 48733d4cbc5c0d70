"""Start a test's worker processes from a server that has already imported torch, transformers and hdet_hf.

Why not torchrun for every multi-process test: importing ``transformers.trainer`` costs ~8 s of CPU per
process on the 2-core CI machine, so most of a small distributed test's time went into starting Python, not
into what the test checks. Here the workers are forked from a ``multiprocessing`` forkserver that preloads
those modules once per test session; each worker is still its own process with its own gloo connection, and
it gets exactly the environment torchrun gives a worker (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``/``MASTER_PORT``, ...), so the code under test cannot tell the difference. The launches that
*are* the subject of a test (torchrun and ``accelerate launch`` as a user types them, the stock scripts,
NCCL on GPUs) still go through the real launchers: see `tests/distributed.torchrun`.

Like torchrun's agent: when one worker fails, the others are stopped and the launch fails; each worker's
stdout and stderr come back (rank after rank) in a `subprocess.CompletedProcess`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hdet_hf.testing.processes import _free_port  # the port torchrun_command picks the same way

# What the server imports before it forks (what the workers would otherwise import one by one).
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.distributed.fsdp",
    "transformers",
    "transformers.trainer",
    "accelerate",
    "datasets",
    "peft",
    "hdet_hf",
    "hdet_hf.trainer",
    "hdet_hf.accelerate_api",
    "hdet_hf.hsdp",
)
# Read when a module is first imported (libgomp reads OMP_NUM_THREADS when torch loads it, huggingface_hub
# its offline switch), so the server must hold the workers' values before it preloads anything.
IMPORT_TIME_ENV = {
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "CUDA_VISIBLE_DEVICES": "",
}
_context: multiprocessing.context.BaseContext | None = None


def _server() -> multiprocessing.context.BaseContext:
    """The forkserver context, started on first use with `IMPORT_TIME_ENV` and `PRELOAD`."""
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([m for m in PRELOAD if _importable(m)])
        from multiprocessing import forkserver
        from unittest import mock

        with mock.patch.dict(os.environ, IMPORT_TIME_ENV):  # the server inherits them; this process not
            forkserver.ensure_running()
        _context = context
    return _context


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _rank_env(env: dict[str, str], rank: int, nproc: int, port: int) -> dict[str, str]:
    """What torchrun's agent sets for one local worker (single node, no restarts)."""
    env = dict(env)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0",
        GROUP_WORLD_SIZE="1",
        ROLE_RANK=str(rank),
        ROLE_WORLD_SIZE=str(nproc),
        ROLE_NAME="default",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
        TORCHELASTIC_RUN_ID="none",
        TORCHELASTIC_USE_AGENT_STORE="False",
    )
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run_worker(script: str, args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked process: become ``python script args`` under ``env`` and exit with its status."""
    import atexit
    import runpy
    import traceback

    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    import torch

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    sys.argv = [script, *args]
    sys.path[0:0] = [os.path.dirname(os.path.abspath(script))]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:  # sys.exit(None | int | message), as the interpreter maps it
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - report it as a Python process would, then exit 1
        traceback.print_exc()
        code = 1
    # multiprocessing ends its children with os._exit, which skips atexit; the worker's own exit hooks
    # (e.g. destroying the process group) must still run, as at the end of `python script.py`.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def launch(
    script: str | Path, nproc: int, args: Sequence[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """Run ``script args`` on ``nproc`` preloaded local processes as torchrun would; raise
    `subprocess.TimeoutExpired` after ``timeout`` seconds (every worker stopped)."""
    context = _server()
    port = _free_port()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="hdet_workers_") as logs:
        paths = [(os.path.join(logs, f"{r}.out"), os.path.join(logs, f"{r}.err")) for r in range(nproc)]
        workers = [
            context.Process(
                target=_run_worker,
                args=(str(script), list(args), _rank_env(env, r, nproc, port), cwd, *paths[r]),
                name=f"rank{r}",
            )
            for r in range(nproc)
        ]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + timeout
        failed = timed_out = False
        while any(w.exitcode is None for w in workers):
            if any(w.exitcode not in (None, 0) for w in workers):
                failed = True  # like torchrun's agent: one failed worker stops the group
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
        _stop(workers)
        codes = [w.exitcode for w in workers]
        stdout = "".join(Path(out).read_text(errors="replace") for out, _ in paths)
        stderr = "".join(Path(err).read_text(errors="replace") for _, err in paths)
    if timed_out:
        raise subprocess.TimeoutExpired([str(script), *args], timeout, output=stdout, stderr=stderr)
    failed = failed or any(code != 0 for code in codes)
    if failed:
        stderr += f"\n[preloaded launch] worker exit codes: {codes}\n"
    return subprocess.CompletedProcess([str(script), *args], 1 if failed else 0, stdout, stderr)


def _stop(workers: list, grace: float = 5.0) -> None:
    """SIGTERM the workers still running, then SIGKILL those that outlive ``grace`` seconds."""
    for worker in workers:
        if worker.exitcode is None:
            os.kill(worker.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for worker in workers:
        worker.join(max(deadline - time.monotonic(), 0.0))
        if worker.exitcode is None:
            worker.kill()
            worker.join()
