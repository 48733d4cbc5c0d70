"""Session 59: a 100-step run (task a, 4 processes), where the unset start race does not run: the default as a user
gets it (no race) against a 30-step race, per seed, as ratios to the best point of that seed's 5-point DDP sweep.
DDP at a start LR outside the sweep's grid is in ``ddp_at_start_seed<N>/``.

    python benchmarks/controller_short_s59/compare.py > benchmarks/controller_short_s59/comparison.md
    python benchmarks/controller_short_s59/compare.py h > benchmarks/controller_short_s59/h/comparison.md   # task h
    python benchmarks/controller_short_s59/compare.py c > benchmarks/controller_short_s59/c/comparison.md   # task c
"""

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / (sys.argv[1] if len(sys.argv) > 1 else "")
ROW = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split"
STARTS = (("best", 1.0), ("low", 0.1), ("high", 3.0))
VARIANTS = (("raceunset", "no race (the default under 120 steps)"), ("race30", "a 30-step race"))


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path)] if path.exists() else []


print("DDP sweep (eval loss):\n")
seeds = sorted(int(p.name.removeprefix("seed")) for p in HERE.glob("seed[0-9]*"))
sweeps = {s: {r["start_lr"]: r["eval_loss"] for r in rows(HERE / f"seed{s}" / "results.jsonl") if r["kind"] == "ddp"}
          for s in seeds}  # fmt: skip
grid = sorted({lr for sweep in sweeps.values() for lr in sweep})
print("| seed | " + " | ".join(f"{lr:g}" for lr in grid) + " | best |")
print("|---|" + "---|" * (len(grid) + 1))
for s in seeds:
    best_lr = min(sweeps[s], key=sweeps[s].get)
    print(f"| {s} | " + " | ".join(f"{sweeps[s][lr]:.4f}" if lr in sweeps[s] else "-" for lr in grid) + f" | {best_lr:g} |")
print("\n| start | seed | " + " | ".join(label for _, label in VARIANTS) + " | DDP at the start LR |")
print("|---|---|" + "---|" * (len(VARIANTS) + 1))
means: dict[tuple[str, str], list[float]] = {}
for start, factor in STARTS:
    for s in seeds:
        best = min(sweeps[s].values())
        best_lr = min(sweeps[s], key=sweeps[s].get)
        runs = {r["name"]: r for r in rows(HERE / f"seed{s}" / "results.jsonl")}
        if any(f"{ROW}_{variant}_{start}" not in runs for variant, _ in VARIANTS):
            continue  # a seed still running
        extra = {r["start_lr"]: r["eval_loss"] for r in rows(HERE / f"ddp_at_start_seed{s}" / "results.jsonl")}
        lr = best_lr * factor
        at_start = next((loss for x, loss in {**sweeps[s], **extra}.items() if abs(x / lr - 1) < 1e-6), None)
        cells = []
        for variant, _ in VARIANTS:
            r = runs[f"{ROW}_{variant}_{start}"]
            ratio = r["eval_loss"] / best
            means.setdefault((start, variant), []).append(ratio)
            cells.append(f"{ratio:.3f} (x{r['final_lr'] / r['start_lr']:.3g})")
        if at_start is not None:
            means.setdefault((start, "ddp"), []).append(at_start / best)
        ddp_cell = "-" if at_start is None else f"{at_start / best:.3f}"
        print(f"| {start} | {s} | " + " | ".join(cells) + f" | {ddp_cell} |")
print("\n(xN: the LR the run ended its exploration at, as a multiple of its start.)\n")
print("| start | " + " | ".join(label for _, label in VARIANTS) + " | DDP at the start LR |")
print("|---|" + "---|" * (len(VARIANTS) + 1))
for start, _ in STARTS:
    if (start, VARIANTS[0][0]) not in means:
        continue  # a start not run (task c: best and 10x below only)
    print(f"| {start} | " + " | ".join(f"{statistics.mean(means[(start, v)]):.3f}" for v, _ in VARIANTS)
          + f" | {statistics.mean(means[(start, 'ddp')]) if means.get((start, 'ddp')) else float('nan'):.3f} |")  # fmt: skip
