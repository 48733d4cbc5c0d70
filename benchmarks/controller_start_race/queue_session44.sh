# Session 44 (reading 49): --hdet_start_race_raise_to largest from 10x below. (1) Race-only decisions on every
# language-model seed at 4 processes and on the language models plus c1, g1 (whose 2-process winner was not the
# largest candidate) at 2 processes; (2) full rows where "largest" starts the run elsewhere than the winner (a race
# that picks the same scale leaves the run bit for bit as the recorded `_race60` row). From a worktree of the
# session's commit with the option (PROBE_SHARE_TREE=/tmp/wt44b).
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest
L2=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60_lower_largest
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) echo controller$sfx;;
    b) echo controller_long$sfx;;
    bp) [ "$2" -gt 0 ] && echo controller_1000$sfx || echo controller_1000_best0.03;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
p2folder() { echo "cuthalf_$1_procs2$([ "$2" -gt 0 ] && echo "_seed$2")"; }
declare -A BEST=([a]=0.01 [b]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
changed() {  # race-only folder: exit 0 when "largest" chose another scale than the winner's
  python - "$1/results.jsonl" <<'PY'
import json, sys
race = [json.loads(line) for line in open(sys.argv[1])][-1]["start_race"]
raised = race["scale"] > 1 and not race["lowered"]
sys.exit(0 if raised and race["scale"] != race["multipliers"][race["winner"]] else 1)
PY
}
for ts in a0 a1 a2 a3 a4 b0 b1 b2 bp0 bp1 bp2 d0 d1 d2 e0 e1 e2 f0 f1 f2 h0 h1 h2; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  PROBE_SHARE_OUT=/tmp/ro44 RUN_ONE_EXTRA=--race_only $ONE "$(folder $t $s)" $ts ${L}_low "${BEST[$t]}"
done
for ts in a0 a1 a2 d0 d1 d2 e0 e1 e2 f0 f1 f2 h0 h1 h2 c1 g1; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  PROBE_SHARE_OUT=/tmp/ro44_2 RUN_ONE_EXTRA=--race_only $ONE "$(p2folder $t $s)" $ts ${L2}_low "${BEST[$t]}"
done
for ts in a0 a1 a2 a3 a4 b0 b1 b2 bp0 bp1 bp2 d0 d1 d2 e0 e1 e2 f0 f1 f2 h0 h1 h2; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  changed /tmp/ro44/$ts && PROBE_SHARE_OUT=/tmp/full44 $ONE "$(folder $t $s)" $ts ${L}_low "${BEST[$t]}"
done
for ts in a0 a1 a2 d0 d1 d2 e0 e1 e2 f0 f1 f2 h0 h1 h2 c1 g1; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  changed /tmp/ro44_2/$ts && PROBE_SHARE_OUT=/tmp/full44_2 $ONE "$(p2folder $t $s)" $ts ${L2}_low "${BEST[$t]}"
done
