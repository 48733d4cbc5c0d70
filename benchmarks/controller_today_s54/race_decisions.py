"""Print each recorded race's decision: candidates' probe losses, the copy below, the scale it started the run at.

    python race_decisions.py results.jsonl [...]
"""

import json
import sys
from pathlib import Path

for path in sys.argv[1:]:
    # a folder's results.jsonl is named by its folder, any other file by its own name
    label = Path(path).parent.name if Path(path).name == "results.jsonl" else Path(path).stem
    for line in open(path):
        row = json.loads(line)
        race = row.get("start_race")
        if not race:
            continue
        losses = " ".join(f"{m:.3g}:{v:.3f}" for m, v in zip(race["multipliers"], race["probe_losses"]))
        below = race.get("below_probe_loss")
        print(
            f"{label:>8} {row['start']:>4} scale {race['scale']:.3g}{' lowered' if race['lowered'] else ''}"
            f"  {losses}  below {below if below is None else round(below, 3)}"
            f"  ceiling {race.get('stall_ceiling')}  probe {race.get('probe_size')}"
        )
