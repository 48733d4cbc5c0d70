"""How large one controller move is at 2 and at 4 processes (session 30, reading 35): from the recorded runs of
the default, the median |hypergradient| over the converges where the controller moved (delta != 0), per task and
start. No runs; reads the folders named below.

    python benchmarks/controller_default/move_sizes.py > benchmarks/controller_default/move_sizes.md
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH.parent))
from hdet_hf.testing.benchmarks import read_results  # noqa: E402

PREFIX = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1"
# The default's row in each folder, newest first (older rows stand in where the later settings did not change
# the run: controller_default/README.md).
ROWS_4 = ("_ties_mr4", "_ties", "")
ROWS_2 = ("_ties_mr4_abstainraises", "_ties_mr4")
FOLDERS = {  # task: (4 processes, 2 processes)
    "a": ("controller", "abstainraises_procs2"),
    "f": ("controller_heldout_f", "heldout2_f_procs2"),
    "h": ("controller_heldout_h", "heldout2_h_procs2"),
    "d": ("controller_heldout", "heldout2_d_procs2"),
    "e": ("controller_heldout_e", "heldout2_e_procs2"),
    "c": ("controller_docstrings", "abstainraises_c_procs2"),
    "g": ("controller_heldout_g", "abstainraises_g_procs2"),
    "i": ("controller_heldout_i", "heldout2_i_procs2"),
}
STARTS = ("best", "low", "high")


def moves(folder: str, rows: tuple[str, ...]) -> dict[str, list[float]]:
    """|delta| of every converge that moved, per start, over seeds 0-2 of ``folder``."""
    out: dict[str, list[float]] = {s: [] for s in STARTS}
    for suffix in ("", "_seed1", "_seed2"):
        records = {r["name"]: r for r in read_results(BENCH / f"{folder}{suffix}" / "results.jsonl")}
        for start in STARTS:
            record = next((records[n] for row in rows if (n := f"{PREFIX}{row}_{start}") in records), None)
            if record is not None:
                out[start] += [abs(s["delta"]) for s in record["syncs"] if s["delta"]]
    return out


def main() -> None:
    print("| task | start | 4 processes: median (moves) | 2 processes: median (moves) |")
    print("|---|---|---|---|")
    for task, (four, two) in FOLDERS.items():
        m4, m2 = moves(four, ROWS_4), moves(two, ROWS_2)
        for start in STARTS:
            cells = [f"{statistics.median(m[start]):.3f} ({len(m[start])})" if m[start] else "- (0)" for m in (m4, m2)]
            print(f"| {task} | {start} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
