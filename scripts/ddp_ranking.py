"""When does a run's own loss tell a good LR from a worse one? Plain DDP trajectories, from recorded results.

For each DDP row of a folder written by `scripts/benchmark_quality.py` (``results.jsonl``, its
``train_loss_curve``), the train loss smoothed over a window, at fractions of the run; and for every other LR
its *information time*: the earliest fraction of the run from which, at every later logged step, the smoothed
train loss ranks that LR against the best LR as their final eval losses do. Before that time even a full,
independent trajectory at each LR (more than HDET's replicas can see: in ``shared`` mode they follow one
trajectory) would point the wrong way or nowhere, so no controller that reads the run's own losses can act
on the right answer earlier. BENCHMARKS.md, "The controller", reading 16.

    python scripts/ddp_ranking.py benchmarks/controller_1000_seed1 benchmarks/controller_seed1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hdet_hf.testing.benchmarks import read_results  # noqa: E402

FRACTIONS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)


def smoothed(curve: Sequence[Sequence[float]], window: int) -> list[tuple[int, float]]:
    """``(step, mean loss of the logged points in (step - window, step])`` for every logged step."""
    points = [(int(step), float(loss)) for step, loss in curve]
    out = []
    for step, _ in points:
        inside = [loss for s, loss in points if step - window < s <= step]
        out.append((step, sum(inside) / len(inside)))
    return out


def information_time(
    curve: Sequence[tuple[int, float]], best_curve: Sequence[tuple[int, float]], worse_at_end: bool, steps: int
) -> float | None:
    """Earliest fraction of the run after which every shared logged step ranks ``curve`` against
    ``best_curve`` as the final evals do (``worse_at_end``: the curve's run ended with the higher eval loss).
    None when the last logged step still ranks them the other way."""
    best = dict(best_curve)
    shared = [(step, loss, best[step]) for step, loss in curve if step in best]
    last_wrong = 0
    for step, loss, best_loss in shared:
        if (loss > best_loss) != worse_at_end:
            last_wrong = step
    if shared and last_wrong == shared[-1][0]:
        return None
    following = [step for step, _, _ in shared if step > last_wrong]
    return following[0] / steps if following else None


def ranking_table(rows: Sequence[dict[str, Any]], window_share: float) -> dict[str, Any]:
    """The smoothed DDP losses at ``FRACTIONS`` and each LR's information time against the best LR."""
    ddp = sorted(
        (r for r in rows if r.get("kind") == "ddp" and r.get("train_loss_curve")), key=lambda r: r["start_lr"]
    )
    if len(ddp) < 2:
        raise ValueError("need at least two DDP rows with a recorded train_loss_curve")
    steps = int(ddp[0]["steps"])
    window = max(1, round(window_share * steps))
    best = min(ddp, key=lambda r: r["eval_loss"])
    curves = {r["start_lr"]: smoothed(r["train_loss_curve"], window) for r in ddp}
    at_fraction = {}
    for row in ddp:
        curve = curves[row["start_lr"]]
        values = []
        for fraction in FRACTIONS:
            target = fraction * steps
            before = [loss for step, loss in curve if step <= target]
            values.append(before[-1] if before else None)
        at_fraction[row["start_lr"]] = values
    info = {
        r["start_lr"]: information_time(
            curves[r["start_lr"]], curves[best["start_lr"]], r["eval_loss"] > best["eval_loss"], steps
        )
        for r in ddp
        if r is not best
    }
    return {"steps": steps, "window": window, "best_lr": best["start_lr"], "rows": ddp, "at": at_fraction,
            "information_time": info}


def render(folder: Path, table: dict[str, Any]) -> str:
    best_eval = min(r["eval_loss"] for r in table["rows"])
    lines = [
        f"## {folder} ({table['steps']} steps; train loss averaged over the last {table['window']} steps)",
        "",
        "| DDP LR | eval loss (ratio) | " + " | ".join(f"{f:.0%}" for f in FRACTIONS) + " | information time vs best |",
        "|---|---|" + "---|" * len(FRACTIONS) + "---|",
    ]
    for row in table["rows"]:
        lr = row["start_lr"]
        cells = ["" if v is None else f"{v:.3f}" for v in table["at"][lr]]
        if lr == table["best_lr"]:
            info = "(best)"
        else:
            t = table["information_time"][lr]
            info = "never" if t is None else f"{t:.0%}"
        lines.append(
            f"| {lr:g} | {row['eval_loss']:.4f} ({row['eval_loss'] / best_eval:.3f}) | " + " | ".join(cells)
            + f" | {info} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="benchmark_quality output folders")
    parser.add_argument("--window", type=float, default=0.05, help="smoothing window, a share of the run")
    args = parser.parse_args(argv)
    for folder in args.folders:
        rows = read_results(folder / "results.jsonl")
        print(render(folder, ranking_table(rows, args.window)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
