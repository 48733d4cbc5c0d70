# Session 44 (reading 49): the default's rows with today's library where README's summary still quoted older
# libraries: at 2 processes the best LR on every task and 3x above on the language models (session 30's rows; the
# library has changed the 2-process runs since, e.g. c seed 0 from 3x above 1.349 -> 1.195 raising only), and at 4
# processes f and h seed 2 (session 36's `controller_probe_share/` has seeds 0-1 of these; a race that neither
# raises nor lowers leaves a run bit for bit as it was, item 45, so those 4-process rows are today's). From a
# worktree of 60a9d24 (PROBE_SHARE_TREE=/tmp/wt44). The race fires on none of these starts (lower_default.md).
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
L2=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60_lower
ONE="python benchmarks/controller_probe_share/run_one.py"
declare -A BEST=([a]=0.01 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
p2folder() { echo "cuthalf_$1_procs2$([ "$2" -gt 0 ] && echo "_seed$2")"; }
full4() { PROBE_SHARE_OUT=/tmp/today44_4 $ONE "controller_heldout_$1_seed$2" "$1$2" "$3" "${BEST[$1]}"; }
full2() { PROBE_SHARE_OUT=/tmp/today44_2 $ONE "$(p2folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for t in f h; do full4 $t 2 ${L}_best,${L}_high; done
for s in 0 1 2; do for t in a e f d h; do full2 $t $s ${L2}_best,${L2}_high; done; done
for s in 0 1 2; do for t in i g c; do full2 $t $s ${L2}_best; done; done
# Then (added while it ran; run as a separate step, same worktree): the 4-process rows the summary's cells need that
# controller_probe_share/ lacks: e seed 2 from 3x above, a seeds 3-4 from 3x above (the 3x-above cell has 5 seeds).
full4a() { PROBE_SHARE_OUT=/tmp/today44_4 $ONE "$1" "$2" "$3" "${BEST[a]}"; }
BEST[a]=0.01
full4 e 2 ${L}_high
for s in 3 4; do full4a controller_seed$s a$s ${L}_high; done
