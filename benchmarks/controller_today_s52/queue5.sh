#!/bin/bash
# Session 52: today's default on the classifiers at 2 processes, seed 0, every start (worktree /tmp/wt52 of 9ed9def).
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q52 PROBE_SHARE_TREE=/tmp/wt52
for spec in g:0.0003 i:0.003 c:0.0003; do
  t=${spec%%:*}; best=${spec#*:}
  python benchmarks/controller_probe_share/run_one.py cuthalf_${t}_procs2 ${t}_procs2_0 ${R}_best,${R}_low,${R}_high $best > /tmp/q52/${t}_procs2_0.log 2>&1
  echo "$(date +%H:%M) done ${t}_procs2_0" >> /tmp/q52/progress
done
echo QUEUE5 DONE >> /tmp/q52/progress
