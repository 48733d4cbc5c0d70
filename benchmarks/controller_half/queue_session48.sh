#!/bin/bash
# Session 48: the default (the _ceil row: the session-47 default, whose stall ceiling never binds on these tasks, as
# no race copy stalls on them) and plain DDP started at half the sweep's best LR, on the from-scratch language
# models a, f, h (seeds 0-2, 4 processes): session 47 ran x0.5 on the classifiers only. Scratch folders under
# /tmp/half48/, run from a worktree pinned at this session's first commit (PROBE_SHARE_TREE).
cd "$(dirname "$0")/../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
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
declare -A BEST=([a]=0.01 [f]=0.01 [h]=0.01 [e]=0.01 [d]=0.003)
declare -A HALF=([a]=0.005 [f]=0.005 [h]=0.005 [e]=0.005 [d]=0.0015)
for ts in ${JOBS:-a0 f0 h0 a1 f1 h1 a2 f2 h2}; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  RUN_ONE_EXTRA="--grid ${BEST[$t]},${HALF[$t]}" PROBE_SHARE_OUT=/tmp/half48 \
    $ONE "$(folder $t $s)" $ts "ddp_lr${HALF[$t]},${T}_half" "${BEST[$t]}"
done
echo QUEUE DONE
