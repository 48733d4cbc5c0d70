"""Session 46: --hdet_start_race_stall_ceiling (rows _twosteps_ceil) against the same start without it, paired on
the same library behaviour.

    python benchmarks/controller_start_race/stall_ceiling.py [SCRATCH] > benchmarks/controller_start_race/stall_ceiling.md

Rows from SCRATCH (default /tmp: ceil46_<start>/<task><seed>, made by queue_session46c.sh), else this folder's copies
(stall_ceiling/<start>_<task><seed>.jsonl). The pair without the ceiling: the two_steps row of queue_session46.sh
where the race raised under two_steps (twosteps/two_<start>_<task><seed>.jsonl), else the default's row (the same
race decision: twosteps/def_..., or def46_<start>/ in SCRATCH for the best-LR and x1/3 rows of _46b.sh and _46c.sh).
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOBS = [("fifth", "c2"), ("fifth", "g1"), ("third", "i2"), ("third", "c1"), ("third", "c2"), ("third", "g1"),
        ("best", "c0"), ("best", "c1"), ("best", "c2")]  # fmt: skip
FACTOR = {"fifth": "x0.2", "third": "x1/3", "best": "x1"}


def load(path: Path, copy: Path) -> list[dict] | None:
    if path.exists():
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
    return [json.loads(line) for line in open(copy)] if copy.exists() else None


def last_hdet(rows: list[dict] | None) -> dict | None:
    runs = [r for r in rows or [] if r.get("kind") == "hdet"]
    return runs[-1] if runs else None


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp")
    print("| start | task, seed | stall ceiling (start x) | highest scale without / with | without the ceiling | with | "
          "difference |")
    print("|---|---|---|---|---|---|---|")
    diffs = []
    for start, ts in JOBS:
        rows = load(scratch / f"ceil46_{start}" / ts / "results.jsonl", HERE / "stall_ceiling" / f"{start}_{ts}.jsonl")
        run = last_hdet(rows)
        if run is None:
            continue
        ddp = min(r["eval_loss"] for r in rows if r.get("kind") == "ddp")
        pair = None
        for name in (f"two_{start}_{ts}", f"def_{start}_{ts}"):
            if (HERE / "twosteps" / f"{name}.jsonl").exists():
                pair = last_hdet(load(Path("/nonexistent"), HERE / "twosteps" / f"{name}.jsonl"))
                break
        if pair is None:
            pair = last_hdet(load(scratch / f"def46_{start}" / ts / "results.jsonl",
                                  HERE / "stall_ceiling" / f"without_{start}_{ts}.jsonl"))  # fmt: skip
        if pair is None:
            continue
        highest = [max([s["scale"] for s in r["syncs"]] + [r["final_scale"]]) for r in (pair, run)]
        ratios = [pair["eval_loss"] / ddp, run["eval_loss"] / ddp]
        diffs.append(ratios[1] - ratios[0])
        ceiling = run["start_race"].get("stall_ceiling")
        print(f"| {FACTOR[start]} | {ts[:-1]} {ts[-1]} | {'-' if ceiling is None else f'{ceiling:.3g}'} | "
              f"{highest[0]:.3g} / {highest[1]:.3g} | {ratios[0]:.3f} | {ratios[1]:.3f} | {diffs[-1]:+.3f} |")
    if diffs:
        changed = [d for d in diffs if d != 0]
        print(f"\n{len(diffs)} runs, {len(changed)} changed; with minus without: mean {sum(diffs) / len(diffs):+.3f}, "
              f"lower on {sum(d < 0 for d in diffs)}, higher on {sum(d > 0 for d in diffs)}.")


if __name__ == "__main__":
    main()
