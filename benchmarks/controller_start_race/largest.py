"""--hdet_start_race_raise_to largest (session 44, reading 49): where a race that raises starts the run.

    python benchmarks/controller_start_race/largest.py --collect  # copy queue_session44.sh's scratch rows in
    python benchmarks/controller_start_race/largest.py > benchmarks/controller_start_race/largest.md

Every race from 10x below run with the option: `largest/race_only/<task><seed>.jsonl` (the decision) and
`largest/<task><seed>.jsonl` (the full row where "largest" picked another scale than the winner's, beside the
recorded race row of the same seed, the winner's: `results/` sessions 40 and 42) at 4 processes; `largest_procs2/`
likewise at 2 (recorded rows: `procs2/`, session 41). Ratios to the seed folder's DDP at the best LR. A race that
picks the same scale leaves the run bit for bit as the recorded row (the race puts back weights and random streams),
so there the two columns are one run, and `controller_default/<task>_largest.md` (`largest_tables.sh`) takes the
recorded row for it.
"""

import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
R = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4"
BEST = {"a": 0.01, "b": 0.01, "bp": 0.03, "d": 0.003, "e": 0.01, "f": 0.01, "h": 0.01, "c": 0.0003, "g": 0.0003}


def folder4(task: str, seed: int) -> str:
    sfx = f"_seed{seed}" if seed else ""
    names = {"a": "controller", "b": "controller_long", "d": "controller_heldout"}
    if task == "bp":
        return "controller_1000" + sfx if seed else "controller_1000_best0.03"
    return names.get(task, f"controller_heldout_{task}") + sfx


def folder2(task: str, seed: int) -> str:
    return f"cuthalf_{task}_procs2" + (f"_seed{seed}" if seed else "")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path)] if path.exists() else []


def ddp_at(found: list[dict], lr: float) -> float:
    """DDP's eval loss at ``lr`` in a seed folder (nan where that folder has no such run)."""
    hits = (r["eval_loss"] for r in found if r["kind"] == "ddp" and math.isclose(r["start_lr"], lr, rel_tol=1e-6))
    return next(hits, math.nan)


def table(title: str, sub: str, recorded: str, folder, row: str) -> None:
    print(f"## {title}\n")
    print("| task, seed | probe loss per candidate (x 1, 2.15, 4.64, 10) | winner's scale | largest's | "
          "winner (recorded run) | largest | DDP at the start LR |")
    print("|---|---|---|---|---|---|---|")
    pairs: dict[str, list[tuple[float, float, float]]] = {}
    for path in sorted((HERE / sub).glob("*.jsonl")):
        ts = path.stem
        task, seed = ts.rstrip("0123456789"), int(ts[len(ts.rstrip("0123456789")):])
        mine = rows(path)
        race = rows(HERE / sub / "race_only" / path.name)[0]["start_race"]
        winner_scale = race["multipliers"][race["winner"]] if race["scale"] > 1 else race["scale"]
        base = rows(BENCH / folder(task, seed) / "results.jsonl")
        best = ddp_at(base, BEST[task])
        at_start = ddp_at(base, BEST[task] / 10) / best
        old = next((r for r in rows(HERE / recorded / f"{ts}.jsonl") if r["name"] == f"{row}_low"), None)
        new = next((r for r in mine if not r.get("race_only") and r["name"].endswith("_largest_low")), None)
        old_ratio = old["eval_loss"] / best if old else math.nan
        new_ratio = new["eval_loss"] / best if new else (old_ratio if race["scale"] == winner_scale else math.nan)
        same = "" if new else " (the same run)" if race["scale"] == winner_scale else " (not run)"
        losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
        print(f"| {task} {seed} | {losses} | {winner_scale:.3g} | {race['scale']:.3g} | {old_ratio:.3f} | "
              f"{new_ratio:.3f}{same} | {at_start:.3f} |")
        if not (math.isnan(old_ratio) or math.isnan(new_ratio)):
            pairs.setdefault(task, []).append((old_ratio, new_ratio, at_start))
    print("\n| task | seeds | winner | largest | largest - winner (per seed) | DDP at the start LR |\n|---|---|---|---|---|---|")
    for task, got in pairs.items():
        old, new, ddp = zip(*got)
        diffs = " / ".join(f"{n - o:+.3f}" for o, n, _ in got)
        ddp_seen = [x for x in ddp if not math.isnan(x)]
        ddp_mean = f"{statistics.fmean(ddp_seen):.3f}" if ddp_seen else "-"
        print(f"| {task} | {len(got)} | {statistics.fmean(old):.3f} | {statistics.fmean(new):.3f} | {diffs} | {ddp_mean} |")
    print()


def collect(scratch: dict[str, str]) -> None:
    """Copy the queue's HDET rows into `largest*/` (race-only rows apart) with the recorded winner's row beside."""
    for sub, recorded, row in (("largest", "results", f"{R}_race60_low"), ("largest_procs2", "procs2", f"{R}_cut0.5_race60_low")):
        (HERE / sub / "race_only").mkdir(parents=True, exist_ok=True)
        for run in sorted(Path(scratch[f"{sub}/race_only"]).iterdir()):
            races = [r for r in rows(run / "results.jsonl") if r["kind"] == "hdet"]
            (HERE / sub / "race_only" / f"{run.name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in races))
            full = [r for r in rows(Path(scratch[sub]) / run.name / "results.jsonl") if r["kind"] == "hdet"]
            full += [r for r in rows(HERE / recorded / f"{run.name}.jsonl") if r["name"] == row]
            (HERE / sub / f"{run.name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in full))


def main() -> None:
    if sys.argv[1:] == ["--collect"]:
        collect({"largest/race_only": "/tmp/ro44", "largest": "/tmp/full44",
                 "largest_procs2/race_only": "/tmp/ro44_2", "largest_procs2": "/tmp/full44_2"})
        return
    table("From 10x below, 4 processes (ratio to the sweep's best)", "largest", "results", folder4, f"{R}_race60")
    table("From 10x below, 2 processes", "largest_procs2", "procs2", folder2, f"{R}_cut0.5_race60")


if __name__ == "__main__":
    main()
