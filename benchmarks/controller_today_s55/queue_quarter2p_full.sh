#!/bin/bash
# Session 55 screen, full runs of the races a quarter at 2 processes decided otherwise (after queue_quarter2p.sh).
while ! grep -q "QUEUE DONE" /tmp/q55q/progress 2>/dev/null; do sleep 10; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q55f PROBE_SHARE_TREE=/tmp/wt55b HDET_EXP_SUBSHARE=1
mkdir -p /tmp/q55f
one() {  # task seed best_lr start
  suffix=""; [ $2 != 0 ] && suffix=_seed$2
  python benchmarks/controller_probe_share/run_one.py cuthalf_$1_procs2$suffix $1$2_$4 ${R}_$4 $3 > /tmp/q55f/$1$2_$4.log 2>&1
  echo "$(date +%H:%M) done $1$2_$4" >> /tmp/q55f/progress
}
one i 0 0.003 high
one e 0 0.01 low
one i 1 0.003 high
one e 1 0.01 low
one c 0 0.0003 high
echo QUEUE DONE >> /tmp/q55f/progress
