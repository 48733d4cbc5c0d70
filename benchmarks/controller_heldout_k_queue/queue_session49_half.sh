#!/bin/bash
# Session 49: task j from half its best LR (0.005), seeds 0-2, 4 processes: today's default and DDP at x0.5.
# From a worktree of the final session-49 library (/tmp/wt49e).
cd /tmp/wt49e
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400"
for s in 0 1 2; do
  sfx=$([ $s -gt 0 ] && echo "_seed$s")
  PYTHONPATH=/tmp/wt49e python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_j$sfx --resume --seed $s $J \
    --grid 0.005 --max_grid_extensions 0 --best_lr 0.01 --configs ddp_lr0.005,${T}_half
done
echo QUEUE DONE
