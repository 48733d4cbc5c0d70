#!/bin/bash
# Session 58: the drop-in OneCycleAutoLR with README's call and HDETTrainer's race (readme_race_trainer) on the
# pretrained classifier (task c, --task docstrings) at 2 processes, against the same loop's DDP sweep; seeds 0-2.
# Run from a pinned worktree (git worktree add -f --detach /tmp/wt58 HEAD) so edits in the checkout do not reach it.
set -e
WT=${WT:-/tmp/wt58}
OUT=${OUT:-/work/main/benchmarks/drop_in_c_procs2}
cd "$WT"
for seed in 0 1 2; do
  python scripts/benchmark_drop_in.py --task docstrings --num_processes 2 --seeds $seed \
    --configs ddp,readme_race_trainer --out_dir "$OUT" --resume
done
