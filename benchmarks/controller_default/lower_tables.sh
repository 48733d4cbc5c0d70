# Session 43 (reading 48): the tables of the default since session 43, whose start race also lowers
# (`--hdet_start_race_lowers` unset). The lowering fired only on the classifiers from 3x above (every other race:
# benchmarks/controller_start_race/lower_default.md), so only those cells change: each table is
# `scripts/controller_seeds.py` on the same seed folders as the default's table beside it, with the lowering's rows
# joined from where they ran (`--rows_from`): at 4 processes benchmarks/controller_start_race/lower/<task><seed>.jsonl
# (session 42, with the cap; i seed 0, which did not lower, from session 43), at 2 processes
# benchmarks/controller_start_race/lower_procs2/<task><seed>.jsonl (session 43). README's summary
# (scripts/controller_summary.py) takes their 3x-above rows.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4
RACE=benchmarks/controller_start_race
four() {  # task best_lr folder (seeds 0-2: folder, folder_seed1, folder_seed2)
  python scripts/controller_seeds.py benchmarks/$3{,_seed1,_seed2} --best_lr "$2" --rows ${R}_race60_lower \
      --rows_from $RACE/lower/$1{0,1,2}.jsonl --out benchmarks/controller_default/$1_lower.md > /dev/null
}
two() {  # task best_lr (folders cuthalf_<task>_procs2{,_seed1,_seed2})
  python scripts/controller_seeds.py benchmarks/cuthalf_$1_procs2{,_seed1,_seed2} --best_lr "$2" \
      --rows ${R}_cut0.5_race60_lower --rows_from $RACE/lower_procs2/$1{0,1,2}.jsonl \
      --out benchmarks/controller_default/$1_procs2_lower.md > /dev/null
}
four c 0.0003 controller_docstrings
four g 0.0003 controller_heldout_g
four i 0.003 controller_heldout_i
for t in c g; do two $t 0.0003; done
two i 0.003
