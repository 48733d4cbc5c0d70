"""What the benchmark and experiment scripts share: the worker prologue, the machine record, results I/O.

Every script in ``scripts/`` that measures something (``benchmark_speed.py``, ``benchmark_lora.py``,
``benchmark_quality.py``, ``hparam_direction.py``) relaunches itself under torchrun and starts each worker with
`init_worker`, and records the machine with `machine_record` / `machine_info`. The two experiment scripts write
one JSON line per finished run (`append_result`) and rebuild their tables from the file (`read_results`), so a
rerun can resume and a report can be redrawn without training; `launch_experiment` starts their workers.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "RESULTS_JSONL",
    "Worker",
    "init_worker",
    "usable_cores",
    "loadavg",
    "machine_record",
    "machine_info",
    "public_settings",
    "read_results",
    "kept_results",
    "append_result",
    "launch_experiment",
    "finite_or_none",
    "rounded",
]

RESULTS_JSONL = "results.jsonl"


# ------------------------------------------------------------------------------------------------ workers
@dataclass(frozen=True)
class Worker:
    """Where this worker runs: its rank, the processes in all and on this node, and its torch threads."""

    rank: int
    world: int
    local_world: int
    threads: int


def init_worker(backend: str = "gloo", threads: int | None = None) -> Worker:
    """The first lines of every benchmark worker under torchrun: join the process group, quiet transformers,
    and set the torch threads.

    ``threads``: None keeps what the launcher set (``OMP_NUM_THREADS``); 0 splits this node's usable cores
    evenly over its processes (at least 1 each); n sets n. Nothing is seeded here: each script seeds where it
    builds a model or a batch, so every mode and run starts from the same numbers.
    """
    import torch
    import torch.distributed as dist
    import transformers

    dist.init_process_group(backend=backend)
    world = dist.get_world_size()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if threads is not None:
        torch.set_num_threads(threads or max(1, usable_cores() // local_world))
    transformers.logging.set_verbosity_error()
    return Worker(dist.get_rank(), world, local_world, torch.get_num_threads())


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask; all logical cores where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages (how busy the machine was), or None where the OS has none."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


# ------------------------------------------------------------------------------------------------ machine
def _cpu_name() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def _ram_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            kib = int(re.search(r"MemTotal:\s+(\d+)\s+kB", f.read()).group(1))
    except (OSError, AttributeError):
        return None
    return round(kib * 1024 / 2**30, 1)


def machine_record() -> dict[str, Any]:
    """The machine and software a result was measured with (the ``machine`` of benchmark_speed's results.json)."""
    import torch
    import transformers

    return {
        "usable_cores": usable_cores(),
        "cpu": _cpu_name(),
        "ram_gib": _ram_gib(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
    }


def machine_info() -> str:
    """`machine_record` in one line: CPU model, logical (and, if fewer, usable) cores, Python, torch, transformers."""
    m = machine_record()
    logical = os.cpu_count()
    usable = f" ({m['usable_cores']} usable)" if m["usable_cores"] != logical else ""
    return (
        f"{m['cpu']}, {logical} logical cores{usable}, Python {m['python']}, torch {m['torch']}, "
        f"transformers {m['transformers']}"
    )


def public_settings(args: Any) -> dict[str, Any]:
    """A script's parsed flags as recorded in its results (the hidden ``--_worker`` plumbing left out)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_")}


# ------------------------------------------------------------------------------------- results.jsonl runs
def read_results(path: Path) -> list[dict[str, Any]]:
    """The last record of each config name in a results.jsonl (later lines replace earlier ones)."""
    if not path.is_file():
        return []
    by_name: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            by_name.pop(record["name"], None)
            by_name[record["name"]] = record
    return list(by_name.values())


def kept_results(path: Path, keep: bool) -> list[dict[str, Any]]:
    """In a worker: the earlier records of ``path`` this run keeps (none unless ``keep``: resuming or adding
    configs), read on every rank before any rank goes on (a barrier), so rank 0 appends only after all have read.
    """
    import torch.distributed as dist

    records = read_results(path) if keep else []
    dist.barrier()
    return records


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one finished run to a results.jsonl as strict JSON (call it from one rank only)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(finite_or_none(record), allow_nan=False) + "\n")


def launch_experiment(
    script: str | Path, argv: Sequence[str], out_dir: Path, num_processes: int, *, keep: bool, settings: dict
) -> tuple[int, float, dict[str, Any]]:
    """Run ``script``'s workers (``--_worker``) on ``num_processes`` CPU processes and wait.

    Unless ``keep`` (resuming or adding configs), an earlier results.jsonl is moved to results.jsonl.prev
    first, so a fresh run never mixes with old records. ``script`` lives in the checkout's ``scripts/``, whose
    parent is put on the workers' path. Returns the exit code, the wall seconds and the ``meta`` record of the
    run (command, date, machine, processes, wall time, exit code, ``settings``).
    """
    from .processes import relaunch_as_workers

    script = Path(script).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / RESULTS_JSONL
    if not keep and results.exists():
        results.replace(out_dir / (RESULTS_JSONL + ".prev"))
    prefix = f"hdet_{script.stem}_"
    rc, wall = relaunch_as_workers(script, num_processes, argv, script.parent.parent, work_prefix=prefix)
    meta = {
        "command": " ".join(["python", f"scripts/{script.name}", *(shlex.quote(a) for a in argv)]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "num_processes": num_processes,
        "wall_s": wall,
        "exit_code": rc,
        "settings": settings,
    }
    return rc, wall, meta


# ------------------------------------------------------------------------------------------ JSON numbers
def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (strict JSON has no NaN or inf).

    Example:
        >>> finite_or_none({"loss": float("nan"), "steps": [1.0, float("inf")]})
        {'loss': None, 'steps': [1.0, None]}
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def rounded(obj: Any, digits: int = 6) -> Any:
    """Floats to ``digits`` significant digits (keeps results.json readable and small)."""
    if isinstance(obj, float) and math.isfinite(obj):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj
