# Session 44 (reading 49): the tables of the default since session 44, whose start race raises to the largest
# candidate that beat the start (`--hdet_start_race_raise_to largest`). It changes only races that raise, so only the
# 10x-below cells: each table is `scripts/controller_seeds.py` on the same seed folders as the race table beside it,
# joining per seed benchmarks/controller_start_race/largest/<task><seed>.jsonl (4 processes) or largest_procs2/ (2)
# where the option was raced, else the recorded race rows (results/, procs2/). A seed whose race picked the same scale
# as the winner's takes the recorded winner's row (marked *, `--same_as`: the same run bit for bit). README's summary
# (scripts/controller_summary.py) takes their 10x-below rows.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4
RACE=benchmarks/controller_start_race
joined() {  # sub recorded task seed: the file to join for that seed
  if [ -f "$RACE/$1/$3$4.jsonl" ]; then echo "$RACE/$1/$3$4.jsonl"; else echo "$RACE/$2/$3$4.jsonl"; fi
}
four() {  # task best_lr folder... (seed 0 first)
  local task=$1 best=$2; shift 2
  local from=() s=0
  for _ in "$@"; do from+=("$(joined largest results "$task" $s)"); s=$((s + 1)); done
  python scripts/controller_seeds.py "${@/#/benchmarks/}" --best_lr "$best" --rows ${R}_race60_lower_largest \
      --same_as "${R}_race60:low" --rows_from "${from[@]}" --out benchmarks/controller_default/${task}_largest.md > /dev/null
}
two() {  # task best_lr (folders cuthalf_<task>_procs2{,_seed1,_seed2})
  local from=()
  for s in 0 1 2; do from+=("$(joined largest_procs2 procs2 "$1" $s)"); done
  python scripts/controller_seeds.py benchmarks/cuthalf_$1_procs2{,_seed1,_seed2} --best_lr "$2" \
      --rows ${R}_cut0.5_race60_lower_largest --same_as "${R}_cut0.5_race60:low" --rows_from "${from[@]}" \
      --out benchmarks/controller_default/$1_procs2_largest.md > /dev/null
}
four a 0.01 controller controller_seed{1,2,3,4}
four b 0.01 controller_long controller_long_seed{1,2}
four bp 0.03 controller_1000_best0.03 controller_1000_seed{1,2}
four c 0.0003 controller_docstrings{,_seed1,_seed2}
four d 0.003 controller_heldout{,_seed1,_seed2}
for t in e f h; do four $t 0.01 controller_heldout_${t}{,_seed1,_seed2}; done
four g 0.0003 controller_heldout_g{,_seed1,_seed2}
four i 0.003 controller_heldout_i{,_seed1,_seed2}
for t in a e f h; do two $t 0.01; done
two d 0.003
two i 0.003
for t in c g; do two $t 0.0003; done
