"""Do the train loss and the averaged probe ask for the same direction? Per start, from recorded runs.

For every HDET row of `scripts/benchmark_quality.py` results (``results.jsonl``) whose converges recorded both
scores (``losses`` and ``probe_losses``, rows run since session 13), each controller converge's two
hypergradients, computed as the controller computes them (`hdet_hf.controller.loss_weights` on the row's
multipliers, the default adaptive temperature 1), and how often they agree: both "raise", both "lower", or
opposite directions (where ``--hdet_controller_signal_combination agree_mean`` holds the LR). BENCHMARKS.md,
"The controller", reading 18.

    python scripts/controller_votes.py benchmarks/controller_docstrings benchmarks/controller_heldout --rows _agreemean_
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hdet_hf.controller import loss_weights  # noqa: E402
from hdet_hf.testing.benchmarks import read_results  # noqa: E402

# A vote smaller than this (in log multiplier units; a saturated vote is ~0.15 with 4 replicas at spread
# 0.25) counts as "no direction".
NEUTRAL = 0.02


def vote(scores: Sequence[float], multipliers: Sequence[float]) -> float:
    """The multiplicative controller's hypergradient of one row of scores (one score per rank)."""
    log_m = torch.tensor(multipliers, dtype=torch.float64).log()
    weights = loss_weights(torch.tensor(scores, dtype=torch.float64), 1.0, "adaptive")
    return float((weights * log_m).sum() - log_m.mean())


def direction(value: float) -> str:
    return "+" if value > NEUTRAL else ("-" if value < -NEUTRAL else "0")


def agreement(row: dict[str, Any]) -> dict[str, Any]:
    """Counts of the controller converges of one run by what the two votes ask for, and the vote strings."""
    train, probe = [], []
    for sync in row.get("syncs") or []:
        if not sync.get("probe_losses"):
            continue  # the controller did not act at this converge
        train.append(vote(sync["losses"], sync["multipliers"]))
        probe.append(vote(sync["probe_losses"], sync["multipliers"]))
    pairs = [(direction(t), direction(p)) for t, p in zip(train, probe)]
    return {
        "converges": len(pairs),
        "both_raise": sum(1 for t, p in pairs if t == p == "+"),
        "both_lower": sum(1 for t, p in pairs if t == p == "-"),
        "opposite": sum(1 for t, p in pairs if {t, p} == {"+", "-"}),
        "train": "".join(t for t, _ in pairs),
        "probe": "".join(p for _, p in pairs),
    }


def render(folder: Path, rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"## {folder}",
        "",
        "| row | eval loss | converges | both raise | both lower | opposite | train votes | probe votes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        counts = agreement(row)
        lines.append(
            f"| {row['name']} | {row['eval_loss']:.4f} | {counts['converges']} | {counts['both_raise']} | "
            f"{counts['both_lower']} | {counts['opposite']} | `{counts['train']}` | `{counts['probe']}` |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="Result folders of scripts/benchmark_quality.py.")
    parser.add_argument("--rows", default="", help="Only rows whose name contains this.")
    args = parser.parse_args(argv)
    for folder in args.folders:
        rows = [
            r
            for r in read_results(folder / "results.jsonl")
            if args.rows in r["name"] and any(s.get("probe_losses") for s in r.get("syncs") or [])
        ]
        if not rows:
            print(f"## {folder}\n\nno rows with both scores recorded\n")
            continue
        print(render(folder, rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
