"""Session 46: --hdet_start_race_raise_on two_steps against the default (start_last), paired on the same library.

    python benchmarks/controller_start_race/twosteps.py [SCRATCH] > benchmarks/controller_start_race/twosteps.md

Rows from SCRATCH (default /tmp: two46_<start>/<task><seed> and def46_<start>/<task><seed>, made by
queue_session46.sh), else from this folder's copies (twosteps/<kind>_<start>_<task><seed>.jsonl). Ratio: the run's
eval loss over the best DDP point of its seed folder (the folder's sweep, copied by run_one.py).
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOBS = [("low", "a3"), ("fifth", "c1"), ("fifth", "g0"), ("fifth", "c2"), ("fifth", "g1"), ("fifth", "a1"),
        ("fifth", "d2"), ("third", "i1"), ("third", "i2"), ("third", "g0"), ("third", "g2"), ("third", "c0"),
        ("third", "d2")]  # fmt: skip
FACTOR = {"low": "x0.1", "fifth": "x0.2", "third": "x1/3"}


def rows(kind: str, start: str, ts: str, scratch: Path) -> list[dict] | None:
    copy = HERE / "twosteps" / f"{kind}_{start}_{ts}.jsonl"
    path = scratch / f"{kind}46_{start}" / ts / "results.jsonl"
    if path.exists():
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
    if not copy.exists():
        return None
    return [json.loads(line) for line in open(copy)]


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp")
    print("| start | task, seed | probe loss per candidate (x 1, 2.15, 4.64, 10) | below (x 0.464) | two_steps: scale "
          "(start x scale / best) | two_steps | start_last (default) | difference |")
    print("|---|---|---|---|---|---|---|---|")
    diffs = []
    for start, ts in JOBS:
        two = rows("two", start, ts, scratch)
        if two is None:
            continue
        ddp = min(r["eval_loss"] for r in two if r.get("kind") == "ddp")
        if not [r for r in two if r.get("kind") == "hdet"]:
            continue  # still running
        run = [r for r in two if r.get("kind") == "hdet"][-1]
        race = run["start_race"]
        factor = {"low": 0.1, "fifth": 0.2, "third": 1 / 3}[start]
        ratio = run["eval_loss"] / ddp
        default = rows("def", start, ts, scratch)
        if race["scale"] > 1 and default is not None and any(r.get("kind") == "hdet" for r in default):
            d_ratio = [r for r in default if r.get("kind") == "hdet"][-1]["eval_loss"] / ddp
            cell, diff = f"{d_ratio:.3f}", f"{ratio - d_ratio:+.3f}"
            diffs.append(ratio - d_ratio)
        elif race["scale"] > 1:
            cell, diff = "(running)", ""
        else:
            cell, diff = f"{ratio:.3f} (the same run)", "0"
        losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
        below = race.get("below_probe_loss")
        print(f"| {FACTOR[start]} | {ts[:-1]} {ts[-1]} | {losses} | {'-' if below is None else f'{below:.3f}'} | "
              f"{race['scale']:.3g} ({factor * race['scale']:.2f}) | {ratio:.3f} | {cell} | {diff} |")
    if diffs:
        print(f"\nChanged runs: {len(diffs)}; two_steps minus start_last: mean {sum(diffs) / len(diffs):+.3f}, "
              f"lower on {sum(d < 0 for d in diffs)}, higher on {sum(d > 0 for d in diffs)}.")


if __name__ == "__main__":
    main()
