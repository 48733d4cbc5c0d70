"""The base LR paths of chosen HDET rows side by side: one panel per results folder of
`scripts/benchmark_quality.py`, one line per row, the folder's best DDP LR dashed.

    python scripts/controller_paths.py benchmarks/controller_seed2 benchmarks/controller_heldout \
        --rows shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_high,..._agreemean_floor_high \
        --out benchmarks/controller_floor/paths.png
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def load_rows(folder: Path) -> dict[str, dict[str, Any]]:
    """The folder's results.jsonl by row name (a rerun row replaces an earlier one of that name)."""
    rows: dict[str, dict[str, Any]] = {}
    with open(folder / "results.jsonl") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[row["name"]] = row
    return rows


def best_ddp(rows: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    ddp = [r for r in rows.values() if r.get("kind") == "ddp" and r.get("eval_loss") is not None]
    return min(ddp, key=lambda r: r["eval_loss"]) if ddp else None


def plot_paths(folders: Sequence[Path], row_names: Sequence[str], out: Path, labels: Sequence[str] = ()) -> None:
    """Write ``out``: per folder, the base LR per step of each of ``row_names`` found there."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = 2 if len(folders) == 4 else min(len(folders), 3)
    nrows = -(-len(folders) // ncols)
    fig = Figure(figsize=(4.6 * ncols, 3.4 * nrows))
    FigureCanvasAgg(fig)
    for i, folder in enumerate(folders):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        rows = load_rows(folder)
        best = best_ddp(rows)
        for j, name in enumerate(row_names):
            row = rows.get(name)
            if row is None or not row.get("lr_per_step"):
                continue
            label = labels[j] if j < len(labels) else name
            ratio = f": {row['eval_loss'] / best['eval_loss']:.3f}x" if best else ""
            lrs = [v[0] if isinstance(v, list) else v for v in row["lr_per_step"]]  # first param group
            ax.plot(range(1, len(lrs) + 1), lrs, label=label + ratio)
        ax.set_yscale("log")
        if best:
            ax.axhline(best["start_lr"], color="black", linestyle="--", linewidth=1, label="best DDP peak")
            # The decade around the best LR: the last steps' decay to ~0 would flatten everything else.
            ax.set_ylim(best["start_lr"] / 30, best["start_lr"] * 10)
        ax.set_title(folder.name, fontsize=9)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.axes[0].set_ylabel("base LR (legend: eval loss / best DDP)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="results folders of benchmark_quality.py")
    parser.add_argument("--rows", required=True, help="comma-separated row names to draw in every folder")
    parser.add_argument("--labels", default="", help="comma-separated legend labels, one per row")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    labels = [s for s in args.labels.split(",") if s]
    plot_paths(args.folders, [s for s in args.rows.split(",") if s], args.out, labels)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
