#!/bin/bash
# Session 59: the short-run rows of queue.sh on task c (the pretrained MiniLM classifier, its flags from
# benchmarks/controller_docstrings) at 100 steps, 4 processes, seed 0 (time allowed one), with its own DDP sweep.
# Run from a pinned worktree (git worktree add -f --detach /tmp/wt59c2 HEAD).
WT=${WT:-/tmp/wt59c2}
OUT=${OUT:-/work/main/benchmarks/controller_short_s59/c}
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
rows=sweep; for s in best low; do for v in raceunset race30; do rows=$rows,${R}_${v}_$s; done; done
cd "$WT"
for seed in ${SEEDS:-0}; do
  python scripts/benchmark_quality.py --out_dir "$OUT/seed$seed" --resume --max_steps 100 --seed $seed \
    --num_processes 4 --task docstrings --batch_size 4 --grid 1e-5,3e-5,1e-4,3e-4,1e-3 --max_grid_extensions 0 \
    --configs $rows > /tmp/q59c2_seed$seed.log 2>&1
  echo "$(date +%H:%M) done c seed $seed" >> /tmp/q59c2_progress
done
