#!/bin/bash
# Session 53 screen: race-only (today's default row) with the scratch patch that scores each race copy at steps 20,
# 40 and 60 (worktree /tmp/wt53s of 7936b76 + benchmarks/controller_today_s53/race_rate_scratch.patch); seed 0, 4 processes.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/rr53/out PROBE_SHARE_TREE=/tmp/wt53s RUN_ONE_EXTRA=--race_only
for spec in controller_heldout_f:f0:0.01 controller_heldout_h:h0:0.01 controller_heldout_j:j0:0.01 controller_heldout_e:e0:0.01 controller_heldout:d0:0.003; do
  IFS=: read folder name best <<< "$spec"
  mkdir -p /tmp/rr53/$name
  RACE_MID_DIR=/tmp/rr53/$name python benchmarks/controller_probe_share/run_one.py $folder $name ${R}_best,${R}_low,${R}_high $best > /tmp/rr53/$name.log 2>&1
  echo "$(date +%H:%M) done $name" >> /tmp/rr53/progress
done
echo QUEUE DONE >> /tmp/rr53/progress
