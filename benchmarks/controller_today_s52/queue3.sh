#!/bin/bash
# Race-only (the race on 128 examples) on j, k, j at 2 processes, seeds 1-2, every start.
while ! grep -q "QUEUE2 DONE" /tmp/q52/progress 2>/dev/null; do sleep 20; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q52/race_only PROBE_SHARE_TREE=/tmp/wt52 RUN_ONE_EXTRA=--race_only
for s in 1 2; do
  for t in j k j_procs2; do
    best=0.01; [ $t = k ] && best=0.03
    python benchmarks/controller_probe_share/run_one.py controller_heldout_${t}_seed$s ${t}$s ${R}_best,${R}_low,${R}_high $best > /tmp/q52/race_${t}$s.log 2>&1
    echo "$(date +%H:%M) done race ${t}$s" >> /tmp/q52/progress
  done
done
echo QUEUE3 DONE >> /tmp/q52/progress
