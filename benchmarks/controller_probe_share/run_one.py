"""Run benchmark rows for one recorded folder into a scratch copy: python run_one.py FOLDER OUTNAME ROWS [best_lr]."""
import json, subprocess, sys, os
from pathlib import Path
folder, outname, rows = sys.argv[1], sys.argv[2], sys.argv[3]
src = Path("/work/main/benchmarks") / folder
out = Path("/tmp/pw36") / outname
out.mkdir(parents=True, exist_ok=True)
if not (out / "results.jsonl").exists():
    keep = [l for l in open(src / "results.jsonl") if json.loads(l).get("kind") == "ddp"]
    (out / "results.jsonl").write_text("".join(keep))
s = json.load(open(src / "results.json"))["meta"]["settings"]
skip = {"out_dir", "configs", "resume", "plot_only", "list", "quick", "grid", "max_grid_extensions", "best_lr"}
args = []
for k, v in s.items():
    if k in skip or v is None or isinstance(v, bool) or v == "":
        continue
    args += [f"--{k}", str(v)]
best = sys.argv[4]
cmd = [sys.executable, "scripts/benchmark_quality.py", "--out_dir", str(out), "--resume", "--grid", best,
       "--max_grid_extensions", "0", "--best_lr", best, "--configs", rows, *args]
print(" ".join(cmd), flush=True)
sys.exit(subprocess.call(cmd, cwd="/tmp/wt36", env={**os.environ, "PYTHONPATH": "/tmp/wt36"}))
