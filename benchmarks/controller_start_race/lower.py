"""--hdet_start_race_lowers (session 42, reading 47): the classifiers from 3x above, and every race's decision.

    python benchmarks/controller_start_race/lower.py > benchmarks/controller_start_race/lower.md

Full rows from 3x above (4 processes): `lower_nocap/<task><seed>.jsonl` (library at 9881e5d: the lowering alone) and
`lower/<task><seed>.jsonl` (f69645e: the controller capped at the lowered start), as ratios to the seed folder's DDP
at the best LR, next to the default's row from today's library behaviour (`controller_probe_share/<task><seed>`,
session 36; the race does not raise there and since then only the race changed, so it is the race default's:
c0's race row of session 40 equals it) and DDP at the start LR. The summary table's cells at 3x above
(`benchmarks/controller_default/<task>.md`) come from older libraries and differ on the classifiers by up to 0.3. Decisions: every row with a race record in those
files and in `race_only/lower_<task><seed>.jsonl`.
"""

import json
import math
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
FOLDERS = {"c": "controller_docstrings", "g": "controller_heldout_g", "i": "controller_heldout_i"}
BEST = {"c": 0.0003, "g": 0.0003, "i": 0.003}
ROW = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower"


def rows(path: Path) -> dict[str, dict]:
    return {r["name"]: r for r in map(json.loads, open(path))} if path.exists() else {}


def folder(task: str, seed: int) -> Path:
    return BENCH / (FOLDERS[task] + (f"_seed{seed}" if seed else ""))


def ddp_at(found: dict[str, dict], lr: float) -> float | None:
    return next((r["eval_loss"] for r in found.values() if r["kind"] == "ddp" and math.isclose(r["start_lr"], lr, rel_tol=1e-6)), None)


def default_ratio(task: str, seed: int, best: float) -> float:
    """The default's ratio from 3x above with today's library behaviour (see the module docstring)."""
    row = rows(HERE.parent / "controller_probe_share" / f"{task}{seed}" / "results.jsonl")[ROW.removesuffix("_race60_lower") + "_high"]
    return row["eval_loss"] / best


def main() -> None:
    print("## From 3x above, 4 processes (ratio to the sweep's best)\n")
    print("| task, seed | initial / start / below probe loss | lowered | lowering alone (final LR / best) | "
          "lowering + cap (final LR / best) | default (the race's) | DDP at the start LR |")
    print("|---|---|---|---|---|---|---|")
    means: dict[str, list[list[float]]] = {}
    for task in FOLDERS:
        for seed in range(3):
            base = rows(folder(task, seed) / "results.jsonl")
            best = ddp_at(base, BEST[task])
            at_start = ddp_at(base, 3 * BEST[task])
            cells, record = [], None
            for sub in ("lower_nocap", "lower"):
                row = rows(HERE / sub / f"{task}{seed}.jsonl").get(f"{ROW}_high")
                record = record or (row or {}).get("start_race")
                cells.append(None if row is None else (row["eval_loss"] / best, row["final_lr"] / BEST[task]))
            if record is None:
                continue
            decision = f"{record['initial_probe_loss']:.3f} / {record['probe_losses'][0]:.3f} / {record['below_probe_loss']:.3f}"
            shown = [f"{c[0]:.3f} ({c[1]:.2f})" if c else "-" for c in cells]
            print(f"| {task} {seed} | {decision} | {'yes' if record.get('lowered') else 'no'} | {shown[0]} | {shown[1]} | "
                  f"{default_ratio(task, seed, best):.3f} | {at_start / best:.3f} |")
            # A race that did not lower leaves the run the default's: its cap column is that row.
            capped = cells[1][0] if cells[1] else (cells[0][0] if not record.get("lowered") and cells[0] else None)
            means.setdefault(task, []).append([cells[0][0] if cells[0] else math.nan, capped if capped else math.nan,
                                               default_ratio(task, seed, best), at_start / best])
    print("\n| task | seeds | lowering alone | lowering + cap | default | DDP at the start LR |\n|---|---|---|---|---|---|")
    for task, got in means.items():
        cols = list(zip(*got))
        cell = [f"{statistics.fmean(c):.3f}" if all(x == x for x in c) else "-" for c in cols]
        print(f"| {task} | {len(got)} | " + " | ".join(cell) + " |")
    print("\n## Every decision with --hdet_start_race_lowers (4 processes)\n")
    print("| task, seed | start | initial | probe loss per candidate (x 1, 2.15, 4.64, 10) | below (x 0.464) | scale |")
    print("|---|---|---|---|---|---|")
    seen = set()
    files = sorted(HERE.glob("race_only/lower_*.jsonl")) + sorted(HERE.glob("lower_nocap/*.jsonl")) + sorted(HERE.glob("lower/*.jsonl"))
    for path in files:
        name = path.stem.removeprefix("lower_")
        for row in rows(path).values():
            race = row.get("start_race")
            start = row["name"].rsplit("_", 1)[1]
            if not race or (name, start) in seen:
                continue
            seen.add((name, start))
            below = "-" if race["below_probe_loss"] is None else f"{race['below_probe_loss']:.3f}"
            print(f"| {name} | {start} | {race['initial_probe_loss']:.3f} | {', '.join(f'{x:.3f}' for x in race['probe_losses'])} | "
                  f"{below} | {race['scale']:.3g}{' (lowered)' if race.get('lowered') else ''} |")


if __name__ == "__main__":
    main()
