"""Session 59: today's default exploring until 40 % against the recorded default on the same seed (seed 0, 4 processes).

Each ratio divides by the seed's DDP at the sweep's best LR (the DDP rows run_one.py copied from the recorded folder);
the default's cells are the README summary's seed-0 cells (`scripts/controller_summary.py`, overlays applied).

    PYTHONPATH=/work/main python benchmarks/controller_until_s59/compare.py [RUNS_DIR]   # RUNS_DIR: /tmp/q59b
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from controller_summary import task_rows  # noqa: E402

RUNS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "runs"
TASKS = {"a0": "a", "d0": "d", "e0": "e", "f0": "f", "h0": "h"}
summary = {key: cells for key, _, processes, cells in task_rows() if processes == 4}
print("| task (seed 0, 4 processes) | start | until 0.4 | default (recorded) | change, points | until 0.4: final LR x start |")
print("|---|---|---|---|---|---|")
for out, task in TASKS.items():
    path = RUNS / out / "results.jsonl"
    if not path.exists():
        continue
    runs = [json.loads(line) for line in open(path)]
    ddp_best = min(r["eval_loss"] for r in runs if r.get("kind") == "ddp")
    for r in runs:
        name = r.get("name", "")
        if r.get("kind") == "ddp" or "until0.4" not in name:
            continue
        start = name.rsplit("_", 1)[1]
        ratio = r["eval_loss"] / ddp_best
        recorded = float(summary[task][start][1].rstrip("*"))
        scale = r["final_lr"] / r["start_lr"] if r.get("final_lr") else float("nan")
        print(f"| {task} | {start} | {ratio:.3f} | {recorded:.3f} | {100 * (ratio - recorded):+.1f} | {scale:.2f} |")
for out, task in TASKS.items():
    path = RUNS / out / "results.jsonl"
    if not path.exists():
        continue
    for r in (json.loads(line) for line in open(path)):
        if r.get("kind") != "ddp" and r.get("name", "").endswith("_split_best"):
            ddp_best = min(json.loads(x)["eval_loss"] for x in open(path) if json.loads(x).get("kind") == "ddp")
            print(f"\nCheck: the default row rerun today on {task} seed 0 at the best LR: "
                  f"{r['eval_loss'] / ddp_best:.4f} (recorded {summary[task]['best'][1]}).")
