"""Two runs instead of a sweep, with today's default (session 38, BENCHMARKS.md reading 43).

The README's advice after an auto-LR run is a plain run at ``learning_rate x HDETSchedule.final_scale()``. Reading
17 measured that second run with session 12's default; the default has changed since (no net cut after the peak,
session 16, and more), so the LR a run ends with changed too. This script

- ``--commands``: prints the `scripts/benchmark_quality.py` calls for plain DDP at each recorded default run's final
  peak LR (3 significant digits, as `final_lr` in its results.jsonl), for the language-model tasks a, b', d, e, f
  and h, seeds 0-2, every start; a final LR that is already a DDP point of that seed is not run again;
- with no flag: prints the table (first run, its final LR over the sweep's best, the second run; each a ratio to
  the same seed's DDP at the sweep's best LR) from the recorded folders and this folder's runs.

    python benchmarks/controller_second_run_today/second_runs.py --commands > queue.sh && bash queue.sh
    python benchmarks/controller_second_run_today/second_runs.py > benchmarks/controller_second_run_today/table.md

The second table: the second run as the default HDET run again, from the first's final LR (tasks a and e from 3x
above), e.g. task a seed 0 (``R`` is ``ROWS[0]``, the default's row name):

    python scripts/benchmark_quality.py --out_dir benchmarks/controller_second_run_today/hdet_a_seed0 --seed 0 \
        --grid 0.0214 --max_grid_extensions 0 --best_lr 0.0214 --configs ${R}_best
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# The default's row (session 20), and the older rows benchmarks/controller_default/README.md shows bit-identical
# at the starts where the default has no row of its own (`--same_as`), in that order.
_L = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4"
ROWS = (f"{_L}_fan0.1_ties_mr4", f"{_L}_fan0.1_ties", f"{_L}_fan0.1")
# task: (recorded folders for seeds 0-2, the sweep's best LR, the task's flags)
TASKS = {
    "a": (("controller", "controller_seed1", "controller_seed2"), 0.01, ""),
    "bp": (
        ("controller_1000_best0.03", "controller_1000_seed1", "controller_1000_seed2"),
        0.03,
        "--max_steps 1000 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1",
    ),
    "d": (
        ("controller_heldout", "controller_heldout_seed1", "controller_heldout_seed2"),
        0.003,
        "--max_steps 600 --batch_size 4 --hidden_size 128 --num_hidden_layers 4 --intermediate_size 344 "
        "--adam_beta2 0.95 --weight_decay 0.05",
    ),
    "e": (
        ("controller_heldout_e", "controller_heldout_e_seed1", "controller_heldout_e_seed2"),
        0.01,
        "--max_steps 450 --batch_size 4 --hidden_size 96 --num_hidden_layers 3 --intermediate_size 256 "
        "--adam_beta2 0.98 --weight_decay 0.02",
    ),
    "f": (
        ("controller_heldout_f", "controller_heldout_f_seed1", "controller_heldout_f_seed2"),
        0.01,
        "--max_steps 400 --batch_size 8 --hidden_size 64 --num_hidden_layers 2 --intermediate_size 172 "
        "--adam_beta2 0.99 --weight_decay 0.01",
    ),
    "h": (
        ("controller_heldout_h", "controller_heldout_h_seed1", "controller_heldout_h_seed2"),
        0.01,
        "--model_type gpt2 --max_steps 500 --batch_size 4 --hidden_size 128 --num_hidden_layers 4 "
        "--intermediate_size 512 --adam_beta2 0.95 --weight_decay 0.1",
    ),
}
STARTS = ("high", "best", "low")
LABEL = {"high": "3x above", "best": "best LR", "low": "10x below"}


def _rows(folder: Path) -> list[dict]:
    path = folder / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _ddp(rows: list[dict]) -> dict[float, float]:
    return {r["start_lr"]: r["eval_loss"] for r in rows if r.get("kind") == "ddp"}


def _default_run(rows: list[dict], start: str) -> dict:
    for name in ROWS:
        hits = [r for r in rows if r.get("name") == f"{name}_{start}"]
        if hits:
            return hits[-1]
    raise SystemExit(f"no default row for start {start!r}")


def _same_lr(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(a, b)


def runs():
    """Yields (task, seed, start, first run's ratio, final LR, final LR / best, second run's ratio or None)."""
    for task, (folders, best, _) in TASKS.items():
        for seed, folder in enumerate(folders):
            recorded = _rows(ROOT / "benchmarks" / folder)
            ddp = _ddp(recorded) | _ddp(_rows(HERE / f"{task}_seed{seed}"))
            best_loss = next(v for k, v in ddp.items() if _same_lr(k, best))
            for start in STARTS:
                run = _default_run(recorded, start)
                lr = float(f"{run['final_lr']:.3g}")
                second = next((v for k, v in ddp.items() if _same_lr(k, lr)), None)
                yield (
                    task,
                    seed,
                    start,
                    run["eval_loss"] / best_loss,
                    lr,
                    lr / best,
                    None if second is None else second / best_loss,
                )


def commands() -> str:
    lines = []
    for task, seed, _start, _, lr, _, second in sorted(runs(), key=lambda r: STARTS.index(r[2])):
        if second is not None:
            continue
        _, best, flags = TASKS[task]
        lines.append(
            f"python scripts/benchmark_quality.py --out_dir benchmarks/controller_second_run_today/{task}_seed{seed} "
            f"--resume --seed {seed} {flags} --grid {lr:.3g} --max_grid_extensions 0 --best_lr {best} "
            f"--configs ddp_lr{lr:.3g}".replace("  ", " ")
        )
    return "\n".join(lines)


def table() -> str:
    out = [
        "| task | start | first run (HDET, default), per seed | final LR / sweep's best | second run (DDP at it) "
        "| mean: first / second |",
        "|---|---|---|---|---|---|",
    ]
    grouped: dict[tuple[str, str], list] = {}
    for row in runs():
        grouped.setdefault((row[0], row[2]), []).append(row)
    for task in TASKS:
        for start in STARTS:
            rows = grouped[(task, start)]
            first = [r[3] for r in rows]
            seconds = [r[6] for r in rows]
            done = [s for s in seconds if s is not None]
            mean_second = f"{statistics.mean(done):.3f}" if len(done) == len(rows) else "-"
            name = "b'" if task == "bp" else task
            out.append(
                f"| {name} | {LABEL[start]} | {' / '.join(f'{x:.3f}' for x in first)} "
                f"| {' / '.join(f'{r[5]:.2f}' for r in rows)} "
                f"| {' / '.join('-' if s is None else f'{s:.3f}' for s in seconds)} "
                f"| {statistics.mean(first):.3f} / {mean_second} |"
            )
    return "\n".join(out)


def hdet_second_runs() -> str:
    """The second run as the default HDET run again, started at the first's final LR (``hdet_<task>_seed<s>/``)."""
    out = ["| task | start of run 1 | run 2 (HDET from run 1's final LR), per seed | mean | its final LR / best |",
           "|---|---|---|---|---|"]
    firsts = {(r[0], r[1], r[2]): r for r in runs()}
    for task, (folders, best, _) in TASKS.items():
        ratios, finals = [], []
        for seed, folder in enumerate(folders):
            rows = [r for r in _rows(HERE / f"hdet_{task}_seed{seed}") if r.get("kind") == "hdet"]
            if not rows:
                break
            ddp = _ddp(_rows(ROOT / "benchmarks" / folder))
            best_loss = next(v for k, v in ddp.items() if _same_lr(k, best))
            assert _same_lr(rows[-1]["start_lr"], firsts[(task, seed, "high")][4])
            ratios.append(rows[-1]["eval_loss"] / best_loss)
            finals.append(rows[-1]["final_lr"] / best)
        if len(ratios) == len(folders):
            name = "b'" if task == "bp" else task
            out.append(
                f"| {name} | 3x above | {' / '.join(f'{x:.3f}' for x in ratios)} | {statistics.mean(ratios):.3f} "
                f"| {' / '.join(f'{x:.2f}' for x in finals)} |"
            )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", action="store_true", help="print the runs still missing, one call a line")
    args = parser.parse_args()
    print(commands() if args.commands else table() + "\n\n" + hdet_second_runs())


if __name__ == "__main__":
    main()
