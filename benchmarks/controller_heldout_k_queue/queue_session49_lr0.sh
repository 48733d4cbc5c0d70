#!/bin/bash
# Session 49: the exploration alone (lambda 0, no race) at the best LR of tasks j and k, seeds 0-2, 4 processes: what
# the default's cost at a correct LR on a pretrained model is made of. Worktree /tmp/wt49d.
cd /tmp/wt49d
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_lr0
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400"
for s in 0 1 2; do
  sfx=$([ $s -gt 0 ] && echo "_seed$s")
  PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_j$sfx --resume --seed $s $J \
    --grid 0.01 --max_grid_extensions 0 --best_lr 0.01 --configs ${L}_best
  PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_k$sfx --resume --seed $s $J --lora_r 8 \
    --grid 0.03 --max_grid_extensions 0 --best_lr 0.03 --configs ${L}_best
done
echo QUEUE DONE
