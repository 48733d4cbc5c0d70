#!/bin/bash
# Session 59: a short run (task a at 100 steps, 4 processes), where the unset start race does not run (runs under
# 2 x 60 steps): the default as a user gets it (row _raceunset: no race) against a 30-step race (row _race30, what the
# WARNING suggests), each from 10x below, at and 3x above the best point of the seed's own DDP sweep at 100 steps.
# Run from a pinned worktree (git worktree add -f --detach /tmp/wt59c HEAD).
WT=${WT:-/tmp/wt59c}
OUT=${OUT:-/work/main/benchmarks/controller_short_s59}
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
rows=sweep; for v in raceunset race30; do for s in low best high; do rows=$rows,${R}_${v}_$s; done; done
cd "$WT"
for seed in ${SEEDS:-0 1 2}; do
  dir=$OUT/seed$seed
  python scripts/benchmark_quality.py --out_dir "$dir" --resume --max_steps 100 --seed $seed --configs $rows \
    > /tmp/q59c_seed$seed.log 2>&1
  echo "$(date +%H:%M) done seed $seed" >> /tmp/q59c_progress
done
