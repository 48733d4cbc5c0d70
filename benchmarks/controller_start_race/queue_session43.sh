# Session 43 (reading 48): is --hdet_start_race_lowers safe to make the default?  From a worktree of 41938e7
# (PROBE_SHARE_TREE=/tmp/wt43): (1) 4-process race-only decisions not yet measured: b and b' at the best LR and 3x
# above, and from 10x below where the race does not raise; (2) 2-process full rows for the classifiers from 3x
# above; (3) 2-process race-only decisions at the best LR (classifiers) and at the best LR / 3x above (language
# models); (4) 2-process decisions from 10x below on h and e.
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
L2=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60_lower
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) [ "$2" -gt 0 ] && echo controller$sfx || echo controller;;
    b) echo controller_long$sfx;;
    bp) [ "$2" -gt 0 ] && echo controller_1000$sfx || echo controller_1000_best0.03;;
    c) echo controller_docstrings$sfx;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
p2folder() { echo "cuthalf_$1_procs2$([ "$2" -gt 0 ] && echo "_seed$2")"; }
declare -A BEST=([a]=0.01 [b]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
ro4() { PROBE_SHARE_OUT=/tmp/ro43l RUN_ONE_EXTRA=--race_only $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
ro2() { PROBE_SHARE_OUT=/tmp/ro43l2 RUN_ONE_EXTRA=--race_only $ONE "$(p2folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
full2() { PROBE_SHARE_OUT=/tmp/race43l2 $ONE "$(p2folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for t in b bp; do for s in 0 1 2; do ro4 $t $s ${L}_best,${L}_high; done; done
for ts in h0 h1 h2 bp0 bp1 bp2 e1 e2 a3; do ro4 ${ts%[0-9]} ${ts#${ts%[0-9]}} ${L}_low; done
for s in 0 1 2; do for t in c g i; do full2 $t $s ${L2}_high; done; done
for s in 0 1 2; do for t in c g i; do ro2 $t $s ${L2}_best; done; done
for s in 0 1 2; do for t in a d e f h; do ro2 $t $s ${L2}_best,${L2}_high; done; done
for s in 0 1 2; do for t in h e; do ro2 $t $s ${L2}_low; done; done
