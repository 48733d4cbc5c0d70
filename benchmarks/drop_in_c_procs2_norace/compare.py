"""Session 59: the drop-in on the pretrained classifier (task c, 2 processes) without the start race (README's call,
row `readme`) beside the same call with HDETTrainer's race (`readme_race_trainer`, session 58), same loop and seeds.

Ratios divide by each seed's best point of the loop's DDP sweep, recorded in ../drop_in_c_procs2/results.jsonl.

    python benchmarks/drop_in_c_procs2_norace/compare.py > benchmarks/drop_in_c_procs2_norace/comparison.md
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
RACED = HERE.parent / "drop_in_c_procs2" / "results.jsonl"
STARTS = (("best", 1.0), ("low", 0.1), ("high", 3.0))

recorded = [json.loads(line) for line in open(RACED)]
ours = [json.loads(line) for line in open(HERE / "results.jsonl")]
ddp = {(r["seed"], r["lr"]): r["eval_loss"] for r in recorded if r["row"] == "ddp"}
best = {seed: min(loss for (s, _), loss in ddp.items() if s == seed) for seed, _ in ddp}
best_lr = {seed: min((loss, lr) for (s, lr), loss in ddp.items() if s == seed)[1] for seed in best}


def run_of(rows: list[dict], row: str, start: str, seed: int) -> dict | None:
    return next((r for r in rows if r["row"] == row and r["start"] == start and r["seed"] == seed), None)


print("| start | seed | without the race: x best DDP (accuracy), final scale | with the race (session 58) | "
      "DDP at the start LR |")
print("|---|---|---|---|---|")
means: dict[str, tuple[list[float], list[float], list[float]]] = {}
for start, factor in STARTS:
    for seed in sorted(best):
        plain, raced = run_of(ours, "readme", start, seed), run_of(recorded, "readme_race_trainer", start, seed)
        if plain is None or raced is None:
            continue
        at_start = ddp.get((seed, round(best_lr[seed] * factor, 10)))
        at_start = at_start if at_start is not None else next(
            (loss for (s, lr), loss in ddp.items() if s == seed and abs(lr / best_lr[seed] - factor) < 1e-6), None
        )
        cells = means.setdefault(start, ([], [], []))
        cells[0].append(plain["eval_loss"] / best[seed])
        cells[1].append(raced["eval_loss"] / best[seed])
        ddp_cell = "-" if at_start is None else f"{at_start / best[seed]:.3f}"
        if at_start is not None:
            cells[2].append(at_start / best[seed])
        print(f"| {start} | {seed} | {plain['eval_loss'] / best[seed]:.3f} ({plain['eval_accuracy']:.3f}), "
              f"x{plain['final_scale']:.3g} | {raced['eval_loss'] / best[seed]:.3f} | {ddp_cell} |")
print("\n| start | without the race: mean (sd) | with the race: mean | DDP at the start LR: mean | seeds |")
print("|---|---|---|---|---|")
for start, (plain, raced, at_start) in means.items():
    sd = f" ({statistics.stdev(plain):.3f})" if len(plain) > 1 else ""
    ddp_mean = f"{statistics.mean(at_start):.3f}" if at_start else "-"
    print(f"| {start} | {statistics.mean(plain):.3f}{sd} | {statistics.mean(raced):.3f} | {ddp_mean} | {len(plain)} |")
