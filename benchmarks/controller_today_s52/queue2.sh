#!/bin/bash
while ! grep -q "QUEUE DONE" /tmp/q52/progress 2>/dev/null; do sleep 20; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q52 PROBE_SHARE_TREE=/tmp/wt52
python benchmarks/controller_probe_share/run_one.py controller_heldout_h h0 ${R}_high 0.01 > /tmp/q52/h0.log 2>&1
echo "$(date +%H:%M) done h0" >> /tmp/q52/progress
echo QUEUE2 DONE >> /tmp/q52/progress
