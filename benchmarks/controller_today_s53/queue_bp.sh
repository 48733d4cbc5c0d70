#!/bin/bash
# Session 53: task b' (1,000 steps, AdamW (0.9, 0.95), wd 0.1) at 4 processes under today's default, 3 seeds, every
# start (worktree /tmp/wt53b of b93a75f). Folders: controller_1000_best0.03 (seed 0), controller_1000_seed{1,2}.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q53 PROBE_SHARE_TREE=/tmp/wt53b
for spec in controller_1000_best0.03:0 controller_1000_seed1:1 controller_1000_seed2:2; do
  folder=${spec%%:*}; s=${spec#*:}
  python benchmarks/controller_probe_share/run_one.py $folder bp_$s ${R}_best,${R}_low,${R}_high 0.03 > /tmp/q53/bp_$s.log 2>&1
  echo "$(date +%H:%M) done bp_$s" >> /tmp/q53/progress
done
echo QUEUE BP DONE >> /tmp/q53/progress
