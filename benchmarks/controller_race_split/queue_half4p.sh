#!/bin/bash
# Session 56: the raise side of a race split by share (candidates on half the global batch, the lowering's pair on a
# quarter) is item 56's race on half at 4 processes (row ..._raceprobe_racehalf, --hdet_start_race_batch_share 0.5),
# race-only; item 56 raced seed 0 of j, k, c, g, i and seeds 0-2 of a, d, e, f, h. This queue: seeds 1-2 of j and k
# (every start) and of c, g, i (best LR and 10x below, where a raise decides), from a worktree pinned at 0450311.
cd /work/main
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe_racehalf
export PROBE_SHARE_OUT=/tmp/q56/half4p PROBE_SHARE_TREE=/tmp/wt56 RUN_ONE_EXTRA=--race_only
specs=""
for s in 1 2; do specs="$specs controller_heldout_j_seed$s:j$s:0.01:all controller_heldout_k_seed$s:k$s:0.03:all"; done
for s in 1 2; do
  specs="$specs controller_docstrings_seed$s:c$s:0.0003:bl controller_heldout_g_seed$s:g$s:0.0003:bl controller_heldout_i_seed$s:i$s:0.003:bl"
done
for spec in $specs; do
  IFS=: read folder name best which <<< "$spec"
  rows=${R}_best,${R}_low; [ $which = all ] && rows=$rows,${R}_high
  python benchmarks/controller_probe_share/run_one.py $folder $name $rows $best > /tmp/q56/half4p_$name.log 2>&1
  echo "$(date +%H:%M) done half4p $name" >> /tmp/q56/progress
done
echo QUEUE HALF4P DONE >> /tmp/q56/progress
