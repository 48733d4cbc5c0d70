#!/bin/bash
# Session 46: --hdet_start_race_raise_on two_steps (the loss fell over two steps up; a larger copy may have stalled).
# The races whose recorded means fit that rule (start not last, the means falling to a winner at 4.64x or 10x;
# /tmp/screen.py over every recorded race, 16 of 241): full _twosteps rows, and where the race raised, the paired
# default row (_largest) from the same worktree (PROBE_SHARE_TREE=/tmp/wt46). 4 processes.
cd "$(dirname "$0")/../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) echo controller$sfx;;
    c) echo controller_docstrings$sfx;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([a]=0.01 [d]=0.003 [c]=0.0003 [g]=0.0003 [i]=0.003)
raised() {  # exit 0 when the last row's race raised the start
  python - "$1/results.jsonl" <<'PY'
import json, sys
race = [json.loads(line) for line in open(sys.argv[1])][-1]["start_race"]
sys.exit(0 if race["scale"] > 1 and not race["lowered"] else 1)
PY
}
for job in "low a3" "fifth c1" "fifth g0" "fifth c2" "fifth g1" "fifth a1" "fifth d2" \
           "third i1" "third i2" "third g0" "third g2" "third c0" "third d2"; do
  set -- $job; start=$1 ts=$2
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  PROBE_SHARE_OUT=/tmp/two46_$start $ONE "$(folder $t $s)" $ts ${T}_$start "${BEST[$t]}"
  raised /tmp/two46_$start/$ts && PROBE_SHARE_OUT=/tmp/def46_$start $ONE "$(folder $t $s)" $ts ${L}_$start "${BEST[$t]}"
done
echo QUEUE DONE
