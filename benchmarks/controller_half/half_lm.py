"""Session 48: the default from half the sweep's best LR on the from-scratch language models a, f, h (4 processes,
seeds 0-2), next to DDP at that LR (session 47 ran x0.5 on the classifiers only: half.md).

    python benchmarks/controller_half/half_lm.py [SCRATCH] > benchmarks/controller_half/half_lm.md

Rows from SCRATCH (default /tmp/half48/<task><seed>, written by queue_session48.sh), copied into runs/ as
half_lm_<task><seed>.jsonl, else read from those copies. Ratios are to the seed's best DDP point (the recorded sweep's,
copied into each scratch folder by run_one.py).
"""

import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = ["a0", "a1", "a2", "f0", "f1", "f2", "h0", "h1", "h2"]
HALF_LR = {"a": 0.005, "f": 0.005, "h": 0.005}


def load(path: Path, copy: Path) -> list[dict] | None:
    if path.exists():
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
    return [json.loads(line) for line in open(copy)] if copy.exists() else None


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/half48")
    print("From half the best LR (x0.5), language models, 4 processes; ratio of the final eval loss to the seed's best "
          "DDP point.\n")
    print("| task, seed | race probe loss (x 1, 2.15, 4.64, 10; below) | race scale | highest / final scale (x start) "
          "| HDET | DDP at x0.5 | worse than DDP |")
    print("|---|---|---|---|---|---|---|")
    cells: dict[str, list[tuple[float, float]]] = {}
    for ts in SEEDS:
        rows = load(scratch / ts / "results.jsonl", HERE / "runs" / f"half_lm_{ts}.jsonl")
        runs = [r for r in rows or [] if r.get("kind") == "hdet"]
        if not runs:
            continue
        run = runs[-1]
        sweep = {r["start_lr"]: r["eval_loss"] for r in rows if r.get("kind") == "ddp"}
        best = min(loss for lr, loss in sweep.items() if lr != HALF_LR[ts[0]])
        ddp = sweep[HALF_LR[ts[0]]] / best
        ratio = run["eval_loss"] / best
        cells.setdefault(ts[0], []).append((ratio, ddp))
        race = run["start_race"]
        highest = max([s["scale"] for s in run["syncs"]] + [run["final_scale"]])
        losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
        print(f"| {ts[0]} {ts[1]} | {losses}; {race['below_probe_loss']:.3f} | {race['scale']:.3g} | "
              f"{highest:.3g} / {run['final_scale']:.3g} | {ratio:.3f} | {ddp:.3f} | {'yes' if ratio > ddp else 'no'} |")
    print()
    for task, pairs in cells.items():
        mine, theirs = [p[0] for p in pairs], [p[1] for p in pairs]
        sd = f", sd {statistics.stdev(mine):.3f}" if len(mine) > 1 else ""
        print(f"- {task}: HDET mean {statistics.mean(mine):.3f}{sd}; DDP at x0.5 {statistics.mean(theirs):.3f} "
              f"({len(mine)} seeds; worse than DDP on {sum(m > t for m, t in pairs)})")


if __name__ == "__main__":
    main()
