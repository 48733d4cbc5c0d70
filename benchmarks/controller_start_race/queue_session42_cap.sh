# Session 42 (reading 47): --hdet_start_race_lowers with the controller capped at the lowered start (f69645e), full rows
# on the classifiers from 3x above (4 processes), from a worktree of the library at f69645e (PROBE_SHARE_TREE); then
# the race-only decisions at the best LR the first queue (queue_session42_lower.sh, at 9881e5d: the same race) did
# not reach. i0 from 3x above did not lower there (its row is the race default's), so it is not rerun.
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    c) echo controller_docstrings$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([c]=0.0003 [g]=0.0003 [i]=0.003)
full4() { PROBE_SHARE_OUT=/tmp/race42c $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
ro4() { PROBE_SHARE_OUT=/tmp/ro42l RUN_ONE_EXTRA=--race_only $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for ts in i2 c0 c2 g0 c1 g1 g2 i1; do full4 ${ts%[0-9]} ${ts#?} ${L}_high; done
for ts in g1 g2 i0 i1 i2; do ro4 ${ts%[0-9]} ${ts#?} ${L}_best; done
# then the language models' decisions at the best LR and from 3x above (race-only; the race is the same at 9881e5d
# and f69645e: the cap acts after the race), as far as the session's time allowed
declare -A BEST=([a]=0.01 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
lm() { local f; case $1 in a) f=controller$([ "$2" -gt 0 ] && echo "_seed$2");; d) f=controller_heldout$([ "$2" -gt 0 ] && echo "_seed$2");; *) f=controller_heldout_$1$([ "$2" -gt 0 ] && echo "_seed$2");; esac
  PROBE_SHARE_OUT=/tmp/ro42l RUN_ONE_EXTRA=--race_only $ONE "$f" "$1$2" "$3" "${BEST[$1]}"; }
for s in 0 1 2; do for t in a d e f h; do lm $t $s ${L}_best,${L}_high; done; done
