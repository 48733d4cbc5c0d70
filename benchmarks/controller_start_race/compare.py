"""The start race's rows against the default's, paired per task and seed, as ratios to DDP at the best LR.

    python benchmarks/controller_start_race/compare.py [SCRATCH] > benchmarks/controller_start_race/comparison.md

The race rows come from SCRATCH/<task><seed>/results.jsonl (default /tmp/race40), else from this folder's copy
(results/<task><seed>.jsonl); the default's rows (same library behaviour) from
benchmarks/controller_probe_share/<task><seed>/results.jsonl, else (f2, h2) from the race's own folder, where they
ran beside it. A race row with no such default row (session 42: b0-b2, a3, a4) is left out: those are in
benchmarks/controller_default/<task>_race.md, against the recorded default's tables.
"""

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
R = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4"
BEST = {"b": 0.01, "bp": 0.03, "a": 0.01, "d": 0.003, "e": 0.01, "f": 0.01, "h": 0.01, "c": 0.0003, "g": 0.0003, "i": 0.003}
FACTOR = {"low": 0.1, "best": 1.0, "high": 3.0}


def rows_of(path: Path) -> dict:
    return {r["name"]: r for r in map(json.loads, open(path))} if path.exists() else {}


def _first(row) -> float:
    return row[0] if isinstance(row, list) else row


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/race40")
    names = sorted({p.name for p in scratch.iterdir() if p.is_dir()} if scratch.exists() else set())
    names += sorted(p.stem for p in (HERE / "results").glob("*.jsonl") if p.stem not in names)
    cells: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    print("## Per run\n")
    print("| task, seed | start | race60 (final LR) | race scale | race: probe losses, start came last, gap / se | "
          "default (final LR) | DDP at the start LR |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        race = rows_of(scratch / name / "results.jsonl") or rows_of(HERE / "results" / f"{name}.jsonl")
        base = rows_of(HERE.parent / "controller_probe_share" / name / "results.jsonl")
        task = name.rstrip("0123456789")
        best = BEST[task]
        ddp = {round(r["start_lr"] / best, 3): r["eval_loss"] for r in race.values() if r["kind"] == "ddp"}
        ref = ddp[1.0]
        for start, factor in FACTOR.items():
            mine = race.get(f"{R}_race60_{start}")
            theirs = base.get(f"{R}_{start}") or race.get(f"{R}_{start}")
            if mine is None or theirs is None:
                continue
            # The base LR's first row is OneCycle's start (peak / 25) x the race's scale.
            scale = _first(mine["lr_per_step"][0]) * 25 / mine["start_lr"]
            record = mine.get("start_race")
            detail = "-"
            if record:
                t = record["gap"] / record["standard_error"] if record["standard_error"] else float("nan")
                losses = ", ".join(f"{x:.3f}" for x in record["probe_losses"])
                detail = f"{losses}; {'yes' if record.get('start_came_last') else 'no'}; {t:.1f}"
            at_start = ddp.get(round(factor, 3))
            print(
                f"| {task} {name[len(task):]} | {start} | {mine['eval_loss'] / ref:.4f} ({mine['final_lr']:.3g}) | "
                f"{scale:.3g} | {detail} | {theirs['eval_loss'] / ref:.4f} ({theirs['final_lr']:.3g}) | "
                + (f"{at_start / ref:.4f} |" if at_start else "- |")
            )
            cells.setdefault((task, start), []).append(
                (mine["eval_loss"] / ref, theirs["eval_loss"] / ref, scale, at_start / ref if at_start else float("nan"))
            )
    print("\n## Mean over the seeds run\n")
    print("| task | start | seeds | race60 | default | raised (seeds) | DDP at the start LR |")
    print("|---|---|---|---|---|---|---|")
    for task in BEST:
        for start in FACTOR:
            got = cells.get((task, start))
            if not got:
                continue
            race, default, scales, ddp = zip(*got)
            raised = sum(1 for s in scales if s > 1.0001)
            ddp = [x for x in ddp if x == x]  # a seed folder without DDP at this start LR
            ddp_cell = f"{statistics.mean(ddp):.4f} ({len(ddp)} seeds)" if ddp else "-"
            print(
                f"| {task} | {start} | {len(got)} | {statistics.mean(race):.4f} | {statistics.mean(default):.4f} | "
                f"{raised} | {ddp_cell} |"
            )


if __name__ == "__main__":
    main()
