# Session 44 (reading 49): the default's cells at the best LR and from 3x above with today's library, where
# README's summary quoted older libraries. Each table is `scripts/controller_seeds.py` on the same seed folders as
# the default's table beside it, with the rows gathered by benchmarks/controller_today/collect.py joined
# (`--rows_from`): at 4 processes session 36's default rows (marked *, `--same_as`: the race fires on none of these
# starts and leaves such a run bit for bit as it was) and this session's where those lack a seed; at 2 processes this
# session's runs. README's summary (scripts/controller_summary.py) takes their best-LR and 3x-above rows; the
# classifiers' 3x-above cells still come from the lowering's tables (`lower_tables.sh`), where the race fires.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4
T=benchmarks/controller_today
four() {  # task best_lr folder... (seed 0 first)
  local task=$1 best=$2; shift 2
  local from=() s=0
  for _ in "$@"; do
    if [ -f "$T/rows4/$task$s.jsonl" ]; then from+=("$T/rows4/$task$s.jsonl"); else from+=(-); fi
    s=$((s + 1))
  done
  python scripts/controller_seeds.py "${@/#/benchmarks/}" --best_lr "$best" --rows ${R}_race60_lower \
      --same_as "$R:best,high" --rows_from "${from[@]}" --out benchmarks/controller_default/${task}_today.md > /dev/null
}
two() {  # task best_lr (folders cuthalf_<task>_procs2{,_seed1,_seed2})
  python scripts/controller_seeds.py benchmarks/cuthalf_$1_procs2{,_seed1,_seed2} --best_lr "$2" \
      --rows ${R}_cut0.5_race60_lower --rows_from $T/rows2/$1{0,1,2}.jsonl \
      --out benchmarks/controller_default/$1_procs2_today.md > /dev/null
}
four a 0.01 controller controller_seed{1,2,3,4}
four bp 0.03 controller_1000_best0.03 controller_1000_seed{1,2}
four c 0.0003 controller_docstrings{,_seed1,_seed2}
four d 0.003 controller_heldout{,_seed1,_seed2}
for t in e f h; do four $t 0.01 controller_heldout_${t}{,_seed1,_seed2}; done
four g 0.0003 controller_heldout_g{,_seed1,_seed2}
four i 0.003 controller_heldout_i{,_seed1,_seed2}
for t in a d e f h i c g; do
  case $t in d) best=0.003;; i) best=0.003;; c|g) best=0.0003;; *) best=0.01;; esac
  # Only tasks whose three seeds all ran (the queue was stopped before the last classifier runs).
  if [ -f $T/rows2/${t}0.jsonl ] && [ -f $T/rows2/${t}1.jsonl ] && [ -f $T/rows2/${t}2.jsonl ]; then two $t $best; fi
done
