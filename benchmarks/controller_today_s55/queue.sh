#!/bin/bash
# Session 55: today's default on the pretrained classifiers at 2 processes (the README's last rows still on the old
# probe). Seeds 1-2 of i and g (seed 0 ran in session 52: controller_today_s52/runs/{g,i}_procs2_0.jsonl), then c
# (seed 0's best-LR row ran in session 54: controller_today_s54/runs/c_procs2_0.jsonl). Worktree /tmp/wt55 of de8675f;
# folders: session 30's cuthalf_<task>_procs2{,_seed1,_seed2}.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q55 PROBE_SHARE_TREE=/tmp/wt55
one() {  # task seed best_lr rows
  suffix=""; [ $2 != 0 ] && suffix=_seed$2
  python benchmarks/controller_probe_share/run_one.py cuthalf_$1_procs2$suffix $1_procs2_$2 $4 $3 > /tmp/q55/$1_procs2_$2.log 2>&1
  echo "$(date +%H:%M) done $1_procs2_$2" >> /tmp/q55/progress
}
all=${R}_best,${R}_low,${R}_high
one i 1 0.003 $all
one i 2 0.003 $all
one g 1 0.0003 $all
one g 2 0.0003 $all
one c 0 0.0003 ${R}_low,${R}_high
one c 1 0.0003 $all
one c 2 0.0003 $all
echo QUEUE DONE >> /tmp/q55/progress
