#!/bin/bash
# Session 59: today's default (row ..._raceprobe_split) exploring until 40 % instead of 50 % of the run, seed 0 of the
# language-model tasks at 4 processes, at the best LR and from 3x above (h also from 10x below, where its race does not
# raise), against the recorded default on the same seed; one default row rerun as a check that the recorded cells are
# what today's library gives. Run from a pinned worktree (git worktree add -f --detach /tmp/wt59b HEAD).
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
U=${R}_until0.4
export PROBE_SHARE_OUT=/tmp/q59b PROBE_SHARE_TREE=/tmp/wt59b
run() { # folder outname rows best
  python benchmarks/controller_probe_share/run_one.py $1 $2 $3 $4 > /tmp/q59b/$2.log 2>&1
  echo "$(date +%H:%M) done $2" >> /tmp/q59b/progress
}
run controller_heldout_e e0 ${U}_best,${U}_high 0.01
run controller_heldout_f f0 ${U}_best,${U}_high 0.01
run controller_heldout_h h0 ${U}_best,${U}_high,${U}_low 0.01
run controller a0 ${U}_best,${U}_high 0.01
run controller_heldout d0 ${U}_best,${U}_high 0.003
run controller_heldout_e e0 ${R}_best 0.01
echo QUEUE DONE >> /tmp/q59b/progress
