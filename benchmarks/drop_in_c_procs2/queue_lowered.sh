#!/bin/bash
# Session 58: plain DDP in the same loop at the LR the race lowered every 3x-above start to (x0.464 of 9e-4 =
# 4.177e-4, 1.39x the sweep's best), seeds 0-2, in a folder of its own (a point in the sweep's folder would take part in
# each seed's best). Run from the pinned worktree as queue.sh.
set -e
WT=${WT:-/tmp/wt58}
OUT=${OUT:-/work/main/benchmarks/drop_in_c_procs2/ddp_at_lowered}
cd "$WT"
python scripts/benchmark_drop_in.py --task docstrings --num_processes 2 --seeds 0,1,2 --configs ddp \
  --grid 0.000417743 --out_dir "$OUT"
