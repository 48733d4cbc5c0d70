# Session 45: the start race's "largest" raise from starts between 10x below and the best LR (x0.2 "fifth", x1/3
# "third"), where a raise to the largest candidate that beat the start could start the run above the sweep's best
# LR. Race-only decisions at 4 processes on every language-model seed and the classifiers' seeds 0-2, then full rows
# where the race raised. From a worktree of the session's commit (PROBE_SHARE_TREE=/tmp/wt45).
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) echo controller$sfx;;
    b) echo controller_long$sfx;;
    bp) [ "$2" -gt 0 ] && echo controller_1000$sfx || echo controller_1000_best0.03;;
    c) echo controller_docstrings$sfx;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([a]=0.01 [b]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
raised() {  # race-only folder: exit 0 when the race raised the start
  python - "$1/results.jsonl" <<'PY'
import json, sys
race = [json.loads(line) for line in open(sys.argv[1])][-1]["start_race"]
sys.exit(0 if race["scale"] > 1 and not race["lowered"] else 1)
PY
}
SEEDS="a0 a1 a2 bp0 bp1 bp2 d0 d1 d2 e0 e1 e2 f0 f1 f2 h0 h1 h2 c0 c1 c2 g0 g1 g2 i0 i1 i2"
for start in third fifth; do
  for ts in $SEEDS; do
    t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
    PROBE_SHARE_OUT=/tmp/ro45_$start RUN_ONE_EXTRA=--race_only $ONE "$(folder $t $s)" $ts ${L}_$start "${BEST[$t]}"
  done
done
for start in third fifth; do
  for ts in $SEEDS; do
    t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
    raised /tmp/ro45_$start/$ts && PROBE_SHARE_OUT=/tmp/full45_$start $ONE "$(folder $t $s)" $ts ${L}_$start "${BEST[$t]}"
  done
done
