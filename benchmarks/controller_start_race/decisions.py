"""The start race's decisions alone (`benchmark_quality.py --race_only`), per task, seed, start and process count.

    python benchmarks/controller_start_race/decisions.py [SCRATCH4 SCRATCH2 SCRATCH4B] > benchmarks/controller_start_race/decisions.md

A race that does not raise leaves the run bit-identical to the default's (tests/test_start_race_distributed.py), so
where it did not raise its decision is all a full row would add. Rows come from SCRATCH4/<task><seed>/results.jsonl
(4 processes, default /tmp/ro41), SCRATCH2 (2 processes, default /tmp/ro41p2) and SCRATCH4B (4 processes, the races
rerun with the check below the start: from 10x below and c seed 2 from 3x above; default /tmp/ro43), else from this
folder's copies (race_only/procs4_, procs2_ and procs4b_<task><seed>.jsonl). Full 2-process rows from 10x below are in compare_procs2.py's table.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["a", "b", "bp", "d", "e", "f", "h", "c", "g", "i"]
STARTS = ["low", "best", "high"]


def rows(scratch: Path, procs: int, prefix: str = "") -> dict[tuple[str, int, str], dict]:
    """(task, seed, start) -> the race's record, from a scratch folder or the recorded copies."""
    found: dict[tuple[str, int, str], dict] = {}
    files = {p.name: p / "results.jsonl" for p in scratch.iterdir() if p.is_dir()} if scratch.exists() else {}
    for p in (HERE / "race_only").glob(f"{prefix or f'procs{procs}'}_*.jsonl"):
        files.setdefault(p.stem.split("_", 1)[1], p)
    for name, path in files.items():
        if not path.exists():
            continue
        task, seed = name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")) :])
        for line in open(path):
            row = json.loads(line)
            if row.get("kind") == "hdet" and row.get("start_race"):
                found[(task, seed, row["name"].rsplit("_", 1)[1])] = row["start_race"]
    return found


def main() -> None:
    scratch = [Path(a) for a in sys.argv[1:4]] or [Path("/tmp/ro41"), Path("/tmp/ro41p2"), Path("/tmp/ro43")]
    for procs, folder in zip((4, 2), scratch):
        found = rows(folder, procs)
        if procs == 4 and len(scratch) > 2:  # the 4-process races rerun with the check below the start
            found.update(rows(scratch[2], 4, "procs4b"))
        print(f"## {procs} processes\n")
        print("| task | seed | start | probe loss per candidate (LR x 1, 2.15, 4.64, 10) | start last | falls to "
              "winner | winner gap / se | below the start (x 0.464) | scale |")
        print("|---|---|---|---|---|---|---|---|---|")
        raised: dict[str, list[int]] = {s: [0, 0] for s in STARTS}
        for task in ORDER:
            for start in STARTS:
                for seed in range(5):  # task a has seeds 3-4 (session 42)
                    race = found.get((task, seed, start))
                    if race is None:
                        continue
                    t = race["gap"] / race["standard_error"] if race["standard_error"] else float("nan")
                    losses = ", ".join(f"{x:.3f}" for x in race["probe_losses"])
                    falls = race.get("falls_to_winner")
                    below = race.get("below_probe_loss")
                    below_cell = "-" if below is None else f"{below:.3f}"
                    print(f"| {task} | {seed} | {start} | {losses} | {'yes' if race['start_came_last'] else 'no'} | "
                          f"{'-' if falls is None else 'yes' if falls else 'no'} | {t:.1f} | {below_cell} | {race['scale']:.3g} |")
                    raised[start][0] += race["scale"] > 1.0001
                    raised[start][1] += 1
        print("\nRaised: " + "; ".join(f"{s}: {r} of {n}" for s, (r, n) in raised.items() if n) + "\n")


if __name__ == "__main__":
    main()
