"""The lowering as the default (session 43, reading 48): the classifiers from 3x above at 2 processes, and every
decision the lowering rule took where it must not fire.

    python benchmarks/controller_start_race/lower_default.py [--collect] > benchmarks/controller_start_race/lower_default.md

`--collect` first copies the scratch folders of `queue_session43.sh` into this folder (full 2-process rows from
/tmp/race43l2 -> `lower_procs2/<task><seed>.jsonl`; race-only decisions from /tmp/ro43l and /tmp/ro43l2 ->
`race_only/lower43_<task><seed>.jsonl` and `race_only/lower43p2_<task><seed>.jsonl`; the raise-only runs from
/tmp/race43r2 -> `raise_only_procs2/`, task i seed 0 at 4 processes from /tmp/race43l4 -> `lower/i0.jsonl`). Full rows are ratios to the
seed folder's DDP at the best LR (`cuthalf_<task>_procs2*`), next to the 2-process default's row in that folder
(`..._cut0.5_high`: the race did not raise there) and DDP at the start LR. The decisions of session 42 (4 processes,
`lower.md`) are counted with these.
"""

import json
import math
import statistics
import sys
from pathlib import Path

# Session 42's reader, beside this one (run as a script, this folder is on the path).
from lower import ddp_at, rows

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
BEST = {"a": 0.01, "b": 0.01, "bp": 0.03, "d": 0.003, "e": 0.01, "f": 0.01, "h": 0.01, "c": 0.0003, "g": 0.0003, "i": 0.003}
ROW2 = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5"
# (scratch folder, the folder here, the file name's prefix)
SCRATCH = [("/tmp/race43l2", "lower_procs2", ""), ("/tmp/ro43l", "race_only", "lower43_"),
           ("/tmp/ro43l2", "race_only", "lower43p2_"), ("/tmp/race43r2", "raise_only_procs2", ""),
           ("/tmp/race43l4", "lower", "")]  # fmt: skip


def collect() -> None:
    for scratch, target, prefix in SCRATCH:
        for found in sorted(Path(scratch).glob("*/results.jsonl")):
            kept = [line for line in open(found) if json.loads(line).get("kind") == "hdet"]
            if kept:
                out = HERE / target / f"{prefix}{found.parent.name}.jsonl"
                out.write_text("".join(kept))


def cell(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


def progress_ratio(race: dict) -> float:
    """How much probe loss the copy below removed from the initial weights', per unit the start's copy removed."""
    removed = race["initial_probe_loss"] - race["probe_losses"][0]
    below = race["initial_probe_loss"] - race["below_probe_loss"]
    return below / removed if removed > 0 else math.inf


def full_rows() -> None:
    print("## From 3x above, 2 processes (ratio to the sweep's best)\n")
    print("| task, seed | initial / start / below probe loss | lowered | with the lowering (final LR / best) | "
          "raising only, today's library | 2-process default as recorded (session 30) | DDP at the start LR |")
    print("|---|---|---|---|---|---|---|")
    means: dict[str, list[list[float]]] = {}
    for task in ("c", "g", "i"):
        for seed in range(3):
            folder = BENCH / f"cuthalf_{task}_procs2{f'_seed{seed}' if seed else ''}"
            base = rows(folder / "results.jsonl")
            row = rows(HERE / "lower_procs2" / f"{task}{seed}.jsonl").get(f"{ROW2}_race60_lower_high")
            if row is None:
                continue
            best, at_start = ddp_at(base, BEST[task]), ddp_at(base, 3 * BEST[task])
            default = base[f"{ROW2}_high"]["eval_loss"] / best
            race = row["start_race"]
            decision = f"{race['initial_probe_loss']:.3f} / {race['probe_losses'][0]:.3f} / {race['below_probe_loss']:.3f}"
            ratio = row["eval_loss"] / best
            # A race that did not lower (nor raise) leaves the run the raise-only default's, bit for bit.
            raising = rows(HERE / "raise_only_procs2" / f"{task}{seed}.jsonl").get(f"{ROW2}_race60_high")
            raising = raising["eval_loss"] / best if raising else (ratio if not race["lowered"] else math.nan)
            print(f"| {task} {seed} | {decision} | {'yes' if race['lowered'] else 'no'} | {ratio:.3f} "
                  f"({row['final_lr'] / BEST[task]:.2f}) | {cell(raising)}{'' if race['lowered'] else ' (the same run)'} | "
                  f"{default:.3f} | {at_start / best:.3f} |")
            means.setdefault(task, []).append([ratio, raising, default, at_start / best])
    print("\n| task | seeds | with the lowering | raising only, today's library | 2-process default as recorded | "
          "DDP at the start LR |\n|---|---|---|---|---|---|")
    for task, got in means.items():
        print(f"| {task} | {len(got)} | " + " | ".join(cell(statistics.fmean(c)) for c in zip(*got)) + " |")


def decisions() -> None:
    print("\n## Every decision of the lowering rule (probe losses; progress = what the copy below removed from the "
          "initial weights' probe loss / what the start's copy removed; it lowers at >= 2 with the copy below 2 se "
          "ahead)\n")
    print("| processes | task, seed | start | initial | start's copy | below (x 0.464) | progress | scale |")
    print("|---|---|---|---|---|---|---|---|")
    sources = [(4, "race_only/lower_*.jsonl"), (4, "lower_nocap/*.jsonl"), (4, "race_only/lower43_*.jsonl"),
               (2, "lower_procs2/*.jsonl"), (2, "race_only/lower43p2_*.jsonl")]  # fmt: skip
    seen, counts = set(), {}
    for procs, pattern in sources:
        for path in sorted(HERE.glob(pattern)):
            name = path.stem.split("_")[-1]
            for row in rows(path).values():
                race, start = row.get("start_race"), row["name"].rsplit("_", 1)[1]
                if not race or race.get("initial_probe_loss") is None or (procs, name, start) in seen:
                    continue
                seen.add((procs, name, start))
                task = name.rstrip("0123456789")
                kind = "classifier" if task in ("c", "g", "i") else "language model"
                key = (procs, kind, start)
                counts.setdefault(key, [0, 0])
                counts[key][0] += bool(race.get("lowered"))
                counts[key][1] += 1
                below = race["below_probe_loss"]
                cells = (f"{below:.3f} | {progress_ratio(race):.2f}" if below is not None else "- | -")
                print(f"| {procs} | {name} | {start} | {race['initial_probe_loss']:.3f} | {race['probe_losses'][0]:.3f} | "
                      f"{cells} | {race['scale']:.3g}{' (lowered)' if race.get('lowered') else ''} |")
    print("\n| processes | tasks | start | lowered / races |\n|---|---|---|---|")
    for (procs, kind, start), (low, n) in sorted(counts.items()):
        print(f"| {procs} | {kind} | {start} | {low} / {n} |")


def main() -> None:
    if "--collect" in sys.argv[1:]:
        collect()
    full_rows()
    decisions()


if __name__ == "__main__":
    main()
