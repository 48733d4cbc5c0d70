#!/bin/bash
# Session 54: task b (2,000 steps, AdamW (0.9, 0.95), wd 0.1) at 4 processes under today's default, 3 seeds, every
# start (worktree /tmp/wt54 of a0990bc). Folders: controller_long (seed 0), controller_long_seed{1,2}.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q54 PROBE_SHARE_TREE=/tmp/wt54
for spec in controller_long:0 controller_long_seed1:1 controller_long_seed2:2; do
  folder=${spec%%:*}; s=${spec#*:}
  python benchmarks/controller_probe_share/run_one.py $folder b_$s ${R}_best,${R}_low,${R}_high 0.01 > /tmp/q54/b_$s.log 2>&1
  echo "$(date +%H:%M) done b_$s" >> /tmp/q54/progress
done
echo QUEUE B DONE >> /tmp/q54/progress
