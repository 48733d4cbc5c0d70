#!/bin/bash
# Session 52: today's default (row ..._probespread_raceprobe) on the language-model tasks a, d, e, f, h (4 processes).
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q52 PROBE_SHARE_TREE=/tmp/wt52
run() { # folder outname starts best
  rows=$(for s in $3; do printf "%s_%s," $R $s; done); rows=${rows%,}
  python benchmarks/controller_probe_share/run_one.py $1 $2 $rows $4 > /tmp/q52/$2.log 2>&1
  echo "$(date +%H:%M) done $2" >> /tmp/q52/progress
}
run controller_heldout d0 "best low high" 0.003
run controller_heldout_f f0 "high" 0.01
for s in 1 2; do
  run controller_seed$s a$s "best low high" 0.01
  run controller_heldout_seed$s d$s "best low high" 0.003
  run controller_heldout_e_seed$s e$s "best low high" 0.01
  run controller_heldout_f_seed$s f$s "best low high" 0.01
  run controller_heldout_h_seed$s h$s "best low high" 0.01
done
echo QUEUE DONE >> /tmp/q52/progress
