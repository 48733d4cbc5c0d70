"""Session 45: the drop-in's start race (`readme_race`) against `readme` with today's library, per seed and start.

    python benchmarks/drop_in_race/compare.py > benchmarks/drop_in_race/comparison.md

Ratios to the same seed's best DDP point of the folder's sweep. Where the race changed nothing (scale 1), `readme_race`
is today's `readme` bit for bit (checked: task a at 2 processes, best LR seed 0, 3.9457841873168946; at 4 processes, 3x
above seed 0, 4.259721406300863, and 10x below seed 2), so only the 10x-below starts needed `readme` rerun
(`today_readme_<folder>/`). The recorded `readme` rows of each folder ran on another machine (Intel; these on AMD EPYC)
and older libraries: they differ by up to 0.17 per run, so they are not the comparison.
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


def load(path: Path) -> dict[str, dict]:
    return {r["name"]: r for r in (json.loads(line) for line in open(path))}


print("| task | start | seed | race scale (winner's) | with the race | without (today) | DDP at the start LR |")
print("|---|---|---|---|---|---|---|")
summary = []
for folder, label in FOLDERS.items():
    runs = load(HERE.parent / folder / "results.jsonl")
    today = load(HERE / f"today_readme_{folder}" / "results.jsonl")
    best = {}
    for r in runs.values():
        if r["row"] == "ddp":
            best[r["seed"]] = min(best.get(r["seed"], float("inf")), r["eval_loss"])
    ddp = {(r["seed"], r["lr"]): r["eval_loss"] for r in runs.values() if r["row"] == "ddp"}
    for start in ("low", "best", "high"):
        cells = []
        for seed in (0, 1, 2):
            raced = runs[f"readme_race_{start}_s{seed}"]
            race = raced["start_race"]
            plain = today.get(f"readme_{start}_s{seed}") if start == "low" else raced
            if race["scale"] != 1.0 and plain is raced:
                raise SystemExit(f"{folder} {start} s{seed}: the race fired; rerun readme there")
            winner = race["multipliers"][race["winner"]]
            ratio = raced["eval_loss"] / best[seed]
            without = plain["eval_loss"] / best[seed]
            at_lr = ddp[(seed, raced["lr"])] / best[seed]
            cells.append((ratio, without, at_lr, race["scale"]))
            print(f"| {label} | {start} | {seed} | {race['scale']:.3g} ({winner:.3g}) | {ratio:.3f} | {without:.3f} | {at_lr:.3f} |")
        summary.append((label, start, *(statistics.mean(c[i] for c in cells) for i in range(3)),
                        sum(c[3] != 1.0 for c in cells)))  # fmt: skip
print()
print("| task | start | with the race | without (today) | DDP at the start LR | races that fired |")
print("|---|---|---|---|---|---|")
for label, start, ratio, without, at_lr, fired in summary:
    print(f"| {label} | {start} | **{ratio:.3f}** | {without:.3f} | {at_lr:.3f} | {fired} of 3 |")
