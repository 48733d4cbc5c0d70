#!/bin/bash
# Session 54: today's default on the pretrained classifier c at 2 processes, 3 seeds, every start (worktree /tmp/wt54
# of a0990bc), after queue_b.sh. Folders: session 30's cuthalf_c_procs2{,_seed1,_seed2}.
while ! grep -q "QUEUE B DONE" /tmp/q54/progress 2>/dev/null; do sleep 20; done
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q54 PROBE_SHARE_TREE=/tmp/wt54
for s in 0 1 2; do
  suffix=""; [ $s != 0 ] && suffix=_seed$s
  python benchmarks/controller_probe_share/run_one.py cuthalf_c_procs2$suffix c_procs2_$s ${R}_best,${R}_low,${R}_high 0.0003 > /tmp/q54/c_procs2_$s.log 2>&1
  echo "$(date +%H:%M) done c_procs2_$s" >> /tmp/q54/progress
done
echo QUEUE C DONE >> /tmp/q54/progress
