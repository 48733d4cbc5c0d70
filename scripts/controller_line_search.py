"""The probe's line-search optimum m* at every recorded converge of chosen HDET rows, by start (best LR, 10x
below, 3x above): the evidence behind ``--hdet_controller_line_search_threshold`` (`hdet_hf/line_search.py`).

For each results folder of `scripts/benchmark_quality.py` and each row ``<rows>_{best,low,high}``, every
regular converge with probe losses gives m* (a parabola through the replicas' probe losses against their
multipliers; infinite when the line is straight). The table counts converges with m* at or above the threshold
and, of those, the ones where the converge before was too (where the line-search raise may act) and the
controller's gated hypergradient asked for a raise (where it sizes that raise) or was exactly 0 (a tie, which
``--hdet_controller_line_search_breaks_ties`` breaks). Since a run is the same until a rule first acts, the first
of these on a row recorded without the rule is where that rule would have changed it. The fits use the
multipliers the replicas stepped at, as the engine does (narrowed by ``--hdet_lr_fan_out_scale`` in step-size
intervals, read from the row's recorded ``hdet_config``). ``--plot`` draws m* against the run's fraction, one
colour per start.

    python scripts/controller_line_search.py benchmarks/controller benchmarks/controller_heldout \
        --rows shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor --threshold 4 \
        --plot benchmarks/controller_line_search/optima.png
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from controller_paths import load_rows  # noqa: E402

from hdet_hf.config import MIN_FRACTION_SYNC_INTERVAL  # noqa: E402
from hdet_hf.horizon import compares_by_offsets  # noqa: E402
from hdet_hf.learning_rates import narrowed  # noqa: E402
from hdet_hf.line_search import line_search_optimum  # noqa: E402

STARTS = ("best", "low", "high")
# Where an infinite optimum is drawn (log axis).
PLOT_CEILING = 100.0


def fan_out_scale(config: dict[str, Any]) -> float:
    """The fraction of the spread a step-size interval stepped at (1 without a comparison horizon)."""
    if not config.get("comparison_horizon"):
        return 1.0
    if "lr_fan_out_scale" in config:
        return float(config["lr_fan_out_scale"])
    if config.get("lr_fan_out_spread"):  # the setting's first name (session 18, commit 20d181b): the spread itself
        return float(config["lr_fan_out_spread"]) / float(config["lr_spread"])
    return 1.0


def stepped_multipliers(row: dict[str, Any], sync: dict[str, Any]) -> list[float]:
    """The multipliers the replicas of the interval ending at ``sync`` stepped at: the recorded (nominal) ones,
    narrowed in a step-size interval that alternated with offset intervals (decided as the engine does, from the
    recorded config)."""
    config, multipliers = row.get("hdet_config") or {}, list(sync["multipliers"])
    scale = fan_out_scale(config)
    if scale == 1.0:
        return multipliers
    steps = int(row["steps"])
    period = config["sync_interval"]
    period = int(period) if period >= 1 else max(int(round(period * steps)), MIN_FRACTION_SYNC_INTERVAL)
    start = config.get("comparison_horizon_start", 0.0)
    horizon_start = int(start) if start >= 1 else int(round(start * steps))
    interval_start = int(sync["step"]) - period
    # --hdet_fan_out_until_direction: before the second regular converge the horizon has no direction, so the
    # engine fans out by step size there instead.
    without_direction = config.get("fan_out_until_direction", False) and interval_start < 2 * period
    if not without_direction and compares_by_offsets(
        interval_start, period, horizon_start, config.get("early_comparison", "one_interval")
    ):
        return multipliers
    return [narrowed(m, scale) for m in multipliers]


def optima(row: dict[str, Any]) -> list[tuple[float, float, float | None]]:
    """(fraction of the run, m*, gated delta) for each converge of ``row`` with distinct probe losses."""
    out = []
    for sync in row.get("syncs") or []:
        probes = sync.get("probe_losses") or []
        if len(set(probes)) < 2:
            continue
        m_star = line_search_optimum(
            torch.tensor(stepped_multipliers(row, sync), dtype=torch.float64), torch.tensor(probes, dtype=torch.float64)
        )
        if m_star is not None:
            out.append((sync["step"] / row["steps"], m_star, sync.get("delta")))
    return out


def optima_by_start(folder: Path, prefix: str) -> Iterator[tuple[str, list[tuple[float, float, float | None]]]]:
    """(start, `optima` of the row ``<prefix>_<start>``) for each start whose row the folder has."""
    rows = load_rows(folder)
    for start in STARTS:
        row = rows.get(f"{prefix}_{start}")
        if row is not None:
            yield start, optima(row)


def summarise(folders: Sequence[Path], prefix: str, threshold: float) -> list[dict[str, Any]]:
    """One line per folder and start: converges, how many reach the threshold, and where a raise would act."""
    lines = []
    for folder in folders:
        for start, points in optima_by_start(folder, prefix):
            far = [i for i, (_, m, _) in enumerate(points) if m >= threshold]
            twice = [i for i in far if i > 0 and points[i - 1][1] >= threshold]
            acting = [points[i] for i in twice if (points[i][2] or 0.0) > 0.0]
            ties = [points[i] for i in twice if points[i][2] == 0.0]
            lines.append({
                "folder": folder.name, "start": start, "converges": len(points), "far": len(far),
                "acting_at": [round(f, 2) for f, _, _ in acting], "ties_at": [round(f, 2) for f, _, _ in ties],
                "median": sorted(m for _, m, _ in points)[len(points) // 2] if points else math.nan,
            })
    return lines


def plot(folders: Sequence[Path], prefix: str, threshold: float, out: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = min(len(folders), 3)
    nrows = -(-len(folders) // ncols)
    fig = Figure(figsize=(4.4 * ncols, 3.3 * nrows))
    FigureCanvasAgg(fig)
    colours = {"best": "tab:green", "low": "tab:blue", "high": "tab:red"}
    labels = {"best": "best LR", "low": "10x below", "high": "3x above"}
    for i, folder in enumerate(folders):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        for start, points in optima_by_start(folder, prefix):
            xs = [f for f, _, _ in points]
            ys = [min(max(m, 0.1), PLOT_CEILING) for _, m, _ in points]
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, color=colours[start], label=labels[start])
        ax.axhline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        ax.set_yscale("log")
        ax.set_ylim(0.1, PLOT_CEILING * 1.5)
        ax.set_title(folder.name, fontsize=9)
        ax.set_xlabel("fraction of the run")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.axes[0].set_ylabel(f"line-search optimum m* (straight line: {PLOT_CEILING:g})")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="results folders of benchmark_quality.py")
    parser.add_argument("--rows", required=True, help="row prefix: <rows>_best, <rows>_low, <rows>_high are read")
    parser.add_argument("--threshold", type=float, default=4.0, help="the threshold to count and draw")
    parser.add_argument("--plot", type=Path, default=None, help="also write this PNG")
    args = parser.parse_args(argv)
    print("| folder | start | converges with a fit | m* >= threshold | a raise would act at (fraction of the run) "
          "| a tie would be broken at | median m* |")
    print("|---|---|---|---|---|---|---|")
    for line in summarise(args.folders, args.rows, args.threshold):
        acting = ", ".join(f"{f:g}" for f in line["acting_at"]) or "-"
        ties = ", ".join(f"{f:g}" for f in line["ties_at"]) or "-"
        print(f"| {line['folder']} | {line['start']} | {line['converges']} | {line['far']} | {acting} | {ties} "
              f"| {line['median']:.2f} |")
    if args.plot is not None:
        plot(args.folders, args.rows, args.threshold, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
