#!/bin/bash
# Session 60: the SCRATCH virtual fan-out (benchmarks/virtual_fan_out_s60/scratch.patch on c706e22, worktree
# /tmp/wt60v): every rank trains at the base LR in the step-size intervals (exactly DDP there) and each replica is
# scored where its fan-out would be. Row ..._split_virtual against the recorded default (..._split), 4 processes:
# 3x above on a, f, h (seeds 0-2), then the best LR on a, e, f, h (seed 0), then 10x below on h, a, e (seed 0).
cd /work/main
V=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split_virtual
export PROBE_SHARE_OUT=${PROBE_SHARE_OUT:-/tmp/q60v} PROBE_SHARE_TREE=${PROBE_SHARE_TREE:-/tmp/wt60v}
mkdir -p $PROBE_SHARE_OUT
run() { # folder outname rows best
  python benchmarks/controller_probe_share/run_one.py $1 $2 $3 $4 > $PROBE_SHARE_OUT/$2.log 2>&1
  echo "$(date +%H:%M) done $2 $3" >> $PROBE_SHARE_OUT/progress
}
for s in "" _seed1 _seed2; do
  run controller_heldout_f$s f$s ${V}_high 0.01
  run controller_heldout_h$s h$s ${V}_high 0.01
  run controller$s a$s ${V}_high 0.01
done
run controller a ${V}_best 0.01
run controller_heldout_e e ${V}_best 0.01
run controller_heldout_f f ${V}_best 0.01
run controller_heldout_h h ${V}_best 0.01
for spec in "controller_heldout_h h" "controller a" "controller_heldout_e e"; do
  set -- $spec
  run $1 $2 ${V}_low 0.01
done
echo QUEUE DONE >> $PROBE_SHARE_OUT/progress
# Then the pretrained classifier c from 3x above (seeds 0-2), where the race lowers one step and the full fan-out once
# cost up to 20 points (reading 23).
for s in "" _seed1 _seed2; do
  run controller_docstrings$s c$s ${V}_high 0.0003
done
echo QUEUE C DONE >> $PROBE_SHARE_OUT/progress
