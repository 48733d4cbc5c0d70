"""What the replicas' comparison says, converge by converge: the controller's raw evidence in recorded runs.

For every HDET row of `scripts/benchmark_quality.py` results (``results.jsonl``), each converge's slope of the
replicas' window train losses against ``log(multiplier)`` (least squares over the ranks not excluded):
positive means "the replicas with the smaller LR had the lower loss", i.e. "lower the LR". Per phase of
the run (a share of its steps), the mean slope, its t-statistic over the converges in the phase, and the
run's LR at the phase's end. Run on the signal map (``shared_signal_*``: the spread alone at four fixed LRs)
it shows at which LR the comparison would tell the controller to stop, next to the sweep's best LR.

    python scripts/controller_slopes.py benchmarks/controller_1000_best0.03 --rows shared_signal_ \
        --out benchmarks/controller_signal/b_1000.md
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PHASES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0)


def converge_slope(losses: Sequence[float], multipliers: Sequence[float], excluded: Sequence[int] = ()) -> float | None:
    """Least-squares slope of loss on log(multiplier) over the included, finite ranks; None without spread."""
    points = [
        (math.log(m), loss)
        for rank, (loss, m) in enumerate(zip(losses, multipliers))
        if rank not in set(excluded) and loss is not None and math.isfinite(loss) and m > 0
    ]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var < 1e-12:  # exploration over: every rank at the base value
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def phase_summary(row: dict[str, Any], phases: Sequence[float] = PHASES) -> list[dict[str, Any]]:
    """Per phase [a, b) of the run: converges, mean slope, t-statistic and the LR (start x scale) at its end."""
    steps = row["steps"]
    slopes = []
    for sync in row.get("syncs") or []:
        slope = converge_slope(sync["losses"], sync["multipliers"], sync.get("excluded") or ())
        if slope is not None:
            slopes.append((sync["step"], slope, sync.get("scale") or 1.0))
    out = []
    for low, high in zip(phases, phases[1:]):
        inside = [s for s in slopes if low * steps < s[0] <= high * steps]
        values = [s[1] for s in inside]
        mean = sum(values) / len(values) if values else math.nan
        t = math.nan
        if len(values) > 1:
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            t = mean / (sd / math.sqrt(len(values))) if sd > 0 else math.copysign(math.inf, mean)
        lr = row["start_lr"] * inside[-1][2] if inside else math.nan
        out.append({"phase": (low, high), "converges": len(values), "slope": mean, "t": t, "lr": lr})
    return out


def markdown(rows: list[dict[str, Any]], phases: Sequence[float] = PHASES) -> str:
    head = ["row", "start LR", "eval loss"] + [f"{a:g}-{b:g}" for a, b in zip(phases, phases[1:])]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        cells = []
        for p in phase_summary(row, phases):
            if not p["converges"]:
                cells.append("")
                continue
            t = "" if math.isnan(p["t"]) else f" (t {p['t']:+.1f})"
            cells.append(f"{p['slope']:+.3f}{t}, LR {p['lr']:.3g}")
        lines.append(f"| {row['name']} | {row['start_lr']:g} | {row['eval_loss']:.4f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="benchmark_quality.py output folders (with results.jsonl)")
    p.add_argument("--rows", default="shared_", help="Only rows whose name contains this (default: %(default)s)")
    p.add_argument("--out", type=Path, default=None, help="Also write the table to this markdown file")
    args = p.parse_args(argv)
    rows = []
    for folder in args.dirs:
        path = folder / "results.jsonl"
        if not path.is_file():
            p.error(f"{path} does not exist: pass a folder written by scripts/benchmark_quality.py")
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("syncs") and args.rows in row["name"]:
                rows.append(row)
    rows.sort(key=lambda r: (r["name"].rsplit("_", 1)[0], r["start_lr"]))
    text = markdown(rows)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
