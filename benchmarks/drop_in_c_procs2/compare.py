"""Session 58: the drop-in `OneCycleAutoLR` on the pretrained classifier (task c) in a hand-written loop, beside
HDETTrainer's default on the same task at the same process count and global batch (2 x 8 examples).

Each side is a ratio to its own loop's DDP sweep (per seed, the best point of that seed's sweep): the drop-in's loop
cycles AdamW's beta1 as torch's OneCycleLR does and evaluates on the same validation split, so its DDP points differ
from the Trainer's. The drop-in row is README's call plus HDETTrainer's race (`readme_race_trainer`: the candidates
on half the global batch, the start and the copy below it on a quarter, 128 probe examples spread over the set).

    python benchmarks/drop_in_c_procs2/compare.py > benchmarks/drop_in_c_procs2/comparison.md
"""

import json
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAINER_TABLE = HERE.parent / "controller_default" / "c_procs2_split.md"  # the README summary's c, 2 processes
ROW = "readme_race_trainer"
STARTS = ("best", "low", "high")


def race_note(race: dict | None) -> str:
    if not race:
        return "-"
    lowered = " (lowered)" if race.get("lowered") else ""
    ceiling = race.get("stall_ceiling")
    return f"x{race['scale']:.3g}{lowered}" + ("" if ceiling is None else f", ceiling x{ceiling:.3g}")


def trainer_cells() -> dict[str, list[str]]:
    """Per start the Trainer's per-seed ratios, mean (sd) and DDP-at-start mean, from the summary's table."""
    cells = {}
    for line in TRAINER_TABLE.read_text().splitlines():
        match = re.match(r"\| (best|low|high) \(", line)
        if match:
            parts = [c.strip() for c in line.strip().strip("|").split("|")]
            cells[match.group(1)] = parts
    return cells


runs = [json.loads(line) for line in open(HERE / "results.jsonl")]
best, ddp = {}, {}
for r in runs:
    if r["row"] == "ddp":
        ddp[(r["seed"], r["lr"])] = r
        if r["seed"] not in best or r["eval_loss"] < best[r["seed"]]["eval_loss"]:
            best[r["seed"]] = r
print("DDP sweep of the drop-in's loop (eval loss, accuracy):\n")
print("| seed | " + " | ".join(f"{lr:g}" for lr in sorted({lr for _, lr in ddp})) + " | best |")
print("|---|" + "---|" * (len({lr for _, lr in ddp}) + 1))
for seed in sorted(best):
    points = [ddp.get((seed, lr)) for lr in sorted({lr for _, lr in ddp})]
    cells = [f"{p['eval_loss']:.4f} ({p['eval_accuracy']:.3f})" if p else "-" for p in points]
    print(f"| {seed} | " + " | ".join(cells) + f" | {best[seed]['lr']:g} |")

print("\n| start | seed | race | drop-in: x best DDP | accuracy | DDP at the start LR | worse than that DDP |")
print("|---|---|---|---|---|---|---|")
means = {}
for start in STARTS:
    for seed in sorted(best):
        r = next((x for x in runs if x["name"] == f"{ROW}_{start}_s{seed}"), None)
        if r is None:
            continue
        ratio = r["eval_loss"] / best[seed]["eval_loss"]
        at = ddp.get((seed, r["lr"]))
        at_ratio = at["eval_loss"] / best[seed]["eval_loss"] if at else None
        means.setdefault(start, []).append((ratio, at_ratio))
        worse = "-" if at is None else ("yes" if r["eval_loss"] > at["eval_loss"] else "no")
        print(
            f"| {start} (x{r['lr'] / 3e-4:g}) | {seed} | {race_note(r.get('start_race'))} | {ratio:.3f} | "
            f"{r['eval_accuracy']:.3f} | {'-' if at_ratio is None else f'{at_ratio:.3f}'} | {worse} |"
        )

trainer = trainer_cells()
print("\n| start | drop-in: mean (sd) over seeds | its DDP at the start LR | HDETTrainer (c, 2 processes) | its DDP |")
print("|---|---|---|---|---|")
for start in STARTS:
    values = means.get(start, [])
    if not values:
        continue
    ratios = [v[0] for v in values]
    sd = statistics.pstdev(ratios) if len(ratios) > 1 else 0.0
    ats = [v[1] for v in values if v[1] is not None]
    t = trainer.get(start)
    print(
        f"| {start} | {statistics.mean(ratios):.3f} ({sd:.3f}), {len(ratios)} seeds | "
        f"{statistics.mean(ats):.3f} | {t[-4] if t else '-'} | {t[-2] if t else '-'} |"
    )

# Plain DDP in the same loop at the LR the race lowered each 3x-above start to (queue_lowered.sh): what that LR costs.
lowered_path = HERE / "ddp_at_lowered" / "results.jsonl"
if lowered_path.exists():
    print("\nFrom 3x above the race lowered every start one step (x0.464: 4.18e-4, 1.39x the sweep's best). Plain DDP in")
    print("the same loop at that LR:\n")
    print("| seed | DDP at 4.18e-4: x best DDP (accuracy) | HDET from 3x above: x best DDP | HDET / that DDP |")
    print("|---|---|---|---|")
    at_lowered, hdet_high = [], []
    for line in open(lowered_path):
        r = json.loads(line)
        seed = r["seed"]
        high = next(x for x in runs if x["name"] == f"{ROW}_high_s{seed}")
        at_lowered.append(r["eval_loss"] / best[seed]["eval_loss"])
        hdet_high.append(high["eval_loss"] / best[seed]["eval_loss"])
        print(
            f"| {seed} | {at_lowered[-1]:.3f} ({r['eval_accuracy']:.3f}) | {hdet_high[-1]:.3f} | "
            f"{high['eval_loss'] / r['eval_loss']:.3f} |"
        )
    print(f"| mean | {statistics.mean(at_lowered):.3f} | {statistics.mean(hdet_high):.3f} | |")
