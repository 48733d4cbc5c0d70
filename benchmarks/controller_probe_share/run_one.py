"""Run benchmark rows for one recorded folder into a scratch copy (its DDP rows copied), with that folder's flags.

    python run_one.py FOLDER OUTNAME ROWS BEST_LR
"""

import json
import os
import subprocess
import sys
from pathlib import Path

folder, outname, rows, best = sys.argv[1:5]
src = Path("/work/main/benchmarks") / folder
out = Path("/tmp/pw36") / outname
out.mkdir(parents=True, exist_ok=True)
if not (out / "results.jsonl").exists():
    kept = [line for line in open(src / "results.jsonl") if json.loads(line).get("kind") == "ddp"]
    (out / "results.jsonl").write_text("".join(kept))
settings = json.load(open(src / "results.json"))["meta"]["settings"]
skip = {"out_dir", "configs", "resume", "plot_only", "list", "quick", "grid", "max_grid_extensions", "best_lr"}
args = []
for key, value in settings.items():
    if key not in skip and value is not None and not isinstance(value, bool) and value != "":
        args += [f"--{key}", str(value)]
cmd = [sys.executable, "scripts/benchmark_quality.py", "--out_dir", str(out), "--resume", "--grid", best,
       "--max_grid_extensions", "0", "--best_lr", best, "--configs", rows, *args]  # fmt: skip
print(" ".join(cmd), flush=True)
sys.exit(subprocess.call(cmd, cwd="/tmp/wt36", env={**os.environ, "PYTHONPATH": "/tmp/wt36"}))
