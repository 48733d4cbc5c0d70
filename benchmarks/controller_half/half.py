"""Session 47: the default from half the sweep's best LR on the pretrained classifiers, next to DDP at that LR, and
--hdet_start_race_stall_ceiling where it binds (from x0.5 here, from x1/3 paired with session 46's rows).

    python benchmarks/controller_half/half.py [SCRATCH] > benchmarks/controller_half/half.md

Rows from SCRATCH (default /tmp: half47/<task><seed> from queue_session47.sh, ceil47_<start>/<task><seed> from
queue_session47b.sh), copied into this folder (runs/), else read from the copies. Ratios are to the seed's best DDP
point (the recorded sweep's, copied into each scratch folder by run_one.py).
"""

import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RACE46 = HERE.parent / "controller_start_race" / "twosteps"
SEEDS = ["c0", "c1", "c2", "g0", "g1", "g2", "i0", "i1", "i2"]
HALF_LR = {"c": 0.00015, "g": 0.00015, "i": 0.0015}


def load(path: Path, copy: Path) -> list[dict] | None:
    if path.exists():
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
    return [json.loads(line) for line in open(copy)] if copy.exists() else None


def last_hdet(rows: list[dict] | None) -> dict | None:
    runs = [r for r in rows or [] if r.get("kind") == "hdet"]
    return runs[-1] if runs else None


def highest(run: dict) -> float:
    return max([s["scale"] for s in run["syncs"]] + [run["final_scale"]])


def binding(run: dict) -> str:
    race = run["start_race"]
    ceiling = race.get("stall_ceiling")
    binds = ceiling is not None and not race["lowered"] and highest(run) > max(ceiling, race["scale"]) * 1.0001
    return "(binds; not run)" if binds else "(does not bind)"


def main() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp")
    print("From half the best LR (x0.5), 4 processes; ratio of the final eval loss to the seed's best DDP point.\n")
    print("| task, seed | race probe loss (x 1, 2.15, 4.64, 10; below) | race scale | highest / final scale "
          "(x start) | HDET (accuracy) | DDP at x0.5 | worse than DDP | with the stall ceiling (ceiling) |")
    print("|---|---|---|---|---|---|---|---|")
    ratios, ddps, pairs = [], [], []
    for ts in SEEDS:
        rows = load(scratch / "half47" / ts / "results.jsonl", HERE / "runs" / f"half_{ts}.jsonl")
        run = last_hdet(rows)
        if run is None:
            continue
        sweep = {r["start_lr"]: r["eval_loss"] for r in rows if r.get("kind") == "ddp"}
        best = min(loss for lr, loss in sweep.items() if lr != HALF_LR[ts[0]])
        ddp = sweep.get(HALF_LR[ts[0]])
        race = run["start_race"]
        ratio = run["eval_loss"] / best
        ratios.append((ts, ratio))
        ddp_ratio = ddp / best if ddp is not None else float("nan")
        ddps.append((ts, ddp_ratio))
        ceil_run = last_hdet(load(scratch / "ceil47_half" / ts / "results.jsonl", HERE / "runs" / f"ceil_half_{ts}.jsonl"))
        ceil_cell = "-"
        if ceil_run is not None:
            pairs.append((ratio, ceil_run["eval_loss"] / best))
            ceil_cell = f"{ceil_run['eval_loss'] / best:.3f} ({ceil_run['start_race'].get('stall_ceiling'):.3g})"
        losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
        print(f"| {ts[0]} {ts[1]} | {losses}; {race['below_probe_loss']:.3f} | {race['scale']:.3g} | "
              f"{highest(run):.3g} / {run['final_scale']:.3g} | {ratio:.3f} ({run.get('eval_accuracy') or float('nan'):.3f}) | "
              f"{ddp_ratio:.3f} | {'yes' if ratio > ddp_ratio else 'no'} | {ceil_cell} |")
    print()
    for task in "cgi":
        mine = [r for ts, r in ratios if ts[0] == task]
        theirs = [r for ts, r in ddps if ts[0] == task]
        if mine:
            print(f"- {task}: HDET mean {statistics.mean(mine):.3f}, DDP at x0.5 {statistics.mean(theirs):.3f} "
                  f"({len(mine)} seeds)")
    print()
    # x1/3: the ceiling paired with session 46's two_steps rows (the default's; c2's race raises under neither rule,
    # so its start_last row is the default's too).
    print("From a third of the best LR (x1/3), the stall ceiling against the default (session 46's rows):\n")
    print("| task, seed | highest scale without / with | without | with | difference |")
    print("|---|---|---|---|---|")
    for ts, name in (("c0", "two_third_c0"), ("c2", "def_third_c2"), ("g2", "two_third_g2")):
        rows = load(scratch / "ceil47_third" / ts / "results.jsonl", HERE / "runs" / f"ceil_third_{ts}.jsonl")
        run = last_hdet(rows)
        pair = last_hdet(load(Path("/nonexistent"), RACE46 / f"{name}.jsonl"))
        if run is None or pair is None:
            continue
        best = min(r["eval_loss"] for r in rows if r.get("kind") == "ddp")
        a, b = pair["eval_loss"] / best, run["eval_loss"] / best
        pairs.append((a, b))
        print(f"| {ts[0]} {ts[1]} | {highest(pair):.3g} / {highest(run):.3g} | {a:.3f} | {b:.3f} | {b - a:+.3f} |")
    # At the best LR (queue_session47c.sh): the default's row, and with the ceiling where the default climbed above it.
    print("\nAt the best LR, 4 processes (queue_session47c.sh): the default, and the ceiling where it binds:\n")
    print("| task, seed | race probe loss (x 1, 2.15, 4.64, 10) | ceiling | highest scale without / with | without | "
          "with | difference |")
    print("|---|---|---|---|---|---|---|")
    best_pairs = []
    for ts in ["g2", "c1", "g0", "c2", "g1", "c0"]:
        rows = load(scratch / "best47" / ts / "results.jsonl", HERE / "runs" / f"best_{ts}.jsonl")
        run = last_hdet(rows)
        if run is None:
            continue
        best = min(r["eval_loss"] for r in rows if r.get("kind") == "ddp")
        ceil_run = last_hdet(load(scratch / "ceil47_best" / ts / "results.jsonl", HERE / "runs" / f"ceil_best_{ts}.jsonl"))
        race = run["start_race"]
        a = run["eval_loss"] / best
        ceiling = race.get("stall_ceiling")
        with_cells = "- | - | -"
        if ceil_run is not None:
            b = ceil_run["eval_loss"] / best
            best_pairs.append((a, b))
            with_cells = f"{highest(ceil_run):.3g} | {a:.3f} | {b:.3f} | {b - a:+.3f}"
            print(f"| {ts[0]} {ts[1]} | {', '.join(f'{x:.3f}' for x in race['probe_losses'])} | {ceiling} | "
                  f"{highest(run):.3g} / {with_cells} |")
        else:
            print(f"| {ts[0]} {ts[1]} | {', '.join(f'{x:.3f}' for x in race['probe_losses'])} | {ceiling} | "
                  f"{highest(run):.3g} / {binding(run)} | {a:.3f} | - | - |")
    if best_pairs:
        diffs = [b - a for a, b in best_pairs]
        print(f"\nAt the best LR, {len(best_pairs)} paired runs: with minus without mean {statistics.mean(diffs):+.3f}.")
    if pairs:
        diffs = [b - a for a, b in pairs]
        print(f"\nStall ceiling below the best LR, session 47's {len(pairs)} paired runs: with minus without mean {statistics.mean(diffs):+.3f}, "
              f"lower on {sum(d < 0 for d in diffs)}, higher on {sum(d > 0 for d in diffs)}.")


if __name__ == "__main__":
    main()
