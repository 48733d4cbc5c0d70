"""The race on half the global batch (race-only, `race_half/<task><seed>.jsonl`) against today's race on a quarter at 4
processes: each start's decision (scale, lowered, stall ceiling) side by side, and whether it changed.

    python benchmarks/controller_today_s54/race_half_compare.py > benchmarks/controller_today_s54/race_half_compare.txt

The quarter's records: seed 0 of a, d, e, f, h, j, k, c, g, i from session 51's race-only runs on 128 examples
(`controller_race_lost_ground/race_probe/`), where they have the start, else the spread probe's full runs (a race on 32
examples, `controller_probe_spread/runs/`); seeds 1-2 from session 52's full runs (`controller_today_s52/runs/`).
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent


def races(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in open(path)]
    return {row["start"]: row["start_race"] for row in rows if row.get("start_race")}


def decision(race: dict) -> str:
    ceiling = race.get("stall_ceiling")
    return f"x{race['scale']:.3g}{' lowered' if race['lowered'] else ''}{f' ceiling {ceiling:.3g}' if ceiling else ''}"


changed = total = 0
for path in sorted((HERE / "race_half").glob("*.jsonl")):
    name = path.stem
    task, seed = name[0], name[1:]
    quarter: dict[str, dict] = {}
    if seed == "0":
        quarter = {**races(BENCH / "controller_probe_spread/runs" / f"{task}0.jsonl"),
                   **races(BENCH / "controller_race_lost_ground/race_probe" / f"{task}.jsonl")}  # fmt: skip
    else:
        quarter = races(BENCH / "controller_today_s52/runs" / f"{name}.jsonl")
    for start, race in races(path).items():
        if start not in quarter:
            continue
        total += 1
        same = decision(race) == decision(quarter[start])
        changed += not same
        print(f"{name:>3} {start:>4}  quarter {decision(quarter[start]):<28} half {decision(race):<28} {'' if same else 'CHANGED'}")
print(f"{changed} of {total} decisions changed")
