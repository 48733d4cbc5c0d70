#!/bin/bash
# Session 60: an out-of-sample task for the drop-in OneCycleAutoLR (README's call plus HDETTrainer's race, row
# readme_race_trainer), on settings no default was chosen on: the docstring-corpus Llama at twice task a's depth
# (4 layers), 600 steps, AdamW (0.9, 0.95), weight decay 0.1, the probe spread over the set. 2 processes, seeds 0-2,
# each with its own 5-point DDP sweep (best 0.03 on every seed, so the starts are 0.003 / 0.03 / 0.09) plus DDP at
# 0.09 (3x above). Run from a pinned worktree (git worktree add -f --detach /tmp/wt60 HEAD).
set -e
WT=${WT:-/tmp/wt60}
OUT=${OUT:-/work/main/benchmarks/drop_in_o_procs2}
TASK="--num_processes 2 --max_steps 600 --num_hidden_layers 4 --adam_beta2 0.95 --weight_decay 0.1 --probe_sampling spread"
cd "$WT"
for seed in 0 1 2; do
  python scripts/benchmark_drop_in.py $TASK --seeds $seed --configs ddp --out_dir "$OUT" --resume
done
for seed in 0 1 2; do
  python scripts/benchmark_drop_in.py $TASK --seeds $seed --configs ddp --grid 0.09 --out_dir "$OUT" --resume
  python scripts/benchmark_drop_in.py $TASK --seeds $seed --best_lr 0.03 --configs readme_race_trainer \
    --out_dir "$OUT" --resume
done
