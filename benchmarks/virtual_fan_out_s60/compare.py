"""Session 60: the scratch virtual fan-out (row ..._split_virtual) against today's default and DDP, per seed.

Each ratio divides by the seed's DDP at the sweep's best LR (the DDP rows run_one.py copied from the recorded folder,
which also hold DDP at the start LR); the default's cells are the README summary's (`scripts/controller_summary.py`).

    PYTHONPATH=/work/main python benchmarks/virtual_fan_out_s60/compare.py [RUNS_DIR]   # RUNS_DIR: /tmp/q60v
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from controller_summary import per_seed, task_rows  # noqa: E402

RUNS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "runs"
BEST_LR = {"a": 0.01, "e": 0.01, "f": 0.01, "h": 0.01, "c": 3e-4}
FACTOR = {"best": 1.0, "high": 3.0, "low": 0.1}
summary = {key: cells for key, _, processes, cells in task_rows() if processes == 4}
print("| task, seed (4 processes) | start | DDP at that LR | default | virtual fan-out | virtual - default, points "
      "| virtual - DDP, points | virtual: final LR x start |")
print("|---|---|---|---|---|---|---|---|")
means: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
for task in BEST_LR:
    for seed, suffix in enumerate(("", "_seed1", "_seed2")):
        path = RUNS / f"{task}{suffix}" / "results.jsonl"
        if not path.exists():
            continue
        runs = [json.loads(line) for line in open(path)]
        ddp = {r["start_lr"]: r["eval_loss"] for r in runs if r.get("kind") == "ddp"}
        best = min(ddp.values())
        for r in runs:
            name = r.get("name", "")
            if r.get("kind") == "ddp" or "_virtual_" not in name:
                continue
            start = name.rsplit("_", 1)[1]
            default = per_seed(summary[task][start])[seed]
            at_start = next(v for lr, v in ddp.items() if abs(lr / (BEST_LR[task] * FACTOR[start]) - 1) < 1e-6)
            cells = (at_start / best, default, r["eval_loss"] / best)
            means.setdefault((task, start), []).append(cells)
            scale = r["final_lr"] / r["start_lr"] if r.get("final_lr") else float("nan")
            print(f"| {task}, {seed} | {start} | {cells[0]:.3f} | {cells[1]:.3f} | {cells[2]:.3f} | "
                  f"{100 * (cells[2] - cells[1]):+.1f} | {100 * (cells[2] - cells[0]):+.1f} | {scale:.2f} |")
print()
print("| task | start | seeds | DDP at that LR | default | virtual fan-out | virtual - default, points |")
print("|---|---|---|---|---|---|---|")
for (task, start), cells in means.items():
    m = [sum(c[i] for c in cells) / len(cells) for i in range(3)]
    print(f"| {task} | {start} | {len(cells)} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} | {100 * (m[2] - m[1]):+.1f} |")
