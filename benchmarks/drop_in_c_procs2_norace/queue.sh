#!/bin/bash
# Session 59: the drop-in OneCycleAutoLR with README's call and NO start race (row readme) on the pretrained
# classifier (task c, --task docstrings) at 2 processes, seeds 0-2: the race's share of item 60's result
# (benchmarks/drop_in_c_procs2/, same loop, same seeds; its DDP sweep is the reference, copied by compare.py).
# Run from a pinned worktree (git worktree add -f --detach /tmp/wt59 HEAD) so edits in the checkout do not reach it.
set -e
WT=${WT:-/tmp/wt59}
OUT=${OUT:-/work/main/benchmarks/drop_in_c_procs2_norace}
cd "$WT"
for seed in 0 1 2; do
  python scripts/benchmark_drop_in.py --task docstrings --num_processes 2 --seeds $seed \
    --configs readme --out_dir "$OUT" --resume
done
