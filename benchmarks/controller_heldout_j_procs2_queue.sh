#!/bin/bash
# Session 49: held-out task j at 2 processes (the same global batch: 2 x 8 blocks), seeds 0-2, DDP at the three start
# LRs of the 4-process sweep (best 0.01) and today's default from each start. From a worktree of the lowering fix.
cd /tmp/wt49c
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 8 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400 --num_processes 2"
for s in 0 1 2; do
  sfx=$([ $s -gt 0 ] && echo "_seed$s")
  PYTHONPATH=/tmp/wt49c python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_j_procs2$sfx --seed $s $J \
    --grid 0.001,0.01,0.03 --max_grid_extensions 0 --best_lr 0.01 --configs sweep,${T}_best,${T}_low,${T}_high
done
echo QUEUE DONE
