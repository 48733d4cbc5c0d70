"""Session 47: where `--hdet_start_race_stall_ceiling` would bind in the recorded default runs.

    cd benchmarks && python controller_half/screen_ceiling.py [extra folders...]

For every recorded HDET run with a start race (the race's record: probe losses, initial probe loss, multipliers),
the stall ceiling (`hdet_hf.start_race.stall_ceiling`) against the highest controller scale the run reached. The
ceiling binds where that scale went above it; rows with start_race_stall_ceiling already on are left out. This is
the rule as screened and measured in session 47; the committed default skips a ceiling at the start itself (1.0: the
2.15x copy stalled), so rows listed with ceiling 1.0 run as without it (BENCHMARKS.md item 49).
"""

import glob
import json
import sys
from collections import defaultdict

from hdet_hf.start_race import stall_ceiling


def main() -> None:
    paths = sorted(glob.glob("**/*.jsonl", recursive=True))
    for extra in sys.argv[1:]:
        paths += sorted(glob.glob(f"{extra}/**/*.jsonl", recursive=True))
    seen, binds, counts = set(), defaultdict(list), defaultdict(int)
    for path in paths:
        for line in open(path):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            race = row.get("start_race") if isinstance(row, dict) else None
            if not race or not row.get("syncs") or (row.get("hdet_config") or {}).get("start_race_stall_ceiling"):
                continue
            key = (row["name"], round(row.get("eval_loss") or 0, 5))
            if key in seen or race.get("initial_probe_loss") is None:
                continue
            seen.add(key)
            start = row["name"].rsplit("_", 1)[-1]
            group = (row["task"], row.get("lora_r") or 0, row["steps"], start)
            counts[group] += 1
            ceiling = stall_ceiling(race["probe_losses"], race["initial_probe_loss"], race["multipliers"])
            if ceiling is None or race.get("lowered"):
                continue
            ceiling = max(ceiling, race["scale"])
            highest = max(s["scale"] for s in row["syncs"])
            if highest > ceiling * 1.0001:
                binds[group].append((path, row["name"][-40:], round(ceiling, 2), round(highest, 2), round(row["eval_loss"], 4)))
    for group in sorted(counts, key=str):
        print(group, f"{len(binds[group])} of {counts[group]} runs bind")
        for hit in binds[group]:
            print("   ", hit)


if __name__ == "__main__":
    main()
