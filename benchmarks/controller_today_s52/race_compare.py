"""Session 52: the race on 128 examples (race-only, `race_only/`) against the race of the runs the summary tables use
(32 examples), on j, k and j at 2 processes, seeds 1-2: (scale, lowered, stall ceiling) per start, then the race's
probe losses (x1, x2.15, x4.64, x10), the copy below's and the initial weights'. Run from the repository root:
python benchmarks/controller_today_s52/race_compare.py
"""

import json
import os

B = "benchmarks"


def races(path: str) -> dict:
    found = {}
    if os.path.exists(path):
        for line in open(path):
            row = json.loads(line)
            if row.get("kind") == "hdet" and row.get("start_race"):
                found[row["start"]] = row["start_race"]
    return found


def decision(race: dict | None) -> tuple | None:
    if race is None:
        return None
    ceiling = race["stall_ceiling"]
    return round(race["scale"], 3), race["lowered"], ceiling and round(ceiling, 3)


for task in ("j", "k", "j_procs2"):
    for seed in (1, 2):
        new = races(f"{B}/controller_today_s52/race_only/{task}{seed}.jsonl")
        spread = f"{task}{seed}" if task != "j_procs2" else f"j_procs2_{seed}"
        used = races(f"{B}/controller_probe_spread/runs/{spread}.jsonl")
        used.update({k: v for k, v in races(f"{B}/controller_race_lost_ground/runs/{task}{seed}.jsonl").items() if k == "high"})
        for start in ("best", "low", "high"):
            n, o = new.get(start), used.get(start)
            same = "same" if decision(n) == decision(o) else "DIFFERENT"
            losses = [round(x, 3) for x in n["probe_losses"]]
            print(f"{task} seed {seed} {start}: 128 {decision(n)}, 32 {decision(o)}: {same}; probe {losses}, "
                  f"below {n['below_probe_loss']:.3f}, initial {n['initial_probe_loss']:.3f}")  # fmt: skip
