#!/bin/bash
# Session 53: today's default (row ..._probespread_raceprobe) on the language models a, f, h, e, d at 2 processes,
# 3 seeds, every start (worktree /tmp/wt53 of e5309ad). Folders: session 30's cuthalf_<task>_procs2{,_seed1,_seed2}.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q53 PROBE_SHARE_TREE=/tmp/wt53
for spec in a:0.01 f:0.01 h:0.01 e:0.01 d:0.003; do
  t=${spec%%:*}; best=${spec#*:}
  for s in 0 1 2; do
    suffix=""; [ $s != 0 ] && suffix=_seed$s
    python benchmarks/controller_probe_share/run_one.py cuthalf_${t}_procs2$suffix ${t}_procs2_$s ${R}_best,${R}_low,${R}_high $best > /tmp/q53/${t}_procs2_$s.log 2>&1
    echo "$(date +%H:%M) done ${t}_procs2_$s" >> /tmp/q53/progress
  done
done
echo QUEUE DONE >> /tmp/q53/progress
