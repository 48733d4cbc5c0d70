#!/bin/bash
# Session 46, after queue_session46.sh and _46b.sh: --hdet_start_race_stall_ceiling on top of two_steps (rows
# _twosteps_ceil), where the ceiling binds in the runs measured so far (c2 and g1 from x0.2, i2 from x1/3: their
# two_steps rows climbed past the race's stalled candidate), on the x1/3 classifier seeds of _46b.sh (their race does
# not raise under either rule, so the two_steps row is the default's), and on c at its best LR (seeds 0-2, with the
# paired default row). From a worktree of this commit (PROBE_SHARE_TREE=/tmp/wt46c). 4 processes.
cd "$(dirname "$0")/../.."
C=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest
ONE="python benchmarks/controller_probe_share/run_one.py"
while pgrep -f "queue_session46(b)?.sh" > /dev/null; do sleep 20; done
PROBE_SHARE_OUT=/tmp/ceil46_fifth $ONE controller_docstrings_seed2 c2 ${C}_fifth 0.0003
PROBE_SHARE_OUT=/tmp/ceil46_fifth $ONE controller_heldout_g_seed1 g1 ${C}_fifth 0.0003
PROBE_SHARE_OUT=/tmp/ceil46_third $ONE controller_heldout_i_seed2 i2 ${C}_third 0.003
PROBE_SHARE_OUT=/tmp/ceil46_third $ONE controller_docstrings_seed1 c1 ${C}_third 0.0003
PROBE_SHARE_OUT=/tmp/ceil46_third $ONE controller_docstrings_seed2 c2 ${C}_third 0.0003
PROBE_SHARE_OUT=/tmp/ceil46_third $ONE controller_heldout_g_seed1 g1 ${C}_third 0.0003
for s in 0 1 2; do
  f=controller_docstrings$([ $s -gt 0 ] && echo _seed$s)
  PROBE_SHARE_OUT=/tmp/ceil46_best $ONE $f c$s ${C}_best 0.0003
  PROBE_SHARE_OUT=/tmp/def46_best $ONE $f c$s ${L}_best 0.0003
done
echo QUEUE C DONE
