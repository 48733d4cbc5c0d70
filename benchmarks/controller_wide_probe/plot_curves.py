"""Plot the wide-probe diagnostic (reading 26): the probe loss at anchor + k D against k, one panel per run.

Usage: python benchmarks/controller_wide_probe/plot_curves.py  (reads the *.jsonl files beside it)
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
# One row per task, starts in the order 10x below, best, 3x above.
ORDER = {"low": 0, "best": 1, "high": 2}
files = sorted(HERE.glob("*.jsonl"), key=lambda p: (p.stem[0], ORDER[p.stem.split("_")[1]]))
tasks = sorted({p.stem[0] for p in files})
fig, axes = plt.subplots(len(tasks), 3, figsize=(13, 3.6 * len(tasks)), squeeze=False)
for ax in axes.flat:
    ax.set_visible(False)
for path in files:
    ax = axes[tasks.index(path.stem[0])][ORDER[path.stem.split("_")[1]]]
    ax.set_visible(True)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cmap = plt.get_cmap("viridis")
    for i, row in enumerate(rows):
        ax.plot(row["grid"], row["losses"], marker="o", ms=3, color=cmap(i / max(len(rows) - 1, 1)),
                label=f"step {row['step']}")
    ax.set_xscale("log", base=2)
    ax.set_ylim(top=min(ax.get_ylim()[1], 2.0 * max(r["losses"][1] for r in rows)))
    ax.axvline(1.0, color="grey", lw=0.6)
    ax.set_title(path.stem, fontsize=9)
    ax.set_xlabel("k (multiple of the interval's update D)")
    ax.set_ylabel("probe loss at anchor + k D")
    ax.legend(fontsize=6)
fig.tight_layout()
fig.savefig(HERE / "curves.png", dpi=110)
print("wrote", HERE / "curves.png")
