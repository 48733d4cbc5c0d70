#!/bin/bash
# Session 56: two full runs of the library's split race (row ..._raceprobe_split, the defaults of af926f9) on cells
# whose decision changed, against the recorded runs tables.sh takes for them: e seed 0 from 10x below at 4 processes
# (item 56's run on half: 3.5954) and c seed 0 from 3x above at 2 processes (item 57's run on a quarter: 0.4018).
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_split
export PROBE_SHARE_OUT=/tmp/q56/full_check PROBE_SHARE_TREE=/tmp/wt56s
if [ -z "$FULL_CHECK_MORE" ]; then
  python benchmarks/controller_probe_share/run_one.py controller_heldout_e e0 ${R}_low 0.01 > /tmp/q56/full_e0.log 2>&1
  python benchmarks/controller_probe_share/run_one.py cuthalf_c_procs2 c_procs2_0 ${R}_high 0.0003 > /tmp/q56/full_c0.log 2>&1
  echo "$(date +%H:%M) FULL CHECK DONE" >> /tmp/q56/progress
fi
# Then (session 56, later): a seed 0 from 10x below at 4 processes (item 56's run: 3.9695) and i seed 0 from 3x above
# at 2 processes (item 57's run: 0.5585), with FULL_CHECK_MORE=1.
[ -n "$FULL_CHECK_MORE" ] || exit 0
python benchmarks/controller_probe_share/run_one.py controller a0 ${R}_low 0.01 > /tmp/q56/full_a0.log 2>&1
python benchmarks/controller_probe_share/run_one.py cuthalf_i_procs2 i_procs2_0 ${R}_high 0.003 > /tmp/q56/full_i0.log 2>&1
echo "$(date +%H:%M) FULL CHECK MORE DONE" >> /tmp/q56/progress
