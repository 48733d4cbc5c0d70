"""Session 60: the drop-in on an out-of-sample task (queue.sh: a 4-layer Llama, 600 steps, AdamW (0.9, 0.95), weight
decay 0.1), README's call plus HDETTrainer's race (row `readme_race_trainer`), against DDP at the same start LR.

Ratios divide by each seed's best point of the loop's DDP sweep (0.001 ... 0.1; 0.09 is DDP at 3x above, not a sweep
point).

    python benchmarks/drop_in_o_procs2/compare.py > benchmarks/drop_in_o_procs2/comparison.md
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
SWEEP = (0.001, 0.003, 0.01, 0.03, 0.1)
BEST_LR = 0.03
STARTS = (("best", 1.0), ("low", 0.1), ("high", 3.0))

rows = [json.loads(line) for line in open(HERE / "results.jsonl")]
ddp = {(r["seed"], round(r["lr"], 10)): r["eval_loss"] for r in rows if r["row"] == "ddp"}
seeds = sorted({seed for seed, _ in ddp})
best = {seed: min(ddp[(seed, lr)] for lr in SWEEP if (seed, lr) in ddp) for seed in seeds}

print("Sweep per seed (eval loss): " + "; ".join(
    f"seed {seed}: " + ", ".join(f"{lr:g} {ddp[(seed, lr)]:.4f}" for lr in SWEEP if (seed, lr) in ddp) for seed in seeds
))
print()
print("| start | seed | HDET (README's call + race): x best DDP | final scale | race scale | DDP at the start LR |")
print("|---|---|---|---|---|---|")
means: dict[str, tuple[list[float], list[float]]] = {}
for start, factor in STARTS:
    for seed in seeds:
        run = next((r for r in rows if r["row"] == "readme_race_trainer" and r["start"] == start and r["seed"] == seed),
                   None)
        if run is None:
            continue
        at_start = ddp.get((seed, round(BEST_LR * factor, 10)))
        cells = means.setdefault(start, ([], []))
        cells[0].append(run["eval_loss"] / best[seed])
        if at_start is not None:
            cells[1].append(at_start / best[seed])
        race = (run.get("start_race") or {}).get("scale", "-")
        print(f"| {start} | {seed} | {run['eval_loss'] / best[seed]:.3f} | x{run['final_scale']:.3g} | {race} | "
              f"{'-' if at_start is None else f'{at_start / best[seed]:.3f}'} |")
print("\n| start | HDET: mean (sd) | DDP at the start LR: mean | seeds |")
print("|---|---|---|---|")
for start, (hdet, at_start) in means.items():
    sd = f" ({statistics.stdev(hdet):.3f})" if len(hdet) > 1 else ""
    print(f"| {start} | {statistics.mean(hdet):.3f}{sd} | "
          f"{f'{statistics.mean(at_start):.3f}' if at_start else '-'} | {len(hdet)} |")
