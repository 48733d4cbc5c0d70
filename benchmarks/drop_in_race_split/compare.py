"""Session 57: the drop-in's start race in three forms, per seed and start, on the same cells:

- single (`readme_race`, rerun with today's library in `today_single/`): every copy on one process's batch, scored on
  the train set's first 32 blocks (the README's call before session 57);
- split (`readme_race_split`): the candidates on half the global batch, the start and the copy below it again on a
  quarter (`lower_train_batches`), the same probe;
- as HDETTrainer (`readme_race_trainer`): split, and scored on 128 train blocks spread over the set
  (`probe_indices`), which its batches leave out (the README's call since session 57).

Each folder's DDP sweep (copied from the recorded folder) gives each seed's best point. (The folders also hold session
45's `readme_race` rows, from a library before the two-step raise: not the comparison.)

    python benchmarks/drop_in_race_split/compare.py > benchmarks/drop_in_race_split/comparison.md

A race that decides the same (scale, stall ceiling) leaves the run bit for bit as the same loop without a different
race, so rows differ only where the races decided otherwise.
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDERS = {
    "drop_in_procs2": "a, 2 processes",
    "drop_in_procs4": "a, 4 processes",
    "drop_in_f_procs2": "f, 2 processes",
}
ROWS = ("readme_race", "readme_race_split", "readme_race_trainer")


def load(path: Path) -> dict[str, dict]:
    return {r["name"]: r for r in (json.loads(line) for line in open(path))} if path.exists() else {}


def race_note(race: dict) -> str:
    ceiling = race.get("stall_ceiling")
    lowered = " lowered" if race.get("lowered") else ""
    return f"{race['scale']:.3g}{lowered}" + ("" if ceiling is None else f" (ceiling {ceiling:.3g})")


print("| task | start | seed | race's scale: single / split / as HDETTrainer | single | split | as HDETTrainer "
      "| DDP at the start LR |")
print("|---|---|---|---|---|---|---|---|")
summary = []
for folder, label in FOLDERS.items():
    runs = {**load(HERE / folder / "results.jsonl")}
    today = load(HERE / "today_single" / folder / "results.jsonl")
    best, ddp = {}, {}
    for r in runs.values():
        if r["row"] == "ddp":
            best[r["seed"]] = min(best.get(r["seed"], float("inf")), r["eval_loss"])
            ddp[(r["seed"], r["lr"])] = r["eval_loss"]
    for start in ("low", "best", "high"):
        cells = []
        for seed in (0, 1, 2):
            found = [(today if row == "readme_race" else runs).get(f"{row}_{start}_s{seed}") for row in ROWS]
            if any(r is None for r in found):
                continue
            ratios = [r["eval_loss"] / best[seed] for r in found]
            at_lr = ddp[(seed, found[0]["lr"])] / best[seed]
            cells.append((*ratios, at_lr))
            scales = " / ".join(race_note(r["start_race"]) for r in found)
            print(f"| {label} | {start} | {seed} | {scales} | {ratios[0]:.3f} | {ratios[1]:.3f} | **{ratios[2]:.3f}** "
                  f"| {at_lr:.3f} |")
        if cells:
            summary.append((label, start, len(cells), *(statistics.mean(c[i] for c in cells) for i in range(4))))
print()
print("| task | start | seeds | single | split | as HDETTrainer | DDP at the start LR |")
print("|---|---|---|---|---|---|---|")
for label, start, n, single, split, trainer, at_lr in summary:
    print(f"| {label} | {start} | {n} | {single:.3f} | {split:.3f} | **{trainer:.3f}** | {at_lr:.3f} |")
