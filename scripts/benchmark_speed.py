"""Speed and memory of HDET against DDP and against no communication at all.

Three measurements, each on the same models, the same per-rank batch and the same processes:

1. **Optimizer-step time**, interleaved in one run: no communication (the plain model, the physical floor),
   DDP (gradient all-reduce every step), HDET ``local`` (no gradient all-reduce, one fused converge every
   T steps) for several T, and HDET ``shared`` (DDP + the engine). Each round runs every mode for one
   window, the order rotates between rounds, and a barrier starts every window. HDET windows are multiples
   of T, so the headline "mean ms/step" includes the converge amortized over T steps; the median of the
   per-step times is reported next to it. A step's time is the slowest rank's.
2. **Converge alone**: ``fused_average_`` (parameters + the per-rank loss/LR row in one all-reduce) against
   one all-reduce of the parameters flattened into one buffer (PyTorch's ``average_parameters``:
   ``torch.cat``, divide, all-reduce, copy back), against the per-tensor loop of the paper's reference code
   (``for p in params: all_reduce(p); p.div_(N)`` plus two ``all_gather``s: losses and LRs), against the
   bare all-reduce of a ready flat buffer (the communication floor), the full ``HDETEngine.converge``, and
   ``fused_average_`` with bucket caps smaller than the model. Interleaved, many repetitions, median.
3. **Peak memory** per mode (a few training steps including a converge), and the extra bytes a converge
   allocates for several ``bucket_cap_bytes``. On CPU: the process's resident-set high-water mark
   (``VmHWM``, reset through ``/proc/self/clear_refs``) above the resident set before the model is built,
   with glibc told to ``mmap`` every allocation above 64 KiB so freed buffers leave the resident set. On
   CUDA: ``torch.cuda.max_memory_allocated`` above ``memory_allocated``.

4. **Simulated interconnect** (``--simulate_links 1,10,25,100``; a SIMULATION, labelled so in every table):
   DDP, HDET ``local`` and ``shared`` steps with every cross-replica all-reduce's bytes sent over a modelled
   ring link (``scripts/simlink.py``) instead of loopback, compute measured for real (see ``SimulatedLink``);
   validated against the real loopback with the link model set to its fitted speed; then DDP / HDET-local
   ratios, break-even bandwidths, and scenarios for a scaled model and HSDP replica groups.

Launch it plainly and it starts itself under ``torch.distributed.run`` once per ``--nprocs`` entry, or
launch it with ``torchrun`` yourself (then ``--nprocs`` is ignored). Rank 0 prints markdown tables and
writes ``results.json``, ``results.md`` and ``speed.png`` into ``--output_dir``.

Example:
    python scripts/benchmark_speed.py --quick                    # smoke run, well under a minute
    python scripts/benchmark_speed.py                            # full run: 2 and 4 processes, both models
    torchrun --nproc_per_node 8 scripts/benchmark_speed.py --device cuda --backend nccl   # untested here
    python scripts/benchmark_speed.py --nprocs 2 --models large --sim_only --simulate_links 1,10,25,100
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import datetime
import gc
import json
import math
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import transformers
from torch.nn.parallel import DistributedDataParallel

from hdet_hf import HDETConfig
from hdet_hf.collectives import Workspace, fused_average_, iter_buckets
from hdet_hf.engine import HDETEngine
from hdet_hf.examples.data import DEFAULT_MODEL_CONFIG_PATH
from hdet_hf.process import finish_distributed
from hdet_hf.testing.benchmarks import init_worker, loadavg, machine_record, usable_cores
from hdet_hf.testing.processes import torchrun_command

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/simlink.py, also under torchrun
from simlink import (  # noqa: E402
    Link,
    break_even_bandwidth,
    fit_link,
    fit_overlap,
    max_compute_for_ratio,
    ring_allreduce_seconds,
    step_times,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Llama shapes (random init, tied embeddings, as hdet_hf/examples/model_configs/tiny_llama.json otherwise).
MODELS: dict[str, dict[str, int]] = {
    # 988,288 parameters
    "small": {
        "vocab_size": 2048,
        "hidden_size": 128,
        "intermediate_size": 344,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    # 21,600,768 parameters
    "large": {
        "vocab_size": 8192,
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
    },
}

# Run length per preset; any flag given explicitly wins over its preset.
PRESETS: dict[str, dict[str, Any]] = {
    "full": {
        "nprocs": "2,4",
        "models": "small,large",
        "sync_intervals": "10,50,200",
        "reference_sync_interval": 50,
        "window": 50,
        "rounds": 3,
        "warmup_steps": 3,
        "converge_reps": 40,
    },
    "quick": {
        "nprocs": "2",
        "models": "small",
        "sync_intervals": "2,5,10",
        "reference_sync_interval": 5,
        "window": 10,
        "rounds": 2,
        "warmup_steps": 2,
        "converge_reps": 5,
    },
}

TARGETS = {
    "local_vs_nocomm_max": 1.02,
    "ddp_vs_local_min": 2.0,
    "fused_vs_flat_max": 1.10,
    "per_tensor_vs_fused_min": 3.0,
}

STEP_COLUMNS = [
    "model",
    "params",
    "nproc",
    "mode",
    "sync_interval",
    "steps",
    "mean_ms",
    "median_ms",
    "mean_vs_nocomm",
    "median_vs_nocomm",
]
CONVERGE_COLUMNS = [
    "model",
    "nproc",
    "variant",
    "bucket_cap_mib",
    "buckets",
    "median_ms",
    "min_ms",
    "vs_flat",
]
MEMORY_COLUMNS = ["model", "nproc", "mode", "peak_mib", "vs_ddp"]
CONVERGE_MEMORY_COLUMNS = [
    "model",
    "nproc",
    "bucket_cap_mib",
    "buckets",
    "measured_extra_mib",
    "predicted_extra_mib",
    "one_bucket_live_mib",
]

MIB = 2**20
BIG_RUN = 10**9  # total_steps for engines that must never hit their "last step" converge


# --------------------------------------------------------------------------------------------- arguments
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Defaults come from the full preset (or --quick); a flag given explicitly overrides its preset.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="Smoke run: small model, 2 processes, short windows."
    )
    parser.add_argument(
        "--nprocs",
        help="Comma-separated process counts to launch, one torch.distributed.run each (full: 2,4; quick: 2). "
        "Ignored when the script is already running under torchrun.",
    )
    parser.add_argument("--models", help=f"Comma-separated models from {sorted(MODELS)} (full: small,large).")
    parser.add_argument("--sync_intervals", help="Comma-separated T for HDET local (full: 10,50,200).")
    parser.add_argument(
        "--reference_sync_interval",
        type=int,
        help="T of HDET shared and of the targets (full: 50; quick: 5); added to --sync_intervals if missing.",
    )
    parser.add_argument(
        "--window",
        type=int,
        help="Optimizer steps per mode and round (full: 50); HDET windows are rounded up to a multiple of T.",
    )
    parser.add_argument("--rounds", type=int, help="Interleaved rounds; the mode order rotates (full: 3).")
    parser.add_argument("--warmup_steps", type=int, help="Untimed steps per model before the first round.")
    parser.add_argument("--converge_reps", type=int, help="Repetitions of each converge variant (full: 40).")
    parser.add_argument("--batch_size", type=int, default=4, help="Sequences per rank and step (default 4).")
    parser.add_argument("--seq_len", type=int, default=128, help="Tokens per sequence (default 128).")
    parser.add_argument("--lr", type=float, default=1e-4, help="AdamW base LR (no effect on speed).")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cpu (tested) or cuda.")
    parser.add_argument(
        "--backend",
        choices=["gloo", "nccl"],
        help="Process-group backend (default gloo on cpu, nccl on cuda; cuda/nccl is untested on the CPU-only "
        "machine these benchmarks were recorded on).",
    )
    parser.add_argument(
        "--threads_per_proc",
        type=int,
        help="torch threads per process (default: usable cores // processes, at least 1).",
    )
    parser.add_argument(
        "--skip_memory",
        action="store_true",
        help="Skip the peak-memory measurements (they build extra models).",
    )
    parser.add_argument(
        "--output_dir",
        default=str(REPO_ROOT / "benchmarks" / "speed"),
        help="Where rank 0 writes results.json, results.md and speed.png (default benchmarks/speed/).",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="Merge into the results.json already in --output_dir: its runs with other process counts are kept, "
        "so the 2- and 4-process runs can be made at different times (models, T, batch and device must match).",
    )
    sim = parser.add_argument_group(
        "simulated interconnect (a SIMULATION: compute is measured, the link between replicas is modelled)"
    )
    sim.add_argument(
        "--simulate_links",
        default="",
        help="Comma-separated link speeds in Gb/s between replicas, e.g. 1,10,25,100: adds step timings of DDP, "
        "HDET local and shared with every cross-replica all-reduce's bytes sent over a modelled ring link "
        "(scripts/simlink.py) instead of loopback, next to the same modes at the loopback link's fitted speed "
        "(the validation) and measured for real. Off by default.",
    )
    sim.add_argument(
        "--link_latency_us",
        type=float,
        default=10.0,
        help="Latency per ring hop of the simulated links, in microseconds (default 10: a datacenter network).",
    )
    sim.add_argument(
        "--sim_only",
        action="store_true",
        help="Run only the simulated-link measurements (skip step/converge/memory tables).",
    )
    sim.add_argument(
        "--scale_params",
        type=float,
        default=1e9,
        help="Parameter count of the scaled scenario: its fp32 bytes are modelled, its compute is the measured "
        "no-comm step x scale_params / measured parameters (default 1e9).",
    )
    sim.add_argument(
        "--hsdp_groups",
        default="2,4",
        help="Replica-group counts of the HSDP scenarios (cross-group traffic of the scaled model; default 2,4).",
    )
    sim.add_argument(
        "--sim_reference_compute",
        help="A results.json of an earlier (e.g. idle-machine) full run: its no-comm step time of the same model "
        "and process count is used as a second compute time in the scenario tables, next to this run's.",
    )
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="Measure nothing: rebuild results.md, the derived tables of results.json and speed.png in "
        "--output_dir from the raw runs recorded in its results.json (pass the flags the run used).",
    )
    # Launcher -> worker: the file where rank 0 leaves its part of the results.
    parser.add_argument("--part_file", help=argparse.SUPPRESS)
    return parser


def resolve_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full"]
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.nprocs = _int_list("--nprocs", args.nprocs)
    args.models = [m.strip() for m in str(args.models).split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown or not args.models:
        raise SystemExit(f"--models must name models from {sorted(MODELS)}, but got {args.models!r}")
    args.sync_intervals = sorted(set(_int_list("--sync_intervals", args.sync_intervals)))
    if args.reference_sync_interval not in args.sync_intervals:
        args.sync_intervals = sorted({*args.sync_intervals, args.reference_sync_interval})
    for name in ("reference_sync_interval", "window", "rounds", "converge_reps", "batch_size", "seq_len"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be a positive integer, but got {getattr(args, name)!r}")
    if args.warmup_steps < 0:
        raise SystemExit(f"--warmup_steps must be >= 0, but got {args.warmup_steps!r}")
    if args.backend is None:
        args.backend = "nccl" if args.device == "cuda" else "gloo"
    args.simulate_links = parse_link_speeds(args.simulate_links)
    args.hsdp_groups = _int_list("--hsdp_groups", args.hsdp_groups)
    if args.sim_only and not args.simulate_links:
        raise SystemExit("--sim_only needs --simulate_links (e.g. --simulate_links 1,10,25,100)")
    if not (args.link_latency_us >= 0 and math.isfinite(args.link_latency_us)):
        raise SystemExit(f"--link_latency_us must be >= 0, but got {args.link_latency_us!r}")
    if not args.scale_params >= 1:
        raise SystemExit(f"--scale_params must be a positive parameter count, but got {args.scale_params!r}")
    args.scale_params = int(args.scale_params)
    if any(n < 2 for n in args.nprocs):
        raise SystemExit(
            f"--nprocs needs 2 or more processes each (there is nothing to average on 1): {args.nprocs}"
        )
    return args


def _int_list(flag: str, value: Any) -> list[int]:
    try:
        out = [int(x) for x in str(value).split(",") if x.strip()]
    except ValueError:
        raise SystemExit(
            f"{flag} must be comma-separated integers, e.g. 10,50,200, but got {value!r}"
        ) from None
    if not out or any(x < 1 for x in out):
        raise SystemExit(f"{flag} must be comma-separated positive integers, but got {value!r}")
    return out


def parse_link_speeds(value: str) -> list[float]:
    """``--simulate_links``: comma-separated positive Gb/s values (empty: no simulation)."""
    try:
        speeds = [float(x) for x in str(value).split(",") if x.strip()]
    except ValueError:
        raise SystemExit(
            f"--simulate_links must be comma-separated Gb/s values, e.g. 1,10,25,100, but got {value!r}"
        ) from None
    if any(not (g > 0 and math.isfinite(g)) for g in speeds):
        raise SystemExit(
            f"--simulate_links must be positive Gb/s values, e.g. 1,10,25,100, but got {value!r}"
        )
    return sorted(set(speeds))


# ------------------------------------------------------------------------------------------------ models
def build_model(name: str, seq_len: int) -> transformers.LlamaForCausalLM:
    """A random Llama of shape ``MODELS[name]``, identical on every rank (fixed seed)."""
    with open(DEFAULT_MODEL_CONFIG_PATH, encoding="utf-8") as f:
        config_dict = json.load(f)
    config_dict.update(MODELS[name])
    config_dict["max_position_embeddings"] = max(seq_len, config_dict["max_position_embeddings"])
    config_dict["use_cache"] = False
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig.from_dict(config_dict))


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def rank_batch(
    vocab_size: int, batch_size: int, seq_len: int, rank: int, device: torch.device
) -> torch.Tensor:
    """This rank's fixed batch (its own shard): the same tokens at every step and in every mode."""
    g = torch.Generator().manual_seed(1234 + rank)
    return torch.randint(4, vocab_size, (batch_size, seq_len), generator=g).to(device)


# ----------------------------------------------------------------------------------------- distributed
class Dist:
    """The process group and device of this worker, with the few collective helpers the timings need."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if args.device == "cuda":
            if not torch.cuda.is_available():
                raise SystemExit("--device cuda was given but torch.cuda.is_available() is False")
            # More processes than GPUs (gloo only: NCCL refuses two ranks on one GPU) share them round-robin.
            self.device = torch.device("cuda", self.local_rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        worker = init_worker(args.backend, threads=args.threads_per_proc or 0)
        self.rank, self.world, self.local_world, self.threads = (
            worker.rank, worker.world, worker.local_world, worker.threads
        )

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def max_over_ranks(self, values: Sequence[float]) -> list[float]:
        t = torch.tensor(list(values), dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.cpu().tolist()

    def mean_over_ranks(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t) / self.world

    def log(self, message: str) -> None:
        if self.rank == 0:
            print(message, flush=True)


# ------------------------------------------------------------------------------------------ step timing
def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> torch.Tensor:
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def _engine_step(
    engine: HDETEngine,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: torch.Tensor,
    lr: float,
) -> None:
    # The documented per-step protocol: add_loss, optimizer.step, end_step (converges on the grid), apply_lr.
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    engine.add_loss(loss)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    engine.end_step()
    engine.apply_lr([lr])


def _new_engine(
    sync_interval: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    gradient_sync: str,
    lr: float,
) -> HDETEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sync_interval=1 warns that it explores little; irrelevant here
        # explore_until 1.0, as the recorded results ran: the spread stays on for every timed step.
        # divergence_factor 0: timing modes share models and train one fixed batch until it is memorised, so
        # "loss 10x the ensemble mean" fires on harmless bumps near zero loss (it did on an H200); non-finite
        # losses still stop the run.
        config = HDETConfig(
            sync_interval=sync_interval,
            lr_spread=0.5,
            gradient_sync=gradient_sync,
            explore_until=1.0,
            divergence_factor=0,
        )
        engine = HDETEngine(config, model, optimizer, total_steps=BIG_RUN)
    engine.apply_lr([lr])
    return engine


def time_window(d: Dist, step_fn: Callable[[], Any], n_steps: int) -> tuple[float, list[float], float]:
    """Run ``n_steps`` after a barrier.

    Returns the window's and each step's seconds (the slowest rank's), and the CPU seconds the processes used
    in the window, averaged over ranks (all threads, gloo's included): CPU seconds / window seconds near
    cores-per-process means the machine was ours; much lower means other work took the cores.
    """
    dist.barrier()
    times = [0.0] * n_steps
    cpu0 = time.process_time()
    start = time.perf_counter()
    for i in range(n_steps):
        t0 = time.perf_counter()
        step_fn()
        d.sync()
        times[i] = time.perf_counter() - t0
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    worst = d.max_over_ranks([total, *times])
    return worst[0], worst[1:], d.mean_over_ranks(cpu)


def bench_steps(d: Dist, args: argparse.Namespace, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    plain = build_model(name, args.seq_len).to(d.device)
    n_params = count_params(plain)
    wrapped = DistributedDataParallel(
        copy.deepcopy(plain), device_ids=[d.device.index] if d.device.type == "cuda" else None
    )
    opt_plain = torch.optim.AdamW(plain.parameters(), lr=args.lr)
    opt_ddp = torch.optim.AdamW(wrapped.parameters(), lr=args.lr)
    batch = rank_batch(MODELS[name]["vocab_size"], args.batch_size, args.seq_len, d.rank, d.device)
    lr = args.lr

    # Warm-up (allocations, DDP's bucket rebuild after its first iteration, gloo connections), then one converge
    # per model, before the engines that are timed exist, so their step counters start on the grid.
    for _ in range(args.warmup_steps):
        _step(plain, opt_plain, batch)
        _step(wrapped, opt_ddp, batch)
    with torch.no_grad():
        for model in (plain, wrapped.module):
            fused_average_([p.data for p in model.parameters()], torch.zeros(2), d.rank, d.world)
    d.sync()

    modes: list[tuple[str, int | None, Callable[[], Any]]] = [
        ("nocomm", None, lambda: _step(plain, opt_plain, batch)),
        ("ddp", None, lambda: _step(wrapped, opt_ddp, batch)),
    ]
    for t in args.sync_intervals:
        engine = _new_engine(t, plain, opt_plain, "local", lr)
        modes.append(("local", t, lambda e=engine: _engine_step(e, plain, opt_plain, batch, lr)))
    shared = _new_engine(args.reference_sync_interval, wrapped.module, opt_ddp, "shared", lr)
    modes.append(
        ("shared", args.reference_sync_interval, lambda: _engine_step(shared, wrapped, opt_ddp, batch, lr))
    )

    def window_steps(t: int | None) -> int:
        return args.window if t is None else math.ceil(args.window / t) * t

    record: dict[tuple[str, int | None], dict[str, list]] = {
        (m, t): {"totals": [], "steps": [], "times": [], "cpu": []} for m, t, _ in modes
    }
    started = time.perf_counter()
    for r in range(args.rounds):
        shift = r % len(modes)
        order = modes[shift:] + modes[:shift]
        for mode, t, fn in order:
            n = window_steps(t)
            total, times, cpu = time_window(d, fn, n)
            rec = record[(mode, t)]
            rec["cpu"].append(cpu)
            rec["totals"].append(total)
            rec["steps"].append(n)
            rec["times"].extend(times)
        d.log(
            f"  [{name}, {d.world} procs] round {r + 1}/{args.rounds} done "
            f"({time.perf_counter() - started:.0f} s, order {[_label(m, t) for m, t, _ in order]})"
        )

    rows = []
    for mode, t, _ in modes:
        rec = record[(mode, t)]
        row = {
            "model": name,
            "params": n_params,
            "nproc": d.world,
            "threads_per_proc": d.threads,
            "mode": mode,
            "sync_interval": t,
            "window_steps": window_steps(t),
            "steps": sum(rec["steps"]),
            "mean_ms": 1000 * sum(rec["totals"]) / sum(rec["steps"]),
            "median_ms": 1000 * statistics.median(rec["times"]),
            "p90_ms": 1000 * _quantile(rec["times"], 0.9),
            "window_mean_ms": [1000 * tot / n for tot, n in zip(rec["totals"], rec["steps"])],
            "cpu_share": sum(rec["cpu"]) / sum(rec["totals"]),
        }
        if t is not None:
            # Steps that ended in a converge (the last of every T) vs the others.
            conv = [x for i, x in enumerate(rec["times"]) if (i + 1) % t == 0]
            other = [x for i, x in enumerate(rec["times"]) if (i + 1) % t != 0]
            row["median_converge_step_ms"] = 1000 * statistics.median(conv)
            row["median_other_step_ms"] = 1000 * statistics.median(other) if other else None
        rows.append(row)
    base = next(r for r in rows if r["mode"] == "nocomm")
    for row in rows:
        row["mean_vs_nocomm"] = row["mean_ms"] / base["mean_ms"]
        row["median_vs_nocomm"] = row["median_ms"] / base["median_ms"]
    return rows, {"plain": plain, "optimizer": opt_plain}


def _quantile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _label(mode: str, t: int | None) -> str:
    return mode if t is None else f"{mode} T={t}"


# -------------------------------------------------------------------------------------- converge alone
def _flat_average_(tensors: Sequence[torch.Tensor], world: int) -> None:
    """PyTorch's ``average_parameters`` (cat, divide, one all-reduce), copying back instead of rebinding."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    flat.div_(world)
    dist.all_reduce(flat)
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n


def _per_tensor_average_(
    tensors: Sequence[torch.Tensor], world: int, loss: torch.Tensor, lrs: torch.Tensor
) -> None:
    """The paper's reference loop: one all-reduce per tensor, then all-gathers of the losses and the LRs."""
    for t in tensors:
        dist.all_reduce(t)
        t.div_(world)
    losses = [torch.empty_like(loss) for _ in range(world)]
    dist.all_gather(losses, loss)
    gathered_lrs = [torch.empty_like(lrs) for _ in range(world)]
    dist.all_gather(gathered_lrs, lrs)


def bucket_layout(tensors: Sequence[torch.Tensor], cap: int, world: int, stats_k: int = 2) -> list[int]:
    """Bytes of each flat buffer ``fused_average_`` allocates (float32 tensors; the stats block rides bucket 0)."""
    sizes = []
    for i, bucket in enumerate(iter_buckets(tensors, cap, 4)):
        numel = sum(tensors[j].numel() for j in bucket)
        sizes.append(4 * (numel + (world * (stats_k + 1) if i == 0 else 0)))
    return sizes


def converge_caps(model_bytes: int) -> list[int]:
    """The default cap (one bucket here) and caps of a quarter and a sixteenth of the model."""
    default = int(HDETConfig().bucket_size_mb * MIB)
    return [default, max(1, model_bytes // 4), max(1, model_bytes // 16)]


def bench_converge(
    d: Dist, args: argparse.Namespace, name: str, plain: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> list[dict[str, Any]]:
    tensors = [p.data for p in plain.parameters()]
    numel = sum(t.numel() for t in tensors)
    model_bytes = 4 * numel
    row = torch.tensor([2.5, 1.0], dtype=torch.float64)
    loss = torch.tensor([2.5], device=d.device)
    lrs = torch.tensor([args.lr], device=d.device)
    ready = torch.zeros(numel, device=d.device)  # zeros: repeated SUM all-reduces stay finite
    engine = _new_engine(1, plain, optimizer, "local", args.lr)

    def engine_converge() -> None:
        engine.add_loss(torch.tensor(2.5, device=d.device))
        engine.end_step()  # sync_interval=1: a full converge (health check, fused_average_, bookkeeping)

    kept = Workspace()  # the engine's converge keeps its buffer this way on CPU

    def fresh_buffer_touch() -> None:
        torch.empty(numel, device=d.device).fill_(0.0)  # no communication: allocating + first write only

    def fused(cap: int) -> Callable[[], Any]:
        return lambda: fused_average_(tensors, row, d.rank, d.world, bucket_cap_bytes=cap)

    default_cap, quarter, sixteenth = converge_caps(model_bytes)
    variants: list[tuple[str, int | None, Callable[[], Any]]] = [
        ("fresh_buffer_touch", None, fresh_buffer_touch),
        ("allreduce_only", None, lambda: dist.all_reduce(ready)),
        ("flat", None, lambda: _flat_average_(tensors, d.world)),
        ("fused", default_cap, fused(default_cap)),
        (
            "fused_reused_buffer",
            default_cap,
            lambda: fused_average_(tensors, row, d.rank, d.world, bucket_cap_bytes=default_cap, workspace=kept),
        ),
        ("fused_cap_1/4", quarter, fused(quarter)),
        ("fused_cap_1/16", sixteenth, fused(sixteenth)),
        ("engine_converge", engine.bucket_cap_bytes, engine_converge),
        ("per_tensor", None, lambda: _per_tensor_average_(tensors, d.world, loss, lrs)),
    ]
    times: dict[str, list[float]] = {v: [] for v, _, _ in variants}
    with torch.no_grad():
        for _, _, fn in variants:  # warm-up
            fn()
        for rep in range(args.converge_reps):
            shift = rep % len(variants)
            for label, _, fn in variants[shift:] + variants[:shift]:
                dist.barrier()
                t0 = time.perf_counter()
                fn()
                d.sync()
                times[label].append(time.perf_counter() - t0)
    rows = []
    for label, cap, _ in variants:
        worst = d.max_over_ranks(times[label])
        rows.append(
            {
                "model": name,
                "nproc": d.world,
                "variant": label,
                "bucket_cap_mib": None if cap is None else cap / MIB,
                "buckets": 1 if cap is None else len(bucket_layout(tensors, cap, d.world)),
                "median_ms": 1000 * statistics.median(worst),
                "min_ms": 1000 * min(worst),
                "reps": len(worst),
            }
        )
    flat = next(r for r in rows if r["variant"] == "flat")
    for r in rows:
        r["vs_flat"] = r["median_ms"] / flat["median_ms"]
    return rows


# ------------------------------------------------------------------------------ simulated interconnect
# A SIMULATION of a slower (or faster) link between replicas than this machine's loopback. Compute is real;
# every cross-replica all-reduce keeps a small real part and waits the link model's time for its bytes.
SYNC_TAIL = 4096  # elements of each simulated buffer that are all-reduced for real


class SimulatedLink:
    """Stands in a modelled link (``simlink.Link``) for the bytes of cross-replica all-reduces.

    For each buffer larger than ``SYNC_TAIL`` elements the last ``SYNC_TAIL`` elements are all-reduced for real:
    the collective still cannot finish before the slowest rank reaches it (DDP keeps its per-step lockstep, a
    converge still waits for the straggler), and the statistics block ``fused_average_`` carries at the end of
    its buffer stays exact, so the engine decides exactly as it would. The rest of the buffer is not sent:
    the call instead completes when the modelled link would have delivered the whole buffer. The link carries
    one transfer at a time (DDP's buckets queue behind each other, as on one wire) and lasts
    ``ring_allreduce_seconds(bytes, world, link)``. A transfer starts when the link is free and the slowest rank
    has the buffer ready, taken as the moment its real part completed less the modelled time of the real
    part's own bytes (they are part of the modelled transfer, so the time they took for real counts once).

    DDP's buckets are delivered by one long-lived link thread per process (``_serve``): the hook only issues
    the real part and queues the bucket, so the backward pass keeps computing while buckets are on the
    modelled wire, as it does while a real all-reduce runs (DDP's overlap is measured, not modelled). The
    thread takes buckets in the order DDP issued them, waits for each one's real part, then sleeps until the
    modelled link has delivered it, and completes DDP's future; first in, first out on one thread is exact for
    a link that carries one transfer at a time (a bucket ready while the previous one is on the wire starts
    when that one ends). HDET's converge is a blocking call and waits on the calling thread.

    Not sending the bytes (rather than sending them over loopback and waiting only the difference) is what
    lets the simulation model links faster than this machine's loopback (~16 Gb/s idle, 2 Gb/s under the
    load of the recorded run: 25 and 100 Gb/s are faster); the cost is that the CPU time gloo spends reducing
    on this machine is left out, which the validation row (model at loopback speed vs the real collective)
    measures.

    Unsent values stand in for the all-reduce's result as if all replicas held the same values: DDP's bucket
    keeps this rank's gradient (its own average), a converge's SUM buffer is multiplied by the world size
    (one in-place pass; a real reduction touches the buffer too). Speed is all this measures.

    ``clock`` and ``sleep`` are injectable so the link thread's scheduling can be tested without timing.
    """

    def __init__(
        self,
        world: int,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.world = world
        self.link: Link | None = None  # None: pass every collective through untouched
        self._clock = clock
        self._sleep = sleep
        self._free_at = 0.0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stream: Any = None  # CUDA only: the link thread's stream for waiting on the real parts
        self.transfers = 0
        self.modelled_s = 0.0

    def _finish_at(self, ready: float, nbytes: int, link: Link | None = None) -> float:
        """When a transfer of ``nbytes`` whose buffer is ready at ``ready`` ends (the link's one-at-a-time queue)."""
        link = link or self.link
        assert link is not None
        seconds = ring_allreduce_seconds(nbytes, self.world, link)
        with self._lock:
            start = max(ready, self._free_at)
            self._free_at = start + seconds
            self.transfers += 1
            self.modelled_s += seconds
            return self._free_at

    def _ready_at(self, issued: float, real_nbytes: int, link: Link) -> float:
        """When the slowest rank had the buffer ready: now (its real part just completed) less the modelled time
        of the real part's bytes, and not before this rank issued it."""
        tail_s = ring_allreduce_seconds(real_nbytes, self.world, link)
        return max(issued, self._clock() - tail_s)

    def _wait_until(self, deadline: float) -> None:
        while (delay := deadline - self._clock()) > 0:  # sleep can return early: sleep again
            self._sleep(delay)

    def _deliver(
        self,
        link: Link,
        issued: float,
        ready: Callable[[], Any],
        buffer: torch.Tensor,
        out: torch.futures.Future,
    ) -> None:
        """One bucket on the link thread: wait for its real part, then for the modelled link; complete ``out``."""
        try:
            ready()
            ready_at = self._ready_at(issued, SYNC_TAIL * buffer.element_size(), link)
            self._wait_until(self._finish_at(ready_at, _nbytes(buffer), link))
        except Exception as exc:  # surface a failed collective to DDP instead of hanging it
            out.set_exception(exc)
            return
        out.set_result(buffer)

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            self._deliver(*item)

    def _submit(self, *item: Any) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="simulated-link", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def close(self) -> None:
        """Stop the link thread (after the buckets queued before this call)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def ddp_hook(self, state: Any, bucket: dist.GradBucket) -> torch.futures.Future:
        """DDP communication hook: real all-reduce of the bucket's tail, the modelled wait for its bytes."""
        buffer = bucket.buffer()
        link = self.link
        if link is None or buffer.numel() <= SYNC_TAIL:
            buffer.div_(self.world)
            return dist.all_reduce(buffer, async_op=True).get_future().then(lambda f: f.value()[0])
        issued = self._clock()
        tail = buffer.view(-1)[-SYNC_TAIL:]
        tail.div_(self.world)
        cuda = buffer.is_cuda
        out: torch.futures.Future = torch.futures.Future(devices=[buffer.device] if cuda else None)
        work = dist.all_reduce(tail, async_op=True)
        # Nothing here waits: the link thread does (a wait here would stall the backward pass at every bucket).
        if cuda:
            # The real part is through once the GPU has produced the bucket and the all-reduce has run: the link
            # thread waits for the work on a stream of its own (gloo: blocks until reduced; NCCL: the stream
            # waits), then for an event on that stream. (Waiting on the backward's thread, as an earlier version
            # did, blocks it under gloo until the GPU has caught up: ~5 ms per step on an H200. A stand-alone copy
            # of this path ran there with gloo, 2 processes on one GPU; NCCL is untested.)
            device = buffer.device
            if self._stream is None:
                self._stream = torch.cuda.Stream(device=device)
            stream = self._stream

            def ready() -> None:
                with torch.cuda.device(device), torch.cuda.stream(stream):
                    work.wait()
                    event = torch.cuda.Event()
                    event.record(stream)
                    event.synchronize()

            self._submit(link, issued, ready, buffer, out)
        else:
            self._submit(link, issued, work.wait, buffer, out)
        return out

    @contextlib.contextmanager
    def patched_all_reduce(self):
        """Route blocking ``torch.distributed.all_reduce`` calls (HDET's converge) through the link model."""
        real = dist.all_reduce
        world = self.world

        def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):  # noqa: ANN001
            if self.link is None or async_op or tensor.numel() <= SYNC_TAIL or not tensor.is_contiguous():
                return real(tensor, op=op, group=group, async_op=async_op)
            if op != dist.ReduceOp.SUM:
                raise ValueError(f"The simulated link models SUM all-reduces only, but got op={op!r}")
            flat = tensor.view(-1)
            issued = self._clock()
            real(flat[-SYNC_TAIL:], group=group)
            if (
                flat.is_cuda
            ):  # the link starts when the GPU has produced the buffer, not when the CPU got here
                torch.cuda.synchronize(flat.device)
            ready_at = self._ready_at(issued, SYNC_TAIL * flat.element_size(), self.link)
            finish = self._finish_at(ready_at, _nbytes(flat))
            flat[:-SYNC_TAIL].mul_(world)
            self._wait_until(finish)
            return None

        dist.all_reduce = all_reduce
        try:
            yield
        finally:
            dist.all_reduce = real


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def measure_loopback(d: Dist, numel_max: int, reps: int) -> dict[str, Any]:
    """Time real all-reduces of several sizes up to ``numel_max`` float32 and fit the ring link model to them."""
    sizes = sorted({2**14, 2**18, 2**21, min(2**23, numel_max), numel_max})
    times: dict[int, list[float]] = {n: [] for n in sizes}
    buffers = {n: torch.zeros(n, device=d.device) for n in sizes}
    for n in sizes:  # warm-up
        dist.all_reduce(buffers[n])
    for rep in range(reps):
        shift = rep % len(sizes)
        for n in sizes[shift:] + sizes[:shift]:
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buffers[n])
            d.sync()
            times[n].append(time.perf_counter() - t0)
    medians = [statistics.median(d.max_over_ranks(times[n])) for n in sizes]
    link = fit_link([4 * n for n in sizes], medians, d.world)
    return {
        "bytes": [4 * n for n in sizes],
        "median_s": medians,
        "predicted_s": [ring_allreduce_seconds(4 * n, d.world, link) for n in sizes],
        "gbps": link.gbps,
        "latency_us": link.latency_us,
    }


def bench_simulated_links(d: Dist, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """Step times with the real loopback and with simulated links, interleaved; see ``SimulatedLink``."""
    t = args.reference_sync_interval
    plain = build_model(name, args.seq_len).to(d.device)
    n_params = count_params(plain)
    device_ids = [d.device.index] if d.device.type == "cuda" else None
    ddp_real = DistributedDataParallel(copy.deepcopy(plain), device_ids=device_ids)
    ddp_sim = DistributedDataParallel(copy.deepcopy(plain), device_ids=device_ids)
    sim = SimulatedLink(d.world)
    # A lambda: DDP checks the hook's annotations, which `from __future__ import annotations` turns into strings.
    ddp_sim.register_comm_hook(None, lambda state, bucket: sim.ddp_hook(state, bucket))
    opt_plain = torch.optim.AdamW(plain.parameters(), lr=args.lr)
    opt_real = torch.optim.AdamW(ddp_real.parameters(), lr=args.lr)
    opt_sim = torch.optim.AdamW(ddp_sim.parameters(), lr=args.lr)
    batch = rank_batch(MODELS[name]["vocab_size"], args.batch_size, args.seq_len, d.rank, d.device)
    lr = args.lr
    for _ in range(args.warmup_steps):
        for model, opt in ((plain, opt_plain), (ddp_real, opt_real), (ddp_sim, opt_sim)):
            _step(model, opt, batch)

    loopback = measure_loopback(d, n_params, reps=max(5, args.converge_reps // 2))
    links = [("loopback model", Link(loopback["gbps"], loopback["latency_us"]))]
    links += [(f"{g:g} Gb/s", Link(g, args.link_latency_us)) for g in args.simulate_links]
    d.log(
        f"  [{name}] loopback fit: {loopback['gbps']:.2f} Gb/s, {loopback['latency_us']:.1f} us per hop; "
        f"simulating {[label for label, _ in links]}"
    )

    def simulated(link: Link, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            sim.link = link
            try:
                with sim.patched_all_reduce():
                    fn()
            finally:
                sim.link = None

        return run

    # (mode, link label, Link or None for the real loopback, step function)
    modes: list[tuple[str, str, Link | None, Callable[[], Any]]] = [
        ("nocomm", "-", None, lambda: _step(plain, opt_plain, batch)),
        ("ddp", "real loopback", None, lambda: _step(ddp_real, opt_real, batch)),
    ]
    local_real = _new_engine(t, plain, opt_plain, "local", lr)
    shared_real = _new_engine(t, ddp_real.module, opt_real, "shared", lr)
    modes.append(
        ("local", "real loopback", None, lambda: _engine_step(local_real, plain, opt_plain, batch, lr))
    )
    modes.append(
        ("shared", "real loopback", None, lambda: _engine_step(shared_real, ddp_real, opt_real, batch, lr))
    )
    for label, link in links:
        local_e = _new_engine(t, plain, opt_plain, "local", lr)
        shared_e = _new_engine(t, ddp_sim.module, opt_sim, "shared", lr)
        modes += [
            ("ddp", label, link, simulated(link, lambda: _step(ddp_sim, opt_sim, batch))),
            (
                "local",
                label,
                link,
                simulated(link, lambda e=local_e: _engine_step(e, plain, opt_plain, batch, lr)),
            ),
            (
                "shared",
                label,
                link,
                simulated(link, lambda e=shared_e: _engine_step(e, ddp_sim, opt_sim, batch, lr)),
            ),
        ]

    def window_steps(mode: str) -> int:
        return args.window if mode in ("nocomm", "ddp") else math.ceil(args.window / t) * t

    record: dict[tuple[str, str], dict[str, list]] = {
        (m, lab): {"totals": [], "steps": [], "cpu": [], "times": [], "transfers": [], "modelled_s": []}
        for m, lab, _, _ in modes
    }
    started = time.perf_counter()
    for r in range(args.rounds):
        shift = (r * 5) % len(modes)  # rotate by more than one mode per round: neighbours change too
        order = modes[shift:] + modes[:shift]
        for mode, label, _, fn in order:
            n = window_steps(mode)
            transfers, modelled = sim.transfers, sim.modelled_s
            total, times, cpu = time_window(d, fn, n)
            rec = record[(mode, label)]
            rec["transfers"].append(sim.transfers - transfers)
            rec["modelled_s"].append(sim.modelled_s - modelled)
            rec["times"].extend(times)
            rec["totals"].append(total)
            rec["steps"].append(n)
            rec["cpu"].append(cpu)
        d.log(
            f"  [{name}, simulated links] round {r + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)"
        )
    sim.close()

    grad_bytes = 4 * n_params
    rows = []
    for mode, label, link, _ in modes:
        rec = record[(mode, label)]
        sync_t = None if mode in ("nocomm", "ddp") else t
        row: dict[str, Any] = {
            "model": name,
            "params": n_params,
            "nproc": d.world,
            "mode": mode,
            "sync_interval": sync_t,
            "link": label,
            "simulated": link is not None,
            "gbps": None if link is None else link.gbps,
            "latency_us": None if link is None else link.latency_us,
            "steps": sum(rec["steps"]),
            "mean_ms": 1000 * sum(rec["totals"]) / sum(rec["steps"]),
            "window_mean_ms": [1000 * tot / n for tot, n in zip(rec["totals"], rec["steps"])],
            "cpu_share": sum(rec["cpu"]) / sum(rec["totals"]),
            "robust_ms": 1000 * robust_step_seconds(rec["times"], sync_t),
            # Simulated transfers on this rank and their modelled seconds, per step (0 when nothing is simulated).
            "transfers_per_step": sum(rec["transfers"]) / sum(rec["steps"]),
            "modelled_ms_per_step": 1000 * sum(rec["modelled_s"]) / sum(rec["steps"]),
        }
        if link is not None:
            row["modelled_allreduce_ms"] = 1000 * ring_allreduce_seconds(grad_bytes, d.world, link)
        rows.append(row)
    return {
        "model": name,
        "params": n_params,
        "nproc": d.world,
        "sync_interval": t,
        "grad_bytes": grad_bytes,
        "loopback": loopback,
        "link_latency_us": args.link_latency_us,
        "rows": rows,
        "loadavg": loadavg(),
    }


def robust_step_seconds(times: Sequence[float], sync_interval: int | None) -> float:
    """A load-robust twin of the window mean: the median step, plus for HDET the converge step's excess / T.

    (The same estimate as ``add_robust_amortized``: medians ignore bursts of other work on a shared machine.)
    """
    if sync_interval is None or sync_interval == 1:
        return statistics.median(times)
    conv = [x for i, x in enumerate(times) if (i + 1) % sync_interval == 0]
    other = [x for i, x in enumerate(times) if (i + 1) % sync_interval != 0]
    med_other = statistics.median(other)
    return med_other + (statistics.median(conv) - med_other) / sync_interval


def reference_compute(path: str | None, model: str, nproc: int) -> tuple[str, float] | None:
    """(label, seconds): the no-comm mean step of ``model`` at ``nproc`` in another run's results.json."""
    if not path:
        return None
    try:
        other = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(
            f"--sim_reference_compute: cannot read {path} ({exc}); pass a benchmark results.json"
        ) from None
    for row in other.get("steps", []):
        if (row["model"], row["nproc"], row["mode"]) == (model, nproc, "nocomm"):
            return f"{path}, {str(other.get('date', '?'))[:10]}", row["mean_ms"] / 1000
    raise SystemExit(f"--sim_reference_compute: {path} has no no-comm row for {model} at {nproc} processes")


def analyse_simulation(
    sim: dict[str, Any],
    scale_params: int,
    hsdp_groups: Sequence[int],
    reference: tuple[str, float] | None = None,
) -> dict[str, Any]:
    """Ratios, validation and break-even bandwidths from one model's simulated-link rows (pure arithmetic).

    - validation: each mode with the link model set to the loopback fit vs the same mode measured for real.
    - ratios: DDP / HDET-local and shared / HDET-local at each simulated link, as measured; next to them the
      prediction of ``simlink.step_times`` from the measured no-comm step and the DDP overlap fitted from
      the measured rows.
    - scaled: the same prediction for a ``scale_params`` model: its gradient bytes (fp32) modelled, its compute
      = the measured no-comm step x ``scale_params / params`` (compute ~ parameters at a fixed token count per
      step), the fitted overlap scaled the same way. HSDP rows: ``G`` replica groups, each sending its whole
      replica across groups (the cross-group traffic only; traffic inside a group is the same in every mode).
    """
    rows = sim["rows"]
    world, t, grad_bytes = sim["nproc"], sim["sync_interval"], sim["grad_bytes"]

    def row(mode: str, link: str) -> dict[str, Any]:
        return next(r for r in rows if (r["mode"], r["link"]) == (mode, link))

    nocomm = row("nocomm", "-")["mean_ms"] / 1000
    validation = []
    for mode in ("ddp", "local", "shared"):
        real, model = row(mode, "real loopback"), row(mode, "loopback model")
        validation.append(
            {
                "mode": mode,
                "measured_ms": real["mean_ms"],
                "simulated_ms": model["mean_ms"],
                "simulated_vs_measured": model["mean_ms"] / real["mean_ms"],
                "robust_simulated_vs_measured": model["robust_ms"] / real["robust_ms"],
                "measured_over_nocomm_ms": real["mean_ms"] - 1000 * nocomm,
                "simulated_over_nocomm_ms": model["mean_ms"] - 1000 * nocomm,
                "within_10pct": "yes" if abs(model["mean_ms"] / real["mean_ms"] - 1) <= 0.10 else "no",
            }
        )
    sim_links = [r["link"] for r in rows if r["mode"] == "ddp" and r["simulated"]]
    link_of = {r["link"]: Link(r["gbps"], r["latency_us"]) for r in rows if r["simulated"]}
    exposed = [max(0.0, row("ddp", lab)["mean_ms"] / 1000 - nocomm) for lab in sim_links]
    comm = [ring_allreduce_seconds(grad_bytes, world, link_of[lab]) for lab in sim_links]
    overlap = fit_overlap(nocomm, exposed, comm)
    ratios = []
    for lab in sim_links:
        ddp, local, shared = (row(m, lab)["mean_ms"] for m in ("ddp", "local", "shared"))
        p_ddp, p_local = step_times(nocomm, grad_bytes, world, link_of[lab], t, overlap_s=overlap)
        ratios.append(
            {
                "link": lab,
                "gbps": link_of[lab].gbps,
                "modelled_allreduce_ms": 1000 * ring_allreduce_seconds(grad_bytes, world, link_of[lab]),
                "ddp_ms": ddp,
                "local_ms": local,
                "shared_ms": shared,
                "ddp_vs_local": ddp / local,
                "robust_ddp_vs_local": row("ddp", lab)["robust_ms"] / row("local", lab)["robust_ms"],
                "shared_vs_local": shared / local,
                "predicted_ddp_vs_local": p_ddp / p_local,
            }
        )
    latency = sim["link_latency_us"]
    gbps_points = [
        r["gbps"] for r in rows if r["mode"] == "ddp" and r["simulated"] and r["link"] != "loopback model"
    ]

    def scenario(
        label: str, nbytes: float, groups: int, compute_s: float, overlap_s: float
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": label,
            "replicas": groups,
            "bytes": nbytes,
            "compute_s": compute_s,
            "overlap_s": overlap_s,
            "sync_interval": t,
        }
        for g in gbps_points:
            ddp, local = step_times(compute_s, nbytes, groups, Link(g, latency), t, overlap_s=overlap_s)
            out[f"ratio_{g:g}"] = ddp / local
            out[f"ratio_{g:g}_no_overlap"] = (lambda a, b: a / b)(
                *step_times(compute_s, nbytes, groups, Link(g, latency), t)
            )
        for target in (2.0, 1.1):
            out[f"break_even_{target:g}x_gbps"] = break_even_bandwidth(
                target, compute_s, nbytes, groups, t, latency_us=latency, overlap_s=overlap_s
            )
        return out

    scale = scale_params / sim["params"]
    scenarios = [
        scenario(
            f"{sim['model']} ({sim['params'] / 1e6:.1f}M), {world} replicas",
            grad_bytes,
            world,
            nocomm,
            overlap,
        ),
        scenario(
            f"{scale_params / 1e9:g}B params, {world} replicas (scaled compute)",
            4 * scale_params,
            world,
            nocomm * scale,
            overlap * scale,
        ),
    ]
    for groups in hsdp_groups:
        scenarios.append(
            scenario(
                f"{scale_params / 1e9:g}B params, HSDP {groups} replica groups (cross-group bytes)",
                4 * scale_params,
                groups,
                nocomm * scale,
                overlap * scale,
            )
        )
    if reference is not None:
        # The same scenarios with the compute of another run (an idle machine): comm does not slow with load.
        where, ref_s = reference
        ref_overlap = overlap * ref_s / nocomm
        scenarios.append(
            scenario(
                f"{sim['model']}, {world} replicas, compute from {where}",
                grad_bytes,
                world,
                ref_s,
                ref_overlap,
            )
        )
        scenarios.append(
            scenario(
                f"{scale_params / 1e9:g}B params, {world} replicas, compute from {where} (scaled)",
                4 * scale_params,
                world,
                ref_s * scale,
                ref_overlap * scale,
            )
        )
        for groups in hsdp_groups:
            scenarios.append(
                scenario(
                    f"{scale_params / 1e9:g}B params, HSDP {groups} groups, compute from {where} (scaled)",
                    4 * scale_params,
                    groups,
                    ref_s * scale,
                    ref_overlap * scale,
                )
            )
    regime = [
        {
            "model": label,
            "gbps": g,
            "bytes": nbytes,
            "replicas": world,
            "modelled_allreduce_s": ring_allreduce_seconds(nbytes, world, Link(g, latency)),
            "max_compute_for_2x_s": max_compute_for_ratio(2.0, nbytes, world, Link(g, latency), t),
        }
        for label, nbytes in (
            (f"{sim['model']} ({sim['params'] / 1e6:.1f}M)", grad_bytes),
            (f"{scale_params / 1e9:g}B", 4 * scale_params),
        )
        for g in gbps_points
    ]
    return {
        "model": sim["model"],
        "nproc": world,
        "nocomm_ms": 1000 * nocomm,
        "overlap_ms": 1000 * overlap,
        "validation": validation,
        "ratios": ratios,
        "scenarios": scenarios,
        "regime": regime,
    }


# ---------------------------------------------------------------------------------------------- memory
class Memory:
    """Current and peak bytes: resident set on CPU (VmHWM reset via clear_refs), the caching allocator on CUDA."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.libc = None
        self.method = "torch.cuda.max_memory_allocated" if device.type == "cuda" else "VmHWM - VmRSS"
        if device.type == "cpu":
            with contextlib.suppress(OSError):
                self.libc = ctypes.CDLL("libc.so.6")
                # M_MMAP_THRESHOLD (-3): allocations above 64 KiB get their own mapping and leave the resident
                # set when freed, so RSS follows live tensors (glibc otherwise keeps freed heap resident).
                self.libc.mallopt(-3, 64 * 1024)
            self.method += " (mmap threshold 64 KiB)" if self.libc is not None else " (glibc not found)"

    @property
    def available(self) -> bool:
        if self.device.type == "cuda":
            return True
        try:
            self.reset_peak()
            return True
        except OSError:
            return False

    def clean(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        elif self.libc is not None:
            self.libc.malloc_trim(0)

    def current(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device)
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def reset_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")

    def peak(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        with open("/proc/self/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+)\s+kB", f.read()).group(1)) * 1024


def bench_memory(
    d: Dist, args: argparse.Namespace, name: str, mem: Memory
) -> dict[str, list[dict[str, Any]]]:
    steps = 3  # the HDET modes converge on the last of these (sync_interval=steps)
    batch = rank_batch(MODELS[name]["vocab_size"], args.batch_size, args.seq_len, d.rank, d.device)
    device_ids = [d.device.index] if d.device.type == "cuda" else None
    mode_rows = []
    for mode in ("nocomm", "ddp", "local", "shared"):
        mem.clean()
        dist.barrier()
        before = mem.current()
        mem.reset_peak()
        model = build_model(name, args.seq_len).to(d.device)
        inner = model
        if mode in ("ddp", "shared"):
            model = DistributedDataParallel(model, device_ids=device_ids)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        engine = _new_engine(steps, inner, optimizer, mode, args.lr) if mode in ("local", "shared") else None
        for _ in range(steps):
            if engine is None:
                _step(model, optimizer, batch)
            else:
                _engine_step(engine, model, optimizer, batch, args.lr)
        d.sync()
        peak = d.max_over_ranks([mem.peak() - before])[0]
        mode_rows.append({"model": name, "nproc": d.world, "mode": mode, "peak_mib": peak / MIB})
        del model, inner, optimizer, engine
    ddp = next(r for r in mode_rows if r["mode"] == "ddp")
    for r in mode_rows:
        r["vs_ddp"] = r["peak_mib"] / ddp["peak_mib"]
    for r in mode_rows:
        if r["mode"] == "local":
            r["sync_interval"] = steps

    # The converge alone: what fused_average_ allocates on top of a trained model, per bucket cap.
    model = build_model(name, args.seq_len).to(d.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    _step(model, optimizer, batch)
    tensors = [p.data for p in model.parameters()]
    row = torch.tensor([2.5, 1.0], dtype=torch.float64)
    conv_rows = []
    for cap in converge_caps(4 * sum(t.numel() for t in tensors)):
        layout = bucket_layout(tensors, cap, d.world)
        measured = []
        for _ in range(3):
            mem.clean()
            dist.barrier()
            before = mem.current()
            mem.reset_peak()
            with torch.no_grad():
                fused_average_(tensors, row, d.rank, d.world, bucket_cap_bytes=cap)
            d.sync()
            measured.append(mem.peak() - before)
        extra = d.max_over_ranks([min(measured)])[0]
        # The buffer of bucket i is still referenced while bucket i+1's is allocated, so two are live at once.
        pairs = [a + b for a, b in zip(layout, layout[1:])] or layout
        conv_rows.append(
            {
                "model": name,
                "nproc": d.world,
                "bucket_cap_mib": cap / MIB,
                "buckets": len(layout),
                "model_mib": 4 * sum(t.numel() for t in tensors) / MIB,
                "measured_extra_mib": extra / MIB,
                "predicted_extra_mib": max(pairs) / MIB,
                "one_bucket_live_mib": max(layout) / MIB,
            }
        )
    del model, optimizer, tensors
    mem.clean()
    return {"memory": mode_rows, "converge_memory": conv_rows}


# ---------------------------------------------------------------------------------------------- worker
def _library_version() -> str:
    """The hdet_hf commit this run imported, with "+changes" if its working tree differed (read-only git)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "hdet_hf"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("+changes" if dirty else "")


def run_worker(args: argparse.Namespace) -> None:
    d = Dist(args)
    part: dict[str, Any] = {
        "nproc": d.world,
        "threads_per_proc": d.threads,
        "usable_cores_per_node": usable_cores(),
        "oversubscribed": d.device.type == "cpu" and d.local_world * d.threads > usable_cores(),
        "device": str(d.device.type),
        "backend": args.backend,
        "date": _now(),
        "library": _library_version(),
        "settings": run_settings(args),
        "loadavg_start": loadavg(),
        "steps": [],
        "converge": [],
        "memory": [],
        "converge_memory": [],
        "simulation": [],
    }
    started = time.perf_counter()
    d.log(
        f"[{d.world} processes x {d.threads} thread(s), {usable_cores()} usable cores"
        f"{', OVERSUBSCRIBED' if part['oversubscribed'] else ''}; {args.backend} on {d.device.type}]"
    )
    for name in args.models if not args.sim_only else []:
        d.log(f"step timing: {name}")
        rows, state = bench_steps(d, args, name)
        part["steps"] += rows
        d.log(f"converge alone: {name}")
        part["converge"] += bench_converge(d, args, name, state["plain"], state["optimizer"])
        del state
        gc.collect()
    for name in args.models if args.simulate_links else []:
        d.log(f"simulated links (a simulation; compute is real): {name}")
        part["simulation"].append(bench_simulated_links(d, args, name))
    if not args.skip_memory and not args.sim_only:
        mem = Memory(d.device)
        if mem.available:
            part["memory_method"] = mem.method
            for name in args.models:
                d.log(f"memory: {name}")
                found = bench_memory(d, args, name, mem)
                part["memory"] += found["memory"]
                part["converge_memory"] += found["converge_memory"]
        else:
            d.log("memory: /proc/self/clear_refs is not writable here; skipped")
    part["seconds"] = time.perf_counter() - started
    part["loadavg_end"] = loadavg()
    if d.rank == 0:
        if args.part_file:
            Path(args.part_file).write_text(json.dumps(part))
        else:
            part["command"] = f"torchrun --nproc_per_node {d.local_world} ... {_command_line()}"
            write_outputs(merge_previous(args, [part], seconds=part["seconds"]), Path(args.output_dir))
    finish_distributed()


# -------------------------------------------------------------------------------------------- launcher
def _command_line() -> str:
    return " ".join(["python", os.path.relpath(__file__, Path.cwd()), *sys.argv[1:]])


def under_torchrun() -> bool:
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def launch(args: argparse.Namespace, argv: Sequence[str]) -> None:
    started = time.perf_counter()
    parts = []
    with tempfile.TemporaryDirectory(prefix="hdet_speed_") as tmp:
        for nproc in args.nprocs:
            part_file = Path(tmp) / f"part_{nproc}.json"
            threads = args.threads_per_proc or max(1, usable_cores() // nproc)
            env = dict(os.environ)
            env.update(
                {
                    "OMP_NUM_THREADS": str(threads),
                    "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONUNBUFFERED": "1",
                    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
                }
            )
            cmd = torchrun_command(Path(__file__).resolve(), nproc, [*argv, "--part_file", str(part_file)])
            print(f"== {nproc} processes: {' '.join(cmd[1:5])} ...", flush=True)
            proc = subprocess.run(cmd, env=env)
            if proc.returncode != 0 or not part_file.exists():
                raise SystemExit(
                    f"The {nproc}-process run failed (exit code {proc.returncode}); see its output above. "
                    "Runs that finished before it are already in --output_dir."
                )
            part = json.loads(part_file.read_text())
            part["command"] = _command_line()
            parts.append(part)
            # After every process count, so a later failure or interruption keeps the finished runs.
            results = merge_previous(args, parts, seconds=time.perf_counter() - started)
            write_outputs(results, Path(args.output_dir), quiet=nproc != args.nprocs[-1])


def merge_previous(args: argparse.Namespace, parts: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """``assemble`` this invocation's runs, after the kept runs of an earlier results.json with ``--append``."""
    previous: list[dict[str, Any]] = []
    path = Path(args.output_dir) / "results.json"
    if args.append and path.exists():
        old = json.loads(path.read_text())
        mine = json.loads(json.dumps(comparable_settings(args)))
        theirs = {k: old["settings"].get(k) for k in mine}
        if mine != theirs:
            raise SystemExit(
                f"--append: {path} was measured with other settings ({theirs}) than this run ({mine}); "
                "use another --output_dir or the same flags."
            )
        done = {p["nproc"] for p in parts}
        previous = [p for p in old["runs"] if p["nproc"] not in done]
        seconds += sum(p["seconds"] for p in previous)
    return assemble(args, previous + parts, seconds=seconds, command=_command_line())


# --------------------------------------------------------------------------------------------- results
def comparable_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What must match for runs to share one table."""
    return {
        "models": {name: dict(MODELS[name]) for name in args.models},
        "sync_intervals": args.sync_intervals,
        "reference_sync_interval": args.reference_sync_interval,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "device": args.device,
        "backend": args.backend,
    }


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """How long one run measured (may differ between appended runs; each run records its own)."""
    return {
        "quick": args.quick,
        "window": args.window,
        "rounds": args.rounds,
        "warmup_steps": args.warmup_steps,
        "converge_reps": args.converge_reps,
        "simulate_links_gbps": args.simulate_links,
        "link_latency_us": args.link_latency_us,
        "sim_only": args.sim_only,
    }


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def assemble(
    args: argparse.Namespace, parts: list[dict[str, Any]], seconds: float, command: str
) -> dict[str, Any]:
    results = {
        "format": "hdet_speed_benchmark",
        "version": 1,
        "date": _now(),
        "command": command,
        "wall_seconds": seconds,
        "machine": machine_record(),
        "settings": {
            **comparable_settings(args),
            **run_settings(args),
            "optimizer": "AdamW (torch defaults)",
            "ddp": "DistributedDataParallel defaults (bucket_cap_mb=25, gradient_as_bucket_view=False)",
            "hdet": "HDETConfig(lr_spread=0.5, explore_until=1.0) defaults otherwise (bucket_size_mb=256: one bucket for these models)",
        },
        "runs": parts,
        "steps": [r for p in parts for r in p["steps"]],
        "converge": [r for p in parts for r in p["converge"]],
        "memory": [r for p in parts for r in p["memory"]],
        "converge_memory": [r for p in parts for r in p["converge_memory"]],
        "simulation": [
            {
                **analyse_simulation(
                    sim,
                    args.scale_params,
                    args.hsdp_groups,
                    reference_compute(args.sim_reference_compute, sim["model"], sim["nproc"]),
                ),
                "raw": sim,
            }
            for p in parts
            for sim in p.get("simulation", [])
        ],
    }
    add_robust_amortized(results["steps"])
    results["targets"] = evaluate_targets(results)
    return results


def add_robust_amortized(rows: list[dict[str, Any]]) -> None:
    """Add ``amortized_median_ms``: a load-robust twin of the window mean.

    For DDP/no-comm it is the median step; for HDET the median ordinary step plus the converge step's excess
    over it divided by T. Medians shrug off the bursts other work on a shared machine causes; window means
    (the headline) do not, but they are what a run of that length costs.
    """
    for row in rows:
        t, conv, other = (
            row["sync_interval"],
            row.get("median_converge_step_ms"),
            row.get("median_other_step_ms"),
        )
        if t is None or conv is None or other is None:
            row["amortized_median_ms"] = row["median_ms"]
        else:
            row["amortized_median_ms"] = other + (conv - other) / t
    for row in rows:
        base = next(
            r for r in rows if (r["model"], r["nproc"], r["mode"]) == (row["model"], row["nproc"], "nocomm")
        )
        row["amortized_median_vs_nocomm"] = row["amortized_median_ms"] / base["amortized_median_ms"]


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, per (model, processes): measured ratio, threshold, met or missed by how much.

    ``value`` is the headline (window means; medians for the converge), ``robust`` a second estimate that is
    less sensitive to other work on the machine (amortized medians; minimum converge times).
    """
    ref = results["settings"]["reference_sync_interval"]
    out = []
    configs = sorted({(r["model"], r["nproc"]) for r in results["steps"]}, key=lambda c: (c[1], c[0]))
    largest = max(results["steps"], key=lambda r: r["params"])["model"] if results["steps"] else None
    for model, nproc in configs:
        steps = {
            (r["mode"], r["sync_interval"]): r
            for r in results["steps"]
            if (r["model"], r["nproc"]) == (model, nproc)
        }
        local, nocomm, ddp = steps.get(("local", ref)), steps[("nocomm", None)], steps[("ddp", None)]
        if local is not None:
            out.append(
                _target(
                    (model, nproc),
                    f"HDET local (T={ref}) / no-comm step",
                    (
                        local["mean_ms"] / nocomm["mean_ms"],
                        local["amortized_median_ms"] / nocomm["median_ms"],
                    ),
                    ("<=", TARGETS["local_vs_nocomm_max"]),
                    applies=True,
                )
            )
            out.append(
                _target(
                    (model, nproc),
                    f"DDP / HDET local (T={ref}) step",
                    (ddp["mean_ms"] / local["mean_ms"], ddp["median_ms"] / local["amortized_median_ms"]),
                    (">=", TARGETS["ddp_vs_local_min"]),
                    applies=model == largest and nproc == 2,
                )
            )
        conv = {r["variant"]: r for r in results["converge"] if (r["model"], r["nproc"]) == (model, nproc)}
        if conv:
            fused, flat, loop = conv["fused"], conv["flat"], conv["per_tensor"]
            out.append(
                _target(
                    (model, nproc),
                    "fused converge / flat all-reduce",
                    (fused["median_ms"] / flat["median_ms"], fused["min_ms"] / flat["min_ms"]),
                    ("<=", TARGETS["fused_vs_flat_max"]),
                    applies=True,
                )
            )
            out.append(
                _target(
                    (model, nproc),
                    "per-tensor loop / fused converge",
                    (loop["median_ms"] / fused["median_ms"], loop["min_ms"] / fused["min_ms"]),
                    (">=", TARGETS["per_tensor_vs_fused_min"]),
                    applies=True,
                )
            )
    return out


def _target(
    config: tuple[str, int], what: str, values: tuple[float, float], bound: tuple[str, float], applies: bool
) -> dict[str, Any]:
    (value, robust), (op, threshold) = values, bound

    def ok(x: float) -> bool:
        return x <= threshold if op == "<=" else x >= threshold

    if ok(value):
        verdict = "met"
    elif op == "<=":
        verdict = f"missed by {100 * (value / threshold - 1):.1f}%"
    else:
        verdict = (
            f"missed: {value:.2f}x of the {threshold:g}x asked ({100 * (1 - value / threshold):.0f}% short)"
        )
    if ok(value) != ok(robust):
        verdict += f"; the robust estimate says {'met' if ok(robust) else 'missed'}"
    if not applies:
        verdict += " (info: the target is set for the >= 20M model at 2 processes)"
    return {
        "model": config[0],
        "nproc": config[1],
        "target": what,
        "value": value,
        "robust": robust,
        "op": op,
        "threshold": threshold,
        "met": ok(value),
        "robust_met": ok(robust),
        "verdict": verdict,
        "applies": applies,
    }


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _fmt_load(load: list[float] | None) -> str:
    return "-" if load is None else "/".join(f"{x:.1f}" for x in load)


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str, int]]) -> str:
    head = "| " + " | ".join(title for _, title, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(key), digits) for key, _, digits in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def render_markdown(results: dict[str, Any]) -> str:
    m, s = results["machine"], results["settings"]
    oversub = [p["nproc"] for p in results["runs"] if p.get("oversubscribed")]
    lines = [
        "# HDET speed benchmark",
        "",
        f"- date: {results['date']}; wall time {results['wall_seconds'] / 60:.1f} min"
        + (
            f"; tables rebuilt from the recorded raw runs on {results['rerendered']['date']} with "
            f"`{results['rerendered']['command']}`"
            if results.get("rerendered")
            else ""
        ),
        f"- machine: {m['usable_cores']} usable cores ({m['cpu']}), {m['ram_gib']} GiB RAM, Python {m['python']}, "
        f"torch {m['torch']}, transformers {m['transformers']}",
        f"- batch {s['batch_size']} x {s['seq_len']} tokens per rank, AdamW, {s['device']}/{s['backend']}; "
        f"HDET T = {', '.join(map(str, s['sync_intervals']))} (targets and shared mode at T = "
        f"{s['reference_sync_interval']})",
    ]
    for p in results["runs"]:
        rs = p.get("settings", s)
        lines.append(
            f"- {p['nproc']} processes x {p['threads_per_proc']} thread(s) on {p['usable_cores_per_node']} cores"
            f"{' (oversubscribed)' if p.get('oversubscribed') else ''}: started {p.get('date', '-')}, "
            f"{p['seconds'] / 60:.1f} min, hdet_hf {p.get('library', '-')}, {rs['rounds']} interleaved rounds, window {rs['window']} steps "
            f"(HDET: a multiple of T), {rs['converge_reps']} converge repetitions; load average (1/5/15 min) at "
            f"start {_fmt_load(p['loadavg_start'])}, at end {_fmt_load(p['loadavg_end'])}; "
            f"command `{p.get('command', results['command'])}`"
        )
    if oversub:
        lines.append(
            f"- {', '.join(map(str, oversub))} processes oversubscribe the cores: steps are slower and "
            "communication competes with compute for the same cores."
        )
    if results["steps"]:
        lines += render_standard_tables(results)
    if results["memory"]:
        method = next((p.get("memory_method") for p in results["runs"] if p.get("memory_method")), "")
        lines += [
            "",
            "## Peak memory",
            "",
            f"Per process, above the state before the model is built ({method}); 3 training steps, the HDET "
            "modes converge on the last one.",
            "",
            _table(
                results["memory"],
                [
                    ("model", "model", 0),
                    ("nproc", "procs", 0),
                    ("mode", "mode", 0),
                    ("peak_mib", "peak MiB", 1),
                    ("vs_ddp", "vs DDP", 2),
                ],
            ),
            "",
            "Extra bytes one `fused_average_` allocates, by bucket cap (predicted: two consecutive bucket buffers "
            "alive at once, as the current loop keeps the previous buffer referenced while allocating the next).",
            "",
            _table(
                results["converge_memory"],
                [
                    ("model", "model", 0),
                    ("nproc", "procs", 0),
                    ("model_mib", "params MiB", 1),
                    ("bucket_cap_mib", "bucket cap MiB", 2),
                    ("buckets", "buckets", 0),
                    ("measured_extra_mib", "measured extra MiB", 2),
                    ("predicted_extra_mib", "predicted MiB", 2),
                    ("one_bucket_live_mib", "largest bucket MiB", 2),
                ],
            ),
        ]
    if results["targets"]:
        lines += [
            "",
            "## Targets",
            "",
            "measured: window means for steps, medians for the converge. robust estimate: amortized medians for "
            "steps (median ordinary step + the converge step's excess / T), minimum times for the converge; both "
            "resist bursts of other work on a shared machine.",
            "",
            _table(
                results["targets"],
                [
                    ("model", "model", 0),
                    ("nproc", "procs", 0),
                    ("target", "ratio", 0),
                    ("value", "measured", 3),
                    ("robust", "robust estimate", 3),
                    ("op", "", 0),
                    ("threshold", "target", 2),
                    ("verdict", "verdict", 0),
                ],
            ),
            "",
        ]
    if results.get("simulation"):
        lines += render_simulation(results)
    return "\n".join(lines)


def render_standard_tables(results: dict[str, Any]) -> list[str]:
    """The optimizer-step and converge-alone tables."""
    lines: list[str] = []
    lines += [
        "",
        "## Optimizer-step time",
        "",
        "mean = window time / steps (HDET: includes the converge, amortized over T); median of per-step times; "
        "each step's time is the slowest rank's. CPU s / s per proc: CPU time the benchmark's processes got per "
        "second of wall time (all threads); about threads-per-process when the machine is otherwise idle, lower "
        "when other work takes the cores. robust amortized: median ordinary step + (median converge step - "
        "median ordinary step) / T, over the no-comm median.",
        "",
        _table(
            results["steps"],
            [
                ("model", "model", 0),
                ("params", "params", 0),
                ("nproc", "procs", 0),
                ("mode", "mode", 0),
                ("sync_interval", "T", 0),
                ("steps", "steps", 0),
                ("mean_ms", "mean ms/step", 1),
                ("median_ms", "median ms/step", 1),
                ("mean_vs_nocomm", "mean vs no-comm", 3),
                ("median_vs_nocomm", "median vs no-comm", 3),
                ("median_converge_step_ms", "median converge step ms", 1),
                ("amortized_median_vs_nocomm", "robust amortized vs no-comm", 3),
                ("cpu_share", "CPU s / s per proc", 2),
            ],
        ),
        "",
        "## Converge alone",
        "",
        "fresh_buffer_touch: allocate a parameter-sized buffer and write it once (no communication); "
        "allreduce_only: one all-reduce of a ready flat buffer; flat: cat + divide + all-reduce + copy back; "
        "fused: `fused_average_` (parameters + loss/LR row); fused_cap_1/k: the same with a bucket cap of 1/k of "
        "the model; fused_reused_buffer: `fused_average_` into a buffer kept between calls (`collectives.Workspace`, what the engine's converge does on CPU); "
        "per_tensor: the reference loop + 2 all-gathers; engine_converge: `HDETEngine` converge (health check + "
        "fused + bookkeeping). Each repetition's time is the slowest rank's.",
        "",
        _table(
            results["converge"],
            [
                ("model", "model", 0),
                ("nproc", "procs", 0),
                ("variant", "variant", 0),
                ("bucket_cap_mib", "bucket cap MiB", 2),
                ("buckets", "buckets", 0),
                ("median_ms", "median ms", 2),
                ("min_ms", "min ms", 2),
                ("vs_flat", "vs flat", 2),
            ],
        ),
    ]
    return lines


def render_simulation(results: dict[str, Any]) -> list[str]:
    """The simulated-interconnect tables: validation, measured ratios, scaled scenarios, regime."""
    lines = [
        "",
        "## Simulated interconnect (SIMULATION: compute measured, links between replicas modelled)",
        "",
        "Every cross-replica all-reduce of a step (DDP's gradient buckets through a DDP communication hook, "
        "HDET's converge through `torch.distributed.all_reduce`) all-reduces only its last "
        f"{SYNC_TAIL} elements for real (the ranks stay in lockstep, the converge's statistics stay exact) and "
        "completes when a ring all-reduce of all its bytes (the real part's included) would have on the modelled "
        "link: `2 (N-1) latency + 2 (N-1)/N bytes / bandwidth`, one transfer at a time (`scripts/simlink.py`; "
        "DDP's buckets wait on one link thread while the backward pass computes). "
        "The forward, backward and optimizer step are computed for real, interleaved with the measured modes. "
        "Links are in Gb/s (10^9 bit/s); *loopback model* is the link fitted to this machine's real loopback "
        "all-reduces.",
    ]
    for sim in results["simulation"]:
        raw = sim["raw"]
        lb = raw["loopback"]
        lines += [
            "",
            f"### {sim['model']} ({raw['params']:,} parameters, {raw['grad_bytes'] / MIB:.1f} MiB fp32), "
            f"{sim['nproc']} processes, HDET T = {raw['sync_interval']} (simulation)",
            "",
            f"Loopback fit: {lb['gbps']:.2f} Gb/s, {lb['latency_us']:.1f} us per hop, from real all-reduces of "
            + ", ".join(
                f"{b / MIB:.2f} MiB: {1000 * m:.2f} ms (model {1000 * p:.2f})"
                for b, m, p in zip(lb["bytes"], lb["median_s"], lb["predicted_s"])
            )
            + f". Simulated links: {raw['link_latency_us']:g} us per hop. Load average at the end: "
            f"{_fmt_load(raw.get('loadavg'))}.",
            "",
            "**Validation (simulation at loopback speed vs measured, side by side):**",
            "",
            _table(
                sim["validation"],
                [
                    ("mode", "mode", 0),
                    ("measured_ms", "measured ms/step", 1),
                    ("simulated_ms", "simulated ms/step (loopback model)", 1),
                    ("simulated_vs_measured", "simulated / measured", 3),
                    ("robust_simulated_vs_measured", "robust: simulated / measured", 3),
                    ("measured_over_nocomm_ms", "measured - no-comm ms", 1),
                    ("simulated_over_nocomm_ms", "simulated - no-comm ms", 1),
                    ("within_10pct", "within 10 %", 0),
                ],
            ),
            "",
            f"**Measured step times with simulated links** (no-comm step {sim['nocomm_ms']:.1f} ms; predicted: "
            f"`simlink.step_times` from the no-comm step and a DDP overlap of {sim['overlap_ms']:.1f} ms fitted "
            "to these rows):",
            "",
            _table(
                [r for r in sim["ratios"]],
                [
                    ("link", "link (simulated)", 0),
                    ("modelled_allreduce_ms", "modelled gradient all-reduce ms", 1),
                    ("ddp_ms", "DDP ms/step", 1),
                    ("local_ms", "HDET local ms/step", 1),
                    ("shared_ms", "HDET shared ms/step", 1),
                    ("ddp_vs_local", "DDP / HDET local", 3),
                    ("robust_ddp_vs_local", "robust DDP / local", 3),
                    ("shared_vs_local", "shared / local", 3),
                    ("predicted_ddp_vs_local", "predicted DDP / local", 3),
                ],
            ),
            "",
            "**Scenarios (simulation, modelled):** DDP / HDET-local step-time ratio per link speed (with the "
            "fitted overlap; in brackets with none), and the break-even bandwidth: the link speed below which "
            "HDET local is at least 2x (1.1x) faster than DDP. Compute of the scaled rows: the measured no-comm "
            "step x (scaled parameters / measured parameters); overlap scaled the same way; fp32 bytes. HSDP "
            "rows: only the cross-group traffic (each replica group sends its whole replica's bytes; traffic "
            "inside a group is the same for DDP-style HSDP and HDET local and is not modelled).",
            "",
        ]
        speeds = [r["gbps"] for r in sim["ratios"] if r["link"] != "loopback model"]
        scen_rows = []
        for sc in sim["scenarios"]:
            row = {
                "scenario": sc["scenario"],
                "gib": sc["bytes"] / 2**30,
                "compute": sc["compute_s"],
                **{
                    f"r{g:g}": f"{sc[f'ratio_{g:g}']:.2f} ({sc[f'ratio_{g:g}_no_overlap']:.2f})"
                    for g in speeds
                },
                "be2": _fmt_gbps(sc["break_even_2x_gbps"]),
                "be11": _fmt_gbps(sc["break_even_1.1x_gbps"]),
            }
            scen_rows.append(row)
        lines += [
            _table(
                scen_rows,
                [
                    ("scenario", "scenario (simulation)", 0),
                    ("gib", "GiB per all-reduce", 3),
                    ("compute", "compute s/step", 2),
                    *[(f"r{g:g}", f"{g:g} Gb/s", 0) for g in speeds],
                    ("be2", "2x below (Gb/s)", 0),
                    ("be11", "1.1x below (Gb/s)", 0),
                ],
            ),
            "",
            "**Regime (model only, no overlap):** the longest step compute for which HDET local is still 2x "
            f"faster than DDP, for fp32 gradients over {sim['nproc']} replicas at T = {raw['sync_interval']} "
            "(independent of this machine's speed and load); a step that computes faster is in the regime.",
            "",
            _table(
                sim["regime"],
                [
                    ("model", "model", 0),
                    ("gbps", "link Gb/s (simulated)", 0),
                    ("modelled_allreduce_s", "modelled all-reduce s", 3),
                    ("max_compute_for_2x_s", "2x when compute per step under (s)", 3),
                ],
            ).replace("| - |", "| never (T too small) |"),
        ]
    lines.append("")
    return lines


def _fmt_gbps(value: float | None) -> str:
    return "out of reach" if value is None else f"{value:.3g}"


def plot(results: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    configs = sorted({(r["model"], r["nproc"]) for r in results["steps"]}, key=lambda c: (c[1], c[0]))
    params = {r["model"]: r["params"] for r in results["steps"]}
    ticks = [f"{m} ({params[m] / 1e6:.1f}M)\n{n} procs" for m, n in configs]
    fig = Figure(figsize=(13, 4.8))
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    modes = [
        (r["mode"], r["sync_interval"]) for r in results["steps"] if (r["model"], r["nproc"]) == configs[0]
    ]
    width = 0.8 / len(modes)
    for j, (mode, t) in enumerate(modes):
        vals = []
        for c in configs:
            row = next(
                r
                for r in results["steps"]
                if (r["model"], r["nproc"], r["mode"], r["sync_interval"]) == (*c, mode, t)
            )
            vals.append(row["mean_vs_nocomm"])
        bars = ax1.bar([i + j * width for i in range(len(configs))], vals, width, label=_label(mode, t))
        ax1.bar_label(bars, fmt="%.2f", fontsize=6)
    lowest = min(r["mean_vs_nocomm"] for r in results["steps"])
    ax1.set_ylim(bottom=min(0.9, lowest - 0.05))
    ax1.axhline(1.0, color="black", lw=0.8)
    ax1.set_xticks([i + 0.4 - width / 2 for i in range(len(configs))], ticks)
    ax1.set_ylabel("mean step time / no-comm (amortized; axis starts above 0)")
    ax1.set_title("Optimizer step (lower is better)")
    ax1.legend(fontsize=7, ncol=2)
    variants = [r["variant"] for r in results["converge"] if (r["model"], r["nproc"]) == configs[0]]
    width = 0.8 / max(1, len(variants))
    for j, v in enumerate(variants):
        vals = [
            next(
                (
                    r["median_ms"]
                    for r in results["converge"]
                    if (r["model"], r["nproc"], r["variant"]) == (*c, v)
                ),
                0.0,
            )
            for c in configs
        ]
        ax2.bar([i + j * width for i in range(len(configs))], vals, width, label=v)
    ax2.set_yscale("log")
    ax2.set_xticks([i + 0.4 - width / 2 for i in range(len(configs))], ticks)
    ax2.set_ylabel("median ms (log)")
    ax2.set_title("Converge alone")
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_outputs(results: dict[str, Any], out_dir: Path, quiet: bool = False) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(results)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out_dir / "results.md").write_text(markdown)
    if results["steps"]:
        plot(results, out_dir / "speed.png")
    if not quiet:
        print(markdown, flush=True)
    plotted = " and speed.png" if results["steps"] else ""
    print(f"wrote {out_dir / 'results.json'}, results.md{plotted}", flush=True)


def rerender(args: argparse.Namespace) -> None:
    """Recompute every derived number and table from the raw runs of an earlier results.json."""
    path = Path(args.output_dir) / "results.json"
    if not path.exists():
        raise SystemExit(f"--rerender: there is no {path} to rebuild; run the benchmark first")
    old = json.loads(path.read_text())
    results = assemble(args, old["runs"], seconds=old["wall_seconds"], command=old["command"])
    results["date"] = old["date"]
    results["rerendered"] = {"date": _now(), "command": _command_line()}
    write_outputs(results, Path(args.output_dir))


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = resolve_args(argv)
    if args.rerender:
        rerender(args)
    elif under_torchrun():
        run_worker(args)
    else:
        launch(args, argv)


if __name__ == "__main__":
    main()
