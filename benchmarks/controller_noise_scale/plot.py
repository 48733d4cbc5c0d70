"""The readings of `read_noise.py` in one figure and one table (session 37, reading 42).

    python benchmarks/controller_noise_scale/plot.py > benchmarks/controller_noise_scale/readings.md
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = {"controller": "a", "controller_heldout_f": "f", "controller_heldout": "d", "controller_heldout_g": "g"}
STARTS = {"0.1": ("10x below", "tab:blue"), "1": ("best LR", "tab:green"), "3": ("3x above", "tab:red")}


def load() -> dict[tuple[str, str], list[dict]]:
    runs = {}
    for path in sorted(HERE.glob("*.jsonl")):
        folder, factor = path.stem.rsplit("_", 1)
        if folder in TASKS and factor in STARTS:
            runs[(folder, factor)] = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    return runs


def table(runs: dict[tuple[str, str], list[dict]]) -> str:
    lines = []
    for folder, task in TASKS.items():
        for factor, (label, _) in STARTS.items():
            rows = runs.get((folder, factor))
            if not rows:
                continue
            cells = " ".join(f"{r['m_star']:.2g}" for r in rows)
            ls_lr = " ".join(f"{r['m_star'] * r['lr'] / r['best_lr_now']:.2g}" for r in rows)
            est = " ".join(f"{r['ratio']:.2g}" for r in rows)
            lines.append(f"| {task} | {label} | {cells} | {ls_lr} | {est} |")
    head = (
        "| task | start | m* at each converge | m* x LR / the best run's LR then | "
        "the noise-corrected estimate / the best run's LR then |\n|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(lines)


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load()
    tasks = [f for f in TASKS if any(k[0] == f for k in runs)]
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 7), squeeze=False)
    for col, folder in enumerate(tasks):
        for factor, (label, color) in STARTS.items():
            rows = runs.get((folder, factor))
            if not rows:
                continue
            share = [r["share"] for r in rows]
            axes[0][col].plot(share, [r["m_star"] for r in rows], "o-", color=color, label=label)
            axes[1][col].plot(share, [r["ratio"] for r in rows], "o-", color=color, label=label)
        axes[0][col].set_title(f"task {TASKS[folder]}: probe line-search optimum m*")
        axes[1][col].set_title("LR x m* / (1 + B_noise/B), over the best run's LR")
        for row in axes:
            row[col].set_yscale("log")
            row[col].set_xlabel("share of the run")
            row[col].axhline(1.0, color="grey", lw=0.8)
        axes[0][col].legend()
    fig.tight_layout()
    fig.savefig(HERE / "readings.png", dpi=110)
    print(table(runs))


if __name__ == "__main__":
    main()
