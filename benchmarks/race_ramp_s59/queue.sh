#!/bin/bash
# Session 59 screen: the start race with each copy's LR ramped linearly over its first 20 steps (scratch.patch,
# HDET_RACE_RAMP=20), race only (--race_only: the race's decision, no training), today's default row, 4 processes.
# From 10x below where today's race does not raise (h, j) and at the best LR, where a raise would be wrong.
# Worktree: git worktree add -f --detach /tmp/wt59r <commit>; git -C /tmp/wt59r apply scratch.patch
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
export PROBE_SHARE_OUT=/tmp/q59r PROBE_SHARE_TREE=/tmp/wt59r RUN_ONE_EXTRA=--race_only HDET_RACE_RAMP=${HDET_RACE_RAMP:-20}
mkdir -p /tmp/q59r
run() { # folder outname start best
  python benchmarks/controller_probe_share/run_one.py $1 $2 ${R}_$3 $4 > /tmp/q59r/$2_$3.log 2>&1
  echo "$(date +%H:%M) done $2 $3" >> /tmp/q59r/progress
}
run controller_heldout_h h0 low 0.01
run controller_heldout d0 best 0.003
run controller_heldout_h h0 best 0.01
run controller a0 best 0.01
run controller_heldout_h_seed1 h1 low 0.01
run controller_heldout_e e0 best 0.01
run controller_heldout_f f0 best 0.01
run controller_heldout_j j0 low 0.01
run controller_heldout_seed1 d1 best 0.003
run controller_heldout_h_seed2 h2 low 0.01
run controller_heldout_seed2 d2 best 0.003
echo QUEUE DONE >> /tmp/q59r/progress
