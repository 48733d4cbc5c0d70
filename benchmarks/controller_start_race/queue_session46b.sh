#!/bin/bash
# Session 46, after queue_session46.sh: the default (start_last) from x1/3 on the classifier seeds whose race raises
# under neither rule (c1, c2, g1), to see whether the controller's own climb overshoots there as it did on i1 and i2
# (3.3x the sweep's best loss). From the same worktree (PROBE_SHARE_TREE=/tmp/wt46). 4 processes.
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest
ONE="python benchmarks/controller_probe_share/run_one.py"
while pgrep -f queue_session46.sh > /dev/null; do sleep 20; done
PROBE_SHARE_OUT=/tmp/def46_third $ONE controller_docstrings_seed1 c1 ${L}_third 0.0003
PROBE_SHARE_OUT=/tmp/def46_third $ONE controller_docstrings_seed2 c2 ${L}_third 0.0003
PROBE_SHARE_OUT=/tmp/def46_third $ONE controller_heldout_g_seed1 g1 ${L}_third 0.0003
echo QUEUE B DONE
