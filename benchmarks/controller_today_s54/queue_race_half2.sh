#!/bin/bash
# Session 54 screen, continued (after queue_race_half.sh): the same race-only runs on seeds 1-2 of the from-scratch
# language models, then seed 0 of j, k and the classifiers c, g, i.
while ! grep -q "QUEUE RACE HALF DONE" /tmp/q54/progress 2>/dev/null; do sleep 20; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q54/race_half PROBE_SHARE_TREE=/tmp/wt54r RUN_ONE_EXTRA=--race_only HDET_EXP_RACE_Q=2
specs=""
for s in 1 2; do
  specs="$specs controller_heldout_e_seed$s:e$s:0.01 controller_heldout_f_seed$s:f$s:0.01 controller_heldout_h_seed$s:h$s:0.01"
  specs="$specs controller_seed$s:a$s:0.01 controller_heldout_seed$s:d$s:0.003"
done
specs="$specs controller_heldout_j:j0:0.01 controller_docstrings:c0:0.0003 controller_heldout_g:g0:0.0003"
specs="$specs controller_heldout_i:i0:0.003 controller_heldout_k:k0:0.03"
for spec in $specs; do
  IFS=: read folder name best <<< "$spec"
  python benchmarks/controller_probe_share/run_one.py $folder $name ${R}_best,${R}_low,${R}_high $best > /tmp/q54/race_half_$name.log 2>&1
  echo "$(date +%H:%M) done race_half $name" >> /tmp/q54/progress
done
echo QUEUE RACE HALF2 DONE >> /tmp/q54/progress
