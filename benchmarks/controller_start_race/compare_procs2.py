"""The start race at 2 processes from 10x below, next to the 2-process default, as ratios to DDP at the best LR.

    python benchmarks/controller_start_race/compare_procs2.py [SCRATCH] > benchmarks/controller_start_race/procs2.md

The race rows (`..._mr4_cut0.5_race60_low`) come from SCRATCH/<task><seed>/results.jsonl (default /tmp/race41p2),
else this folder's copies (procs2/<task><seed>.jsonl); the default's from its recorded table
(benchmarks/controller_default/<task>_procs2_cut.md, the row "low": per seed, `*` where that table took an older row
the cuts were shown not to change).
"""

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLES = HERE.parent / "controller_default"
ROW = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60_low"
BEST = {"a": 0.01, "d": 0.003, "e": 0.01, "f": 0.01, "h": 0.01, "c": 0.0003, "g": 0.0003, "i": 0.003}


def default_cells(task: str) -> list[str]:
    for line in (TABLES / f"{task}_procs2_cut.md").read_text().splitlines():
        if line.startswith("| low ("):
            return [c.strip() for c in line.strip().strip("|").split("|")][1:4]
    return ["-", "-", "-"]


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/race41p2")
    print("| task | seed | race60 (final LR) | race scale | probe losses x 1, 2.15, 4.64, 10; below | default |")
    print("|---|---|---|---|---|---|")
    means: dict[str, tuple[list[float], list[float]]] = {}
    for task, best in BEST.items():
        defaults = default_cells(task)
        for seed in range(3):
            path = scratch / f"{task}{seed}" / "results.jsonl"
            if not path.exists():
                path = HERE / "procs2" / f"{task}{seed}.jsonl"
            if not path.exists():
                continue
            rows = {r["name"]: r for r in map(json.loads, open(path))}
            race = rows.get(ROW)
            ddp = next((r for r in rows.values() if r["kind"] == "ddp" and abs(r["start_lr"] / best - 1) < 1e-6), None)
            if race is None or ddp is None:
                continue
            ratio = race["eval_loss"] / ddp["eval_loss"]
            record = race.get("start_race") or {}
            below = record.get("below_probe_loss")
            losses = ", ".join(f"{x:.3f}" for x in record.get("probe_losses", []))
            losses += f"; {below:.3f}" if below is not None else "; -"
            print(f"| {task} | {seed} | {ratio:.4f} ({race['final_lr']:.3g}) | {record.get('scale', 1):.3g} | "
                  f"{losses} | {defaults[seed]} |")
            if defaults[seed] != "-":
                mine, theirs = means.setdefault(task, ([], []))
                mine.append(ratio)
                theirs.append(float(defaults[seed].rstrip("*")))
    print("\n| task | seeds | race60 mean | default mean (same seeds) |\n|---|---|---|---|")
    for task, (mine, theirs) in means.items():
        print(f"| {task} | {len(mine)} | {statistics.mean(mine):.4f} | {statistics.mean(theirs):.4f} |")


if __name__ == "__main__":
    main()
