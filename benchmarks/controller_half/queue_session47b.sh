#!/bin/bash
# Session 47, after queue_session47.sh: --hdet_start_race_stall_ceiling (rows _twosteps_ceil) where it binds and was not
# measured: from x1/3 on c0, c2, g2 (their two_steps rows climbed past the race's stalled candidate;
# controller_half/screen_ceiling.py), then from x0.5 on every seed of queue_session47.sh whose race recorded a stalled
# candidate below the highest scale the run reached. From the same worktree (PROBE_SHARE_TREE=/tmp/wt47). 4 processes.
cd "$(dirname "$0")/../.."
C=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
ONE="python benchmarks/controller_probe_share/run_one.py"
while pgrep -f "queue_session47.sh" > /dev/null; do sleep 20; done
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    c) echo controller_docstrings$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([c]=0.0003 [g]=0.0003 [i]=0.003)
binds() {  # exit 0 when the last HDET row of $1 climbed above its race's stall ceiling
  python - "$1" <<'PY'
import json, sys
from hdet_hf.start_race import stall_ceiling
rows = [json.loads(line) for line in open(sys.argv[1])]
row = [r for r in rows if r.get("start_race")][-1]
race = row["start_race"]
ceiling = stall_ceiling(race["probe_losses"], race["initial_probe_loss"], race["multipliers"])
highest = max(s["scale"] for s in row["syncs"])
sys.exit(0 if ceiling is not None and not race["lowered"] and highest > max(ceiling, race["scale"]) * 1.0001 else 1)
PY
}
for ts in c0 c2 g2; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  PROBE_SHARE_OUT=/tmp/ceil47_third $ONE "$(folder $t $s)" $ts ${C}_third "${BEST[$t]}"
done
for ts in i1 g0 c0 i2 g1 c1 i0 g2 c2; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  binds /tmp/half47/$ts/results.jsonl && PROBE_SHARE_OUT=/tmp/ceil47_half $ONE "$(folder $t $s)" $ts ${C}_half "${BEST[$t]}"
done
echo QUEUE B DONE
