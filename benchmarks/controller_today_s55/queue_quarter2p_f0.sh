#!/bin/bash
# Session 55 screen: f seed 0 from 10x below, which the race-only screen showed changed too (after queue_quarter2p_full.sh).
while ! grep -q "QUEUE DONE" /tmp/q55f/progress 2>/dev/null; do sleep 10; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q55f PROBE_SHARE_TREE=/tmp/wt55b HDET_EXP_SUBSHARE=1
python benchmarks/controller_probe_share/run_one.py cuthalf_f_procs2 f0_low ${R}_low 0.01 > /tmp/q55f/f0_low.log 2>&1
echo "$(date +%H:%M) done f0_low" >> /tmp/q55f/progress
echo F0 DONE >> /tmp/q55f/progress
