#!/bin/bash
# Session 47: the default (the _twosteps row) and plain DDP started at half the sweep's best LR, on the pretrained
# classifiers c, g, i (seeds 0-2, 4 processes): the start between a third (where the controller's own climb
# overshot, item 48) and the best LR, unmeasured so far. Scratch folders under /tmp/half47/.
cd "$(dirname "$0")/../.."
# From a worktree pinned at the commit that added the "half" start (PROBE_SHARE_TREE), so edits here do not leak in.
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps
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
declare -A HALF=([a]=0.005 [d]=0.0015 [c]=0.00015 [g]=0.00015 [i]=0.0015)
for ts in ${JOBS:-i1 g0 c0 i2 g1 c1 i0 g2 c2}; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  RUN_ONE_EXTRA="--grid ${BEST[$t]},${HALF[$t]}" PROBE_SHARE_OUT=/tmp/half47 \
    $ONE "$(folder $t $s)" $ts "ddp_lr${HALF[$t]},${T}_half" "${BEST[$t]}"
done
echo QUEUE DONE
