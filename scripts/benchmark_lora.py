"""Converge cost of a LoRA run vs full fine-tuning of the same model, on several CPU processes (gloo).

HDET averages only trainable parameters, so with a LoRA adapter a converge moves the adapter's bytes, not the
model's. For full fine-tuning and for LoRA on the same Llama this measures, per process count:

- **bytes per converge**: the trainable parameters' bytes, which is what `HDETEngine` averages (plus
  floating-point persistent buffers; these Llamas have none);
- **converge time**: `HDETEngine.end_step` with ``sync_interval=1``, so every call is one full converge (health
  check, one fused all-reduce of the parameters and the per-rank statistics, bookkeeping); the two variants
  interleaved, each repetition's slowest rank, median over repetitions;
- **step time** for scale: one forward + backward + AdamW step with no communication (mean, slowest rank).

Run plainly, it relaunches itself under ``torch.distributed.run`` on ``--nprocs`` processes; rank 0 writes
``results.json`` and ``results.md`` into ``--output_dir`` and prints the table.

Example:
    python scripts/benchmark_lora.py --quick        # small model, a few repetitions (~30 s)
    python scripts/benchmark_lora.py                # 21.6M-parameter Llama, LoRA r=16 on q/k/v/o, 2 processes
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import transformers

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark_speed import MODELS, build_model, rank_batch  # noqa: E402  (the same Llama shapes)

from hdet_hf import HDETConfig  # noqa: E402
from hdet_hf.engine import HDETEngine  # noqa: E402
from hdet_hf.process import finish_distributed  # noqa: E402
from hdet_hf.testing.benchmarks import init_worker, loadavg, machine_info, public_settings  # noqa: E402
from hdet_hf.testing.processes import relaunch_as_workers  # noqa: E402

MIB = 2**20
BIG_RUN = 10**9  # total_steps: the engines never reach their "last step"
PRESETS = {
    "full": {"model": "large", "converge_reps": 40, "train_steps": 5},
    "quick": {"model": "small", "converge_reps": 5, "train_steps": 2},
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Defaults come from the full preset (or --quick); a flag given explicitly overrides its preset.",
    )
    parser.add_argument("--quick", action="store_true", help="Smoke run: small model, a few repetitions.")
    parser.add_argument("--model", choices=sorted(MODELS), help="Llama shape (full: large; quick: small).")
    parser.add_argument("--nprocs", type=int, default=2, help="Processes to launch (default 2).")
    parser.add_argument("--lora_r", type=int, default=16, help="LoRA rank (default 16).")
    parser.add_argument(
        "--lora_targets",
        default="q_proj,k_proj,v_proj,o_proj",
        help="Comma-separated module names that get an adapter (default: the attention projections).",
    )
    parser.add_argument("--converge_reps", type=int, help="Converges timed per variant (full: 40).")
    parser.add_argument("--train_steps", type=int, help="Training steps timed per variant (full: 5).")
    parser.add_argument("--batch_size", type=int, default=4, help="Sequences per rank and step (default 4).")
    parser.add_argument("--seq_len", type=int, default=128, help="Tokens per sequence (default 128).")
    parser.add_argument(
        "--threads_per_proc", type=int, help="torch threads per process (default: usable cores // processes)."
    )
    parser.add_argument(
        "--output_dir",
        default=str(REPO_ROOT / "benchmarks" / "lora"),
        help="Where rank 0 writes results.json and results.md (default benchmarks/lora/).",
    )
    parser.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--_work_dir", default="", help=argparse.SUPPRESS)
    return parser


def resolve_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    for key, value in PRESETS["quick" if args.quick else "full"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for name in ("lora_r", "converge_reps", "train_steps", "batch_size", "seq_len"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be a positive integer, but got {getattr(args, name)!r}")
    if args.nprocs < 2:
        raise SystemExit(
            f"--nprocs must be 2 or more (there is nothing to average on 1), but got {args.nprocs}"
        )
    args.lora_targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    if not args.lora_targets:
        raise SystemExit("--lora_targets must name at least one module, e.g. q_proj,v_proj")
    return args


def build_variant(args: argparse.Namespace, lora: bool) -> dict[str, Any]:
    model = build_model(args.model, args.seq_len)
    if lora:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, target_modules=args.lora_targets
        )
        model = get_peft_model(model, config)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sync_interval=1 explores little; only the converge is timed here
        engine = HDETEngine(
            # explore_until 1.0, as the recorded results ran (the spread stays on for every timed step).
            HDETConfig(sync_interval=1, lr_spread=0.5, gradient_sync="local", explore_until=1.0),
            model,
            optimizer,
            BIG_RUN,
        )
    return {
        "name": f"lora_r{args.lora_r}" if lora else "full",
        "model": model,
        "optimizer": optimizer,
        "engine": engine,
        "params": sum(p.numel() for p in model.parameters()),
        "trainable_params": sum(p.numel() for p in trainable),
        "converge_bytes": sum(p.numel() * p.element_size() for p in trainable),
    }


def slowest(values: list[float]) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def time_steps(variant: dict[str, Any], batch: torch.Tensor, steps: int) -> float:
    model, optimizer = variant["model"], variant["optimizer"]

    def step() -> None:
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # warm-up (allocations, AdamW state)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.mean(slowest(times))


def time_converges(variants: list[dict[str, Any]], reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {v["name"]: [] for v in variants}
    for variant in variants:  # warm-up: gloo connections, first buffers
        variant["engine"].add_loss(2.5)
        variant["engine"].end_step()
    for rep in range(reps):
        order = variants[rep % 2 :] + variants[: rep % 2]  # alternate which goes first
        for variant in order:
            dist.barrier()
            t0 = time.perf_counter()
            variant["engine"].add_loss(2.5)
            variant["engine"].end_step()  # sync_interval=1: one full converge
            times[variant["name"]].append(time.perf_counter() - t0)
    return {name: slowest(values) for name, values in times.items()}


def run_worker(args: argparse.Namespace) -> None:
    worker = init_worker("gloo", threads=args.threads_per_proc or 0)
    rank, world, threads = worker.rank, worker.world, worker.threads
    load_start = loadavg()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    variants = [build_variant(args, lora=False), build_variant(args, lora=True)]
    batch = rank_batch(variants[0]["model"].config.vocab_size, args.batch_size, args.seq_len, rank, "cpu")
    step_s = {v["name"]: time_steps(v, batch, args.train_steps) for v in variants}
    converge_s = time_converges(variants, args.converge_reps)
    cpu_share = (time.process_time() - cpu0) / (time.perf_counter() - wall0) / threads
    rows = []
    for v in variants:
        name = v["name"]
        rows.append(
            {
                "variant": name,
                "params": v["params"],
                "trainable_params": v["trainable_params"],
                "converge_mib": v["converge_bytes"] / MIB,
                "converge_median_ms": 1000 * statistics.median(converge_s[name]),
                "converge_min_ms": 1000 * min(converge_s[name]),
                "step_mean_ms": 1000 * step_s[name],
                "converge_vs_step": statistics.median(converge_s[name]) / step_s[name],
            }
        )
    full, lora = rows
    share = torch.tensor([cpu_share], dtype=torch.float64)
    dist.all_reduce(share)
    if rank == 0:
        result = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": machine_info(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": __import__("peft").__version__,
            "nproc": world,
            "threads_per_proc": threads,
            "loadavg_start": load_start,
            "loadavg_end": loadavg(),
            "cpu_share_per_thread": float(share) / world,
            "settings": public_settings(args),
            "rows": rows,
            "ratios": {
                "bytes_full_over_lora": full["converge_mib"] / lora["converge_mib"],
                "converge_time_full_over_lora": full["converge_median_ms"] / lora["converge_median_ms"],
            },
        }
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "results.json"), "w") as f:
            json.dump(result, f, indent=2)
        markdown = to_markdown(result)
        with open(os.path.join(args.output_dir, "results.md"), "w") as f:
            f.write(markdown)
        print(markdown, flush=True)


def to_markdown(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        f"# LoRA vs full fine-tuning: converge cost ({result['nproc']} processes, {s['model']} model)",
        "",
        f"{result['date']}; {result['machine']}, peft {result['peft']}; "
        f"{result['threads_per_proc']} thread(s) per process; "
        f"load average {result['loadavg_start'][0]:.1f} -> {result['loadavg_end'][0]:.1f}; CPU share per thread "
        f"{result['cpu_share_per_thread']:.2f} (1.0 = the cores were ours).",
        "",
        f"LoRA r={s['lora_r']} on {', '.join(s['lora_targets'])}; {s['converge_reps']} converges per variant "
        f"(median of the slowest rank), {s['train_steps']} steps of {s['batch_size']} x {s['seq_len']} tokens.",
        "",
        "| variant | parameters | trainable | MiB per converge | converge median ms | min ms | step ms "
        "| converge / step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['variant']} | {r['params']:,} | {r['trainable_params']:,} | {r['converge_mib']:.3f} "
            f"| {r['converge_median_ms']:.2f} | {r['converge_min_ms']:.2f} | {r['step_mean_ms']:.1f} "
            f"| {r['converge_vs_step']:.4f} |"
        )
    ratios = result["ratios"]
    lines += [
        "",
        f"Full / LoRA: {ratios['bytes_full_over_lora']:.1f}x the bytes, "
        f"{ratios['converge_time_full_over_lora']:.1f}x the converge time.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = resolve_args(argv)
    if args._worker:
        run_worker(args)
        finish_distributed()
        return 0
    code, wall = relaunch_as_workers(__file__, args.nprocs, argv, REPO_ROOT, work_prefix="hdet_lora_")
    print(f"[{args.nprocs} processes, {wall} s, exit code {code}]")
    return code


if __name__ == "__main__":
    sys.exit(main())
