#!/bin/bash
# Session 59: the short-run rows of queue.sh on task h (GPT-2 from scratch, its flags from
# benchmarks/controller_heldout_h) at 100 steps, 4 processes, seeds 0-2, each seed with its own DDP sweep.
# Run from a pinned worktree (git worktree add -f --detach /tmp/wt59h HEAD).
WT=${WT:-/tmp/wt59h}
OUT=${OUT:-/work/main/benchmarks/controller_short_s59/h}
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
rows=sweep; for v in raceunset race30; do for s in low best high; do rows=$rows,${R}_${v}_$s; done; done
H="--num_processes 4 --task clm --model_type gpt2 --max_length 64 --batch_size 4 --block_size 128 --vocab_size 1024
   --hidden_size 128 --num_hidden_layers 4 --intermediate_size 512 --num_attention_heads 4 --num_key_value_heads 2
   --adam_beta2 0.95 --weight_decay 0.1"
cd "$WT"
for seed in ${SEEDS:-0 1 2}; do
  python scripts/benchmark_quality.py --out_dir "$OUT/seed$seed" --resume --max_steps 100 --seed $seed $H \
    --configs $rows > /tmp/q59h_seed$seed.log 2>&1
  echo "$(date +%H:%M) done h seed $seed" >> /tmp/q59h_progress
done
