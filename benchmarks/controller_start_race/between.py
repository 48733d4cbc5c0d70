"""Session 45 (BENCHMARKS.md item 47): the start race from x0.2 ("fifth") and x1/3 ("third") of the sweep's best LR,
where a raise to the largest candidate that beat the start could start a run above the best LR.

    python benchmarks/controller_start_race/between.py --collect   # copy /tmp/ro45_*, /tmp/full45_*, /tmp/win45_*
    python benchmarks/controller_start_race/between.py > benchmarks/controller_start_race/between.md

Race-only decisions at 4 processes on every language-model seed (a, b', d, e, f, h) and the classifiers' (c, g, i)
seeds 0-2 (`queue_session45.sh`), then full rows where the race raised, with "largest" (the default) and, where it
raised past the winner, "winner" (`queue_session45_winner.sh`). Ratios to the seed folder's best DDP point.
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "between"
STARTS = {"fifth": 0.2, "third": 1 / 3}
SOURCES = {"race_only": "/tmp/ro45_{start}", "largest": "/tmp/full45_{start}", "winner": "/tmp/win45_{start}"}


def collect() -> None:
    for kind, pattern in SOURCES.items():
        for start in STARTS:
            source = Path(pattern.format(start=start))
            for run in sorted(source.glob("*/results.jsonl")) if source.exists() else []:
                target = HERE / kind / start / f"{run.parent.name}.jsonl"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run, target)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def main() -> None:
    print("| start | task, seed | probe loss per candidate (x 1, 2.15, 4.64, 10) | winner | scale (start x scale / best) | largest | winner's | the DDP sweep (LR: ratio) |")
    print("|---|---|---|---|---|---|---|---|")
    changed: list[tuple[str, float, float]] = []
    for start, factor in STARTS.items():
        for path in sorted((HERE / "race_only" / start).glob("*.jsonl")):
            name = path.stem
            race = [r for r in records(path) if "start_race" in r][-1]["start_race"]
            losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
            winner = race["multipliers"][race["winner"]]
            scale = race["scale"]
            cells = []
            for kind in ("largest", "winner"):
                full = HERE / kind / start / f"{name}.jsonl"
                if not full.exists():
                    cells.append("-")
                    continue
                rows = records(full)
                ddp = [r for r in rows if r.get("kind") == "ddp" and r["eval_loss"] == r["eval_loss"]]
                best = min(r["eval_loss"] for r in ddp)
                run = [r for r in rows if r.get("kind") != "ddp"][-1]
                cells.append(f"{run['eval_loss'] / best:.3f}")
                sweep = ", ".join(f"{r['start_lr']:.2g}: {r['eval_loss'] / best:.3f}" for r in sorted(ddp, key=lambda r: r["start_lr"]))
            if cells == ["-", "-"]:
                sweep = ""
            if scale != 1 and cells[1] == "-" and scale == winner:
                cells[1] = f"{cells[0]} (the same run)"
            if cells[0] != "-" and not cells[1].endswith("run)") and cells[1] != "-":
                changed.append((f"{name} x{factor:.2g}", float(cells[0]), float(cells[1])))
            lowered = " (lowered)" if race.get("lowered") else ""
            print(f"| x{factor:.2g} | {name[:-1]} {name[-1]} | {losses} | {winner:.3g} | {scale:.3g}{lowered} ({factor * scale:.2f}) | {cells[0]} | {cells[1]} | {sweep} |")
    print()
    print("Where the largest candidate was not the winner (largest - winner): " + ", ".join(
        f"{name} {largest - winner:+.3f}" for name, largest, winner in changed
    ) + f"; mean {sum(a - b for _, a, b in changed) / max(len(changed), 1):+.3f}.")


if __name__ == "__main__":
    collect() if "--collect" in sys.argv else main()
