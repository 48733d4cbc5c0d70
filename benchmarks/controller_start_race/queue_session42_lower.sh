# Session 42 (reading 47): --hdet_start_race_lowers at 4 processes, from a worktree of the library at 9881e5d
# (PROBE_SHARE_TREE). Full rows on the classifiers from 3x above (where a collapsed start was seen), then race-only
# decisions: the classifiers at the best LR, the language models at the best LR and from 3x above, and the starts
# from 10x below where the race does not raise (there the lowering check runs). c0 and c1 from 3x above ran
# race-only first (the queue's first version), before their full rows.
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
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
declare -A BEST=([a]=0.01 [b]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
ro4() { PROBE_SHARE_OUT=/tmp/ro42l RUN_ONE_EXTRA=--race_only $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
full4() { PROBE_SHARE_OUT=/tmp/race42l $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for t in c g i; do for s in 0 1 2; do full4 $t $s ${L}_high; done; done
for t in c g i; do for s in 0 1 2; do ro4 $t $s ${L}_best; done; done
for t in a d e f h bp; do for s in 0 1 2; do ro4 $t $s ${L}_best,${L}_high; done; done
for ts in h0 h1 h2 bp0 bp1 bp2 e1 e2 a3; do ro4 ${ts%[0-9]} ${ts#${ts%[0-9]}} ${L}_low; done
