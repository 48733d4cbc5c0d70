"""Session 59: the race's decisions with each copy's LR ramped over its first steps (scratch.patch), race only.

    python benchmarks/race_ramp_s59/decisions.py [RUNS_DIR]   # default: runs/ beside this file
"""

import json
import sys
from pathlib import Path

RUNS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "runs"
print("| cell (4 processes) | start | race scale | candidates' probe losses (x1, x2.15, x4.64, x10) | copy below |")
print("|---|---|---|---|---|")
for path in sorted(RUNS.glob("*/results.jsonl")):
    for r in (json.loads(line) for line in open(path)):
        race = r.get("start_race")
        if r.get("kind") == "ddp" or not race:
            continue
        losses = ", ".join(f"{x:.3f}" for x in race.get("probe_losses", []))
        below = race.get("below_probe_loss", race.get("below_loss"))
        below = f"{below:.3f}" if isinstance(below, float) else "-"
        print(f"| {path.parent.name} | {r['name'].rsplit('_', 1)[1]} | x{race['scale']:.3g} | {losses} | {below} |")
