"""Session 48 screen (no runs): how plain DDP runs of the recorded sweeps rank their LRs early in the run (train loss
at steps 30, 60 and 90, the run's own warm-up included) against the end (eval loss / the best point's), next to what
the start race sees (copies at a constant LR, no warm-up, one replica's batch).

    python benchmarks/screens_session48/early_ranking.py > benchmarks/screens_session48/early_ranking.md
"""

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [
    "controller_seed1", "controller_seed2", "controller_heldout", "controller_heldout_e", "controller_heldout_f",
    "controller_heldout_h", "controller_heldout_h_seed1", "controller_heldout_h_seed2", "controller_1000",
    "controller_1000_seed1", "controller_heldout_g", "controller_heldout_i",
]  # fmt: skip


def main() -> None:
    print("Train loss at steps 30 / 60 / 90 and the final eval loss over the best point's, DDP at 4 processes, per LR "
          "(x the sweep's best). **Bold**: the lowest at step 60.\n")
    print("| folder (steps) | LR: loss at 30 / 60 / 90; end |")
    print("|---|---|")
    for folder in FOLDERS:
        rows = [json.loads(line) for line in open(ROOT / folder / "results.jsonl")]
        sweep = {
            r["start_lr"]: r for r in rows
            if str(r.get("name", "")).startswith("ddp_lr") and r.get("train_loss_curve") and r.get("world_size") == 4
        }  # fmt: skip
        if not sweep:
            continue
        best = min(sweep.values(), key=lambda r: r["eval_loss"] if math.isfinite(r["eval_loss"]) else math.inf)
        at60 = {lr: dict(r["train_loss_curve"]).get(60, math.inf) for lr, r in sweep.items()}
        lowest = min(at60, key=at60.get)
        cells = []
        for lr in sorted(sweep):
            curve = dict(sweep[lr]["train_loss_curve"])
            early = " / ".join(f"{curve[s]:.3f}" if s in curve else "-" for s in (30, 60, 90))
            mark = "**" if lr == lowest else ""
            cells.append(f"{mark}{lr / best['start_lr']:.3g}x{mark}: {early}; {sweep[lr]['eval_loss'] / best['eval_loss']:.3f}")
        print(f"| {folder} ({best['steps']}) | {' &#124; '.join(cells)} |")


if __name__ == "__main__":
    main()
