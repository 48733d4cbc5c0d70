#!/bin/bash
# scratch: full runs at 8 processes (batch 2 per device: the same global batch 16) from a third of the best LR:
# the default (_ceil: stall ceiling on) against the ceiling off (_twosteps) and DDP at that LR.
cd "$(dirname "$0")/../../../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps
for ts in ${JOBS:-c0}; do
  case ${ts%[0-9]} in c) f=controller_docstrings;; g) f=controller_heldout_g;; i) f=controller_heldout_i;; esac
  s=${ts#${ts%[0-9]}}; [ "$s" -gt 0 ] && f=${f}_seed$s
  case ${ts%[0-9]} in i) best=0.003; third=0.001;; *) best=0.0003; third=0.0001;; esac
  PROBE_SHARE_TREE=/tmp/wt48 RUN_ONE_EXTRA="--num_processes 8 --batch_size 2 --grid $best,$third" PROBE_SHARE_OUT=/tmp/f8_48 \
    python benchmarks/controller_probe_share/run_one.py $f $ts "${T}_ceil_third,${T}_third,ddp_lr$third" $best
done
echo F8 DONE
