#!/bin/bash
# Session 47, after queue_session47b.sh: the stall ceiling at the classifiers' best LR at 4 processes, where the
# 2-process races saw the 2.15x copy stall (ceiling 1.0: no raise above the start) and the default's runs raised the
# LR 1.2-1.7x. Per seed: the default (_twosteps_best), then, where it climbed above its race's ceiling, the same row
# with the ceiling (_twosteps_ceil_best). Same worktree (PROBE_SHARE_TREE=/tmp/wt47). 4 processes.
cd "$(dirname "$0")/../.."
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    c) echo controller_docstrings$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
binds() {  # exit 0 when the last HDET row of $1 climbed above its race's stall ceiling
  python - "$1" <<'PY'
import json, sys
from hdet_hf.start_race import stall_ceiling
rows = [json.loads(line) for line in open(sys.argv[1])]
row = [r for r in rows if r.get("start_race")][-1]
race = row["start_race"]
ceiling = stall_ceiling(race["probe_losses"], race["initial_probe_loss"], race["multipliers"])
highest = max(s["scale"] for s in row["syncs"])
print("ceiling", ceiling, "highest", highest)
sys.exit(0 if ceiling is not None and not race["lowered"] and highest > max(ceiling, race["scale"]) * 1.0001 else 1)
PY
}
for ts in ${JOBS:-g2 c1 g0 c2 g1 c0}; do
  t=${ts%[0-9]} s=${ts#${ts%[0-9]}}
  PROBE_SHARE_OUT=/tmp/best47 $ONE "$(folder $t $s)" $ts ${T}_best 0.0003
  binds /tmp/best47/$ts/results.jsonl && PROBE_SHARE_OUT=/tmp/ceil47_best $ONE "$(folder $t $s)" $ts ${T}_ceil_best 0.0003
done
echo QUEUE C DONE
