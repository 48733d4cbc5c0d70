#!/bin/bash
# Session 49: held-out task k, LoRA r 8 (q_proj, v_proj; everything else frozen) on task j (the pretrained tiny Llama
# on the standard library's code), 200 steps, 4 processes x 4 blocks. Seed 0: sweep + today's default from each start;
# seeds 1-2: DDP at the start LRs + the default. From a worktree of the commit that added the lowering's least progress (after "--lora_r on the pretrained LM too").
cd /tmp/wt49d
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
K="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --lora_r 8 --vocab_size 1024 --max_steps 200 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400"
PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_k --seed 0 $K \
  --grid 3e-3,1e-2,3e-2,1e-1,3e-1 --configs sweep,${T}_best,${T}_low,${T}_high
BEST=$(python -c "import json; print(json.load(open('/work/main/benchmarks/controller_heldout_k/results.json'))['meta']['best_lr'])" 2>/dev/null)
echo "best $BEST"
# then (best 0.03): DDP at 3x above on seed 0, and seeds 1-2
PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_k --resume --seed 0 $K \
  --grid 0.09 --max_grid_extensions 0 --best_lr 0.03 --configs ddp_lr0.09
for s in 1 2; do
  PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_k_seed$s --seed $s $K \
    --grid 0.003,0.03,0.09 --max_grid_extensions 0 --best_lr 0.03 --configs sweep,${T}_best,${T}_low,${T}_high
done
