#!/bin/bash
# Session 55 screen (race-only, 2 processes): a race copy on a quarter of the global batch at 2 processes, i.e. on half
# of one process's batch (worktree /tmp/wt55b of 067c004 with quarter2p_scratch.patch, HDET_EXP_SUBSHARE=1), against
# today's race there (a copy on one process's batch, half the global batch). The cells where the share decided in
# item 56: the classifiers from 3x above, e and f from 10x below.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q55q PROBE_SHARE_TREE=/tmp/wt55b HDET_EXP_SUBSHARE=1 RUN_ONE_EXTRA=--race_only
mkdir -p /tmp/q55q
one() {  # task seed best_lr start
  suffix=""; [ $2 != 0 ] && suffix=_seed$2
  python benchmarks/controller_probe_share/run_one.py cuthalf_$1_procs2$suffix $1$2_$4 ${R}_$4 $3 > /tmp/q55q/$1$2_$4.log 2>&1
  echo "$(date +%H:%M) done $1$2_$4" >> /tmp/q55q/progress
}
one i 0 0.003 high
one i 1 0.003 high
one i 2 0.003 high
one c 0 0.0003 high
one e 0 0.01 low
one e 1 0.01 low
one e 2 0.01 low
one c 1 0.0003 high
one f 0 0.01 low
one g 0 0.0003 high
echo QUEUE DONE >> /tmp/q55q/progress
