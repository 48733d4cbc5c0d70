# Session 46 (reading 51): the table of the default since session 46, whose start race also raises on a falling trend
# over two steps up (`--hdet_start_race_raise_on two_steps`). Of the 241 recorded races its rule changes 14 (a start
# that did not come last, the means falling to a winner at 4.64x or 10x; benchmarks/controller_start_race/twosteps.md),
# and of those only one from 10x below: task a seed 3 at 4 processes. So only a's 4-process 10x-below cell moves:
# a_twosteps.md is `scripts/controller_seeds.py` on a's seed folders, joining seed 3's two_steps row
# (controller_start_race/twosteps/two_low_a3.jsonl) and, for the other seeds, the rows of a_largest.md (the same
# runs bit for bit: their races do not change; marked *). README's summary (scripts/controller_summary.py) takes its
# 10x-below row.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4
RACE=benchmarks/controller_start_race
joined() {  # seed: the file to join for that seed
  if [ -f "$RACE/twosteps/two_low_a$1.jsonl" ]; then echo "$RACE/twosteps/two_low_a$1.jsonl"
  elif [ -f "$RACE/largest/a$1.jsonl" ]; then echo "$RACE/largest/a$1.jsonl"; else echo "$RACE/results/a$1.jsonl"; fi
}
from=()
for s in 0 1 2 3 4; do from+=("$(joined $s)"); done
python scripts/controller_seeds.py benchmarks/controller benchmarks/controller_seed{1,2,3,4} --best_lr 0.01 \
    --rows ${R}_race60_lower_largest_twosteps --same_as "${R}_race60_lower_largest:low" --same_as "${R}_race60:low" \
    --rows_from "${from[@]}" --out benchmarks/controller_default/a_twosteps.md > /dev/null
