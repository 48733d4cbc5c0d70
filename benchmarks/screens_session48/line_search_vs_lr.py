"""Session 48 screen (no runs): does the probe's line-search optimum tell a too-high LR from the right one early?

Reads every recorded 4-process shared-mode run with the engine's own per-converge optimum (``line_search_optimum`` in
its ``syncs``) and buckets each converge by the LR it ran at relative to its folder's best DDP point (start LR x the
controller's scale) and by where in the run it fell.

    python benchmarks/screens_session48/line_search_vs_lr.py > benchmarks/screens_session48/line_search_vs_lr.md
"""

import collections
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = [(0.07, 0.15, "0.1x"), (0.25, 0.4, "1/3x"), (0.4, 0.6, "0.5x"), (0.8, 1.25, "1x"), (2.2, 4.0, "3x")]
PHASES = [(0.0, 0.2), (0.2, 0.35), (0.35, 0.5)]


def bucket(ratio: float) -> str | None:
    return next((name for lo, hi, name in BUCKETS if lo <= ratio < hi), None)


def main() -> None:
    optima: dict[tuple, list[float]] = collections.defaultdict(list)
    runs: collections.Counter = collections.Counter()
    for path in sorted(ROOT.glob("**/*.jsonl")):
        rows = {}
        for line in open(path):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "name" in row and "start_lr" in row:
                rows[row["name"]] = row
        sweep = [r for r in rows.values() if r["name"].startswith("ddp_lr") and math.isfinite(r.get("eval_loss") or math.nan)]
        if len(sweep) < 3:
            continue
        best = min(sweep, key=lambda r: r["eval_loss"])["start_lr"]
        for row in rows.values():
            if not row.get("syncs") or row.get("mode") != "shared" or row.get("world_size") != 4:
                continue
            task = "classifier" if row.get("task") == "docstrings" else "language model"
            seen = False
            for sync in row["syncs"]:
                value = sync.get("line_search_optimum")
                if value is None:
                    continue
                value = math.inf if value == "inf" else float(value)
                where = sync["step"] / row["steps"]
                lr = bucket(row["start_lr"] / best * sync["scale"])
                for lo, hi in PHASES:
                    if lo <= where < hi and lr:
                        optima[(task, lo, hi, lr)].append(value)
                        seen = True
            runs[task] += seen
    print(f"Runs read: {dict(runs)} (4 processes, shared mode, with recorded optima; a file copied into two folders "
          "counts twice).\n")
    print("| task | share of the run | LR / best DDP LR | converges | m* 10th / median / 90th percentile | m* < 1 |")
    print("|---|---|---|---|---|---|")
    for key in sorted(optima, key=lambda k: (k[0], k[1], [b[2] for b in BUCKETS].index(k[3]))):
        values = optima[key]
        finite = sorted(v for v in values if math.isfinite(v))
        q10, q50, q90 = (finite[int(p * (len(finite) - 1))] if finite else math.nan for p in (0.1, 0.5, 0.9))
        task, lo, hi, lr = key
        print(f"| {task} | {lo:.2f}-{hi:.2f} | {lr} | {len(values)} | {q10:.2f} / {q50:.2f} / {q90:.2f} | "
              f"{sum(v < 1 for v in values) / len(values):.2f} |")


if __name__ == "__main__":
    main()
