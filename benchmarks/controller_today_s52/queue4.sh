#!/bin/bash
# Full runs where the 128-example race decided otherwise: k seeds 1-2 from 10x below (raised to 10x, was 4.64x).
while ! grep -q "QUEUE3 DONE" /tmp/q52/progress 2>/dev/null; do sleep 10; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q52 PROBE_SHARE_TREE=/tmp/wt52
for s in 1 2; do
  python benchmarks/controller_probe_share/run_one.py controller_heldout_k_seed$s k$s ${R}_low 0.03 > /tmp/q52/k$s.log 2>&1
  echo "$(date +%H:%M) done k$s" >> /tmp/q52/progress
done
echo QUEUE4 DONE >> /tmp/q52/progress
