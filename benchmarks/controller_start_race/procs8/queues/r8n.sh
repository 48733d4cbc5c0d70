#!/bin/bash
# scratch: race-only decisions at 8 processes (global batch 16 as at 4 and 2: batch_size 2), today's library
cd "$(dirname "$0")/../../../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) echo controller$sfx;;
    c) echo controller_docstrings$sfx;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([a]=0.01 [f]=0.01 [h]=0.01 [e]=0.01 [d]=0.003 [c]=0.0003 [g]=0.0003 [i]=0.003)
for ts in $JOBS; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  for start in ${STARTS:-third half best}; do
    PROBE_SHARE_TREE=/tmp/wt48n RUN_ONE_EXTRA="--race_only --num_processes 8 --batch_size 2" PROBE_SHARE_OUT=${OUT:-/tmp/r8_48} \
      python benchmarks/controller_probe_share/run_one.py "$(folder $t $s)" $ts "${T}_$start" "${BEST[$t]}"
  done
done
echo R8N DONE
