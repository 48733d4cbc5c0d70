"""Paired comparison of each scratch folder: the _pw0.33 rows against the default's, as ratios to DDP at the best LR."""

import json
from pathlib import Path

R = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4"
P = R + "_pw0.33"
BEST = {"bp": 0.03, "a": 0.01, "d": 0.003, "e": 0.01, "f": 0.01, "h": 0.01, "c": 0.0003, "g": 0.0003, "i": 0.003}


def cell(row: dict | None, ref: float) -> str:
    return f"{row['eval_loss'] / ref:.4f}(lr {row.get('final_lr') or 0:.3g})" if row else "-"


for folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if not (folder / "results.jsonl").exists() or folder.name.startswith("check"):
        continue
    rows = {r["name"]: r for r in map(json.loads, open(folder / "results.jsonl"))}
    best = BEST[folder.name.rstrip("0123456789")]
    ddp = [r for r in rows.values() if r["kind"] == "ddp" and abs(r["start_lr"] - best) / best < 1e-6]
    ref = ddp[0]["eval_loss"]
    cells = [f"{s}: pw {cell(rows.get(f'{P}_{s}'), ref)} base {cell(rows.get(f'{R}_{s}'), ref)}" for s in ("best", "low", "high")]
    print(folder.name, " | ".join(cells))
