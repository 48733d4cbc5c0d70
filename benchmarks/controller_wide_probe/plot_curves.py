"""Plot the wide-probe diagnostic (reading 26): the probe loss at anchor + k D against k, one panel per run.

Usage: python benchmarks/controller_wide_probe/plot_curves.py  (reads the *.jsonl files beside it)
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
files = sorted(HERE.glob("*.jsonl"))
fig, axes = plt.subplots(1, len(files), figsize=(4.2 * len(files), 3.8), squeeze=False)
for ax, path in zip(axes[0], files):
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
