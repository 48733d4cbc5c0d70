"""Session 57: the drop-in's split race (`readme_race_split`) against today's single race (`readme_race`, rerun with the
same library in `today_single/`), per seed and start; each folder's DDP sweep (copied from the recorded folder) gives
each seed's best point. (The folders also hold session 45's `readme_race` rows, from a library before the two-step
raise: not the comparison.)

    python benchmarks/drop_in_race_split/compare.py > benchmarks/drop_in_race_split/comparison.md

A race that decides the same (scale, stall ceiling) leaves the run bit for bit as it was, so the two rows differ only
where the split race decided otherwise; the table says where, and why (the candidates' or the pair's batch).
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


def race_note(race: dict) -> str:
    ceiling = race.get("stall_ceiling")
    lowered = " lowered" if race.get("lowered") else ""
    return f"{race['scale']:.3g}{lowered}" + ("" if ceiling is None else f" (ceiling {ceiling:.3g})")


print("| task | start | seed | race: single -> split | single race | split race | DDP at the start LR |")
print("|---|---|---|---|---|---|---|")
summary = []
for folder, label in FOLDERS.items():
    path = HERE / folder / "results.jsonl"
    if not path.exists():
        continue
    runs = load(path)
    single_path = HERE / "today_single" / folder / "results.jsonl"
    today = load(single_path) if single_path.exists() else {}
    best, ddp = {}, {}
    for r in runs.values():
        if r["row"] == "ddp":
            best[r["seed"]] = min(best.get(r["seed"], float("inf")), r["eval_loss"])
            ddp[(r["seed"], r["lr"])] = r["eval_loss"]
    for start in ("low", "best", "high"):
        cells = []
        for seed in (0, 1, 2):
            single, split = today.get(f"readme_race_{start}_s{seed}"), runs.get(f"readme_race_split_{start}_s{seed}")
            if single is None or split is None:
                continue
            ratios = (single["eval_loss"] / best[seed], split["eval_loss"] / best[seed], ddp[(seed, split["lr"])] / best[seed])
            changed = race_note(single["start_race"]) != race_note(split["start_race"])
            cells.append((*ratios, changed))
            arrow = f"{race_note(single['start_race'])} -> {race_note(split['start_race'])}"
            print(f"| {label} | {start} | {seed} | {arrow} | {ratios[0]:.3f} | **{ratios[1]:.3f}** | {ratios[2]:.3f} |")
        if cells:
            summary.append((label, start, len(cells), *(statistics.mean(c[i] for c in cells) for i in range(3)),
                            sum(c[3] for c in cells)))  # fmt: skip
print()
print("| task | start | seeds | single race | split race | DDP at the start LR | races that decided otherwise |")
print("|---|---|---|---|---|---|---|")
for label, start, n, single, split, at_lr, changed in summary:
    print(f"| {label} | {start} | {n} | {single:.3f} | **{split:.3f}** | {at_lr:.3f} | {changed} of {n} |")
