#!/bin/bash
# scratch: g0 from x1/3 at 8 processes: the default before (one rank per copy) and now (pairs), full runs
cd "$(dirname "$0")/../../../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_third
PROBE_SHARE_TREE=/tmp/wt48n RUN_ONE_EXTRA="--num_processes 8 --batch_size 2" PROBE_SHARE_OUT=/tmp/f8n_48 \
  python benchmarks/controller_probe_share/run_one.py controller_heldout_g g0 "$T" 0.0003
PROBE_SHARE_TREE=/tmp/wt48 RUN_ONE_EXTRA="--num_processes 8 --batch_size 2" PROBE_SHARE_OUT=/tmp/f8_48 \
  python benchmarks/controller_probe_share/run_one.py controller_heldout_g g0 "$T" 0.0003
echo F8G DONE
