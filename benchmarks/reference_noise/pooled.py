"""Session 57: how much of a task's difference between its 2- and 4-process cells is the DDP reference's own noise.

Every ratio in README's summary divides a run's final eval loss by that seed's DDP at the best LR, run at the same
process count. At 2 and 4 processes the global batch is the same, so DDP at the best LR is the same algorithm there
(gradients averaged over the same global batch; what differs is which process draws which dropout mask): six
draws of one reference per task. This script reads the summary's per-seed ratios (`scripts/controller_summary.py`'s
tables, overlays applied), turns them back into eval losses with each table's own DDP row, and prints, per task and
start, the mean eval loss of HDET and DDP at each process count and HDET's ratio to the reference pooled over the
six DDP runs. No runs; the targets stay as they are (ratios to each seed's own DDP).

    python benchmarks/reference_noise/pooled.py > benchmarks/reference_noise/pooled.md
"""

import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import controller_summary as summary  # noqa: E402


def ddp_row(table: Path) -> list[float]:
    """The table's "DDP at the best LR (eval loss)" row: one eval loss per seed."""
    for line in table.read_text().splitlines():
        if line.startswith("| DDP at the best LR (eval loss)"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")][1:]
            return [float(c) for c in cells if re.fullmatch(r"[0-9.]+", c)]
    raise SystemExit(f"{table}: no DDP row")


def main() -> None:
    tables = {(key, processes): name for key, _, *files in summary.TASKS for processes, name in zip((4, 2), files)}
    rows = {(key, processes): cells for key, _, processes, cells in summary.task_rows()}
    print("| task | start | HDET eval loss, 4 / 2 processes | DDP at the best LR, 4 / 2 processes "
          "| ratio to its own process count's DDP, 4 / 2 | ratio to the six DDP runs pooled, 4 / 2 |")
    print("|---|---|---|---|---|---|")
    for key, *_ in summary.TASKS:
        if (key, 2) not in rows or (key, 4) not in rows or tables[(key, 2)] is None:
            continue
        ddp = {p: ddp_row(summary.TABLES / tables[(key, p)]) for p in (4, 2)}
        pooled = statistics.mean(ddp[4] + ddp[2])
        for start in summary.STARTS:
            loss, own = {}, {}
            for p in (4, 2):
                ratios = [float(c.rstrip("*")) if c not in ("-", "") else None for c in rows[(key, p)][start][1:-4]]
                pairs = [(r, d) for r, d in zip(ratios, ddp[p]) if r is not None]
                loss[p] = statistics.mean(r * d for r, d in pairs)
                own[p] = statistics.mean(r for r, _ in pairs)
            print(f"| {key} | {start} | {loss[4]:.4f} / {loss[2]:.4f} | {statistics.mean(ddp[4]):.4f} / "
                  f"{statistics.mean(ddp[2]):.4f} | {own[4]:.3f} / {own[2]:.3f} | "
                  f"**{loss[4] / pooled:.3f} / {loss[2] / pooled:.3f}** |")


if __name__ == "__main__":
    main()
