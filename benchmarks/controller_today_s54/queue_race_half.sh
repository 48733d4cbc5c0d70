#!/bin/bash
# Session 54 screen: race-only at 4 processes with each race copy on half the global batch (pairs of ranks) instead of
# a quarter (worktree /tmp/wt54r of a0990bc + race_half_scratch.patch, HDET_EXP_RACE_Q=2); seed 0, every start.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q54/race_half PROBE_SHARE_TREE=/tmp/wt54r RUN_ONE_EXTRA=--race_only HDET_EXP_RACE_Q=2
for spec in controller_heldout_e:e0:0.01 controller_heldout_f:f0:0.01 controller_heldout_h:h0:0.01 controller:a0:0.01 controller_heldout:d0:0.003; do
  IFS=: read folder name best <<< "$spec"
  python benchmarks/controller_probe_share/run_one.py $folder $name ${R}_best,${R}_low,${R}_high $best > /tmp/q54/race_half_$name.log 2>&1
  echo "$(date +%H:%M) done race_half $name" >> /tmp/q54/progress
done
echo QUEUE RACE HALF DONE >> /tmp/q54/progress
