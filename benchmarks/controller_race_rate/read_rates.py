"""Session 53 screen: each race copy's probe loss at steps 20, 40 and 60 of the start race (scratch patch
`benchmarks/controller_today_s53/race_rate_scratch.patch`), read from the per-rank files it writes.

    python read_rates.py DIR [DIR ...]     # DIR: one task-seed's $RACE_MID_DIR (rank*.jsonl, races in row order)

Per race: the start LR, each copy's mean probe loss at 20 / 40 / 60 steps, and the paired gaps start - copy (positive:
the copy is ahead) at 40 and 60 with their standard errors, and the change of the gap from 40 to 60 (the copy gaining).
"""

import json
import math
import sys
from pathlib import Path

import torch


def races(folder: Path) -> list[dict]:
    """One dict per race: {"peak_lr", "initial", copies: {multiplier: {step: tensor}}}.

    Written for the 4-process races of this screen: rank 0 races the start (x1) and the copy below, ranks 1-3 one
    candidate each and then, in their idle slot, a thrown-away x1 copy (skipped here)."""
    ranks = sorted(folder.glob("rank*.jsonl"))
    per_rank = [[json.loads(line) for line in open(f)] for f in ranks]
    out = []
    for r, entries in enumerate(per_rank):
        index = -1
        for e in entries:
            if e["step"] == "initial":
                index += 1
                if r == 0:
                    out.append({"peak_lr": e["peak_lr"], "initial": torch.tensor(e["losses"]), "copies": {}})
                continue
            m = e["multiplier"]
            if r > 0 and m == 1.0:
                continue  # an idle slot's thrown-away copy: multiplier 1 is rank 0's
            out[index]["copies"].setdefault(m, {})[e["step"]] = torch.tensor(e["losses"], dtype=torch.float64)
    return out


def gap(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    d = a - b
    return float(d.mean()), float(d.std()) / math.sqrt(d.numel())


def main() -> None:
    for folder in map(Path, sys.argv[1:]):
        for race in races(folder):
            copies = race["copies"]
            start = copies[1.0]
            print(f"{folder.name} start LR {race['peak_lr']:.3g}  initial {float(race['initial'].mean()):.3f}")
            for m in sorted(copies):
                c = copies[m]
                means = " / ".join(f"{float(c[s].mean()):.3f}" for s in (20, 40, "end") if s in c)
                line = f"  x{m:<6.3g} {means}"
                if m != 1.0 and all(s in c for s in (40, "end")):
                    g40, se40 = gap(start[40], c[40])
                    g60, se60 = gap(start["end"], c["end"])
                    trend, se_t = gap(start["end"] - start[40], c["end"] - c[40])
                    line += f"   gap40 {g40:+.3f} ({se40:.3f})  gap60 {g60:+.3f} ({se60:.3f})  gain40-60 {trend:+.3f} ({se_t:.3f})"
                print(line)


if __name__ == "__main__" and "--summary" not in sys.argv:
    main()


def summary(folders: list[Path], unigram: float) -> None:
    """Per task: the range of every copy's probe loss at the race's end against the data's unigram loss, and the copy
    below against the start at the best LR and from 3x above (the races in row order: best, 10x below, 3x above)."""
    print(f"| task | copies' probe loss at step 60 (unigram loss {unigram:.3f}; j's data 5.477) | below vs start at the best LR: gap60 / gain40-60 "
          "| from 3x above: gap60 / gain40-60 |")
    print("|---|---|---|---|")
    for folder in folders:
        best, _, high = races(folder)
        ends = [float(c["end"].mean()) for race in (best, _, high) for c in race["copies"].values()]
        cells = []
        for race in (best, high):
            start, below = race["copies"][1.0], race["copies"][min(race["copies"])]
            g, se = gap(start["end"], below["end"])
            t, se_t = gap(start["end"] - start[40], below["end"] - below[40])
            cells.append(f"{g:+.3f} ({se:.3f}) / {t:+.3f} ({se_t:.3f})")
        print(f"| {folder.name} | {min(ends):.3f}-{max(ends):.3f} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__" and "--summary" in sys.argv:
    summary([Path(a) for a in sys.argv[1:] if a != "--summary"], 5.9467)
