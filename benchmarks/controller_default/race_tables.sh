# Session 42: the start race's tables for the default since session 42 (`--hdet_start_race_steps` unset races 60
# steps). Each is `scripts/controller_seeds.py` on the same seed folders as the default's table beside it, with the
# race's rows joined from where they ran (`--rows_from`): at 4 processes
# benchmarks/controller_start_race/results/<task><seed>.jsonl (sessions 40 and 42), at 2 processes
# benchmarks/controller_start_race/procs2/<task><seed>.jsonl (session 41). Only the rows from 10x below enter
# README's summary (scripts/controller_summary.py): at the best LR and from 3x above the race raised on none of the
# seeds (benchmarks/controller_start_race/decisions.md), so those runs are the default's and its cells stand.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4
RACE=benchmarks/controller_start_race
four() {  # task best_lr folder... (seed 0 first)
  local task=$1 best=$2; shift 2
  local from=() s=0
  for _ in "$@"; do from+=("$RACE/results/$task$s.jsonl"); s=$((s + 1)); done
  python scripts/controller_seeds.py "${@/#/benchmarks/}" --best_lr "$best" --rows ${R}_race60 \
      --rows_from "${from[@]}" --out benchmarks/controller_default/${task}_race.md > /dev/null
}
two() {  # task best_lr (folders cuthalf_<task>_procs2{,_seed1,_seed2})
  python scripts/controller_seeds.py benchmarks/cuthalf_$1_procs2{,_seed1,_seed2} --best_lr "$2" \
      --rows ${R}_cut0.5_race60 --rows_from $RACE/procs2/$1{0,1,2}.jsonl \
      --out benchmarks/controller_default/$1_procs2_race.md > /dev/null
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
