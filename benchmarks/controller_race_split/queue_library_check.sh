#!/bin/bash
# Session 56: the library's split race (row ..._raceprobe_split, the defaults of af926f9), race-only, on cells whose
# decision derive.py predicts from recorded races: e seed 0 from 10x below at 4 processes (raise to 4.64x; the pair's
# start and copy below as today's quarter race), c seed 0 from 3x above at 2 processes (lowered, the pair as item 57's
# scratch quarter), d seed 0 at its best LR at 2 processes (nothing changes).
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
export PROBE_SHARE_OUT=/tmp/q56/library_check PROBE_SHARE_TREE=/tmp/wt56s RUN_ONE_EXTRA=--race_only
python benchmarks/controller_probe_share/run_one.py controller_heldout_e e0 ${R}_low 0.01 > /tmp/q56/check_e0.log 2>&1
python benchmarks/controller_probe_share/run_one.py cuthalf_c_procs2 c_procs2_0 ${R}_high 0.0003 > /tmp/q56/check_c0.log 2>&1
python benchmarks/controller_probe_share/run_one.py cuthalf_d_procs2 d_procs2_0 ${R}_best 0.003 > /tmp/q56/check_d0.log 2>&1
echo "$(date +%H:%M) LIBRARY CHECK DONE" >> /tmp/q56/progress
