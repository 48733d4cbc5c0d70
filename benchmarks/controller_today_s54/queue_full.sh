#!/bin/bash
# Session 54: full runs of today's default with each race copy on half the global batch at 4 processes (worktree
# /tmp/wt54r of a0990bc + race_half_scratch.patch, HDET_EXP_RACE_Q=2), for the cells whose race decided otherwise in
# the race-only screen. Reads "folder:name:best:start" lines from /tmp/q54/full_specs as they are appended; "END" stops.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
export PROBE_SHARE_OUT=/tmp/q54/full PROBE_SHARE_TREE=/tmp/wt54r HDET_EXP_RACE_Q=2
n=1
while true; do
  spec=$(sed -n "${n}p" /tmp/q54/full_specs 2>/dev/null)
  if [ -z "$spec" ]; then sleep 20; continue; fi
  [ "$spec" = END ] && break
  IFS=: read folder name best start <<< "$spec"
  python benchmarks/controller_probe_share/run_one.py $folder $name ${R}_$start $best > /tmp/q54/full_${name}_$start.log 2>&1
  echo "$(date +%H:%M) done full ${name}_$start" >> /tmp/q54/progress
  n=$((n+1))
done
echo QUEUE FULL DONE >> /tmp/q54/progress
