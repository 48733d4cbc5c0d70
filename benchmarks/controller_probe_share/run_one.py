"""Run benchmark rows for one recorded folder into a scratch copy (its DDP rows copied), with that folder's flags.

    python run_one.py FOLDER OUTNAME ROWS BEST_LR

$RUN_ONE_EXTRA adds arguments to the benchmark's (e.g. ``--race_only``). FOLDER is a recorded folder under benchmarks/; the scratch copy goes to $PROBE_SHARE_OUT/OUTNAME (default
/tmp/pw36), and the benchmark runs from $PROBE_SHARE_TREE (default this repository; session 36 used a worktree of
commit e68bc20 with benchmarks/session36_scratch.patch applied).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

folder, outname, rows, best = sys.argv[1:5]
repo = Path(__file__).resolve().parents[2]
tree = os.environ.get("PROBE_SHARE_TREE", str(repo))
src = repo / "benchmarks" / folder
out = Path(os.environ.get("PROBE_SHARE_OUT", "/tmp/pw36")) / outname
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
       "--max_grid_extensions", "0", "--best_lr", best, "--configs", rows, *args,
       *os.environ.get("RUN_ONE_EXTRA", "").split()]  # fmt: skip
print(" ".join(cmd), flush=True)
sys.exit(subprocess.call(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": tree}))
