#!/bin/bash
# Session 54: collects the HDET rows of the scratch folders (/tmp/q54/b_<seed>, /tmp/q54/c_procs2_<seed>) into runs/,
# then writes benchmarks/controller_default/b_raceprobe.md (and c_procs2_raceprobe.md) against those folders' DDP rows.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
N=benchmarks/controller_today_s54/runs
mkdir -p $N
for f in /tmp/q54/b_*/results.jsonl /tmp/q54/c_procs2_*/results.jsonl; do
  [ -f "$f" ] || continue
  name=$(basename "$(dirname "$f")")
  python -c "import json,sys; [print(l, end='') for l in open(sys.argv[1]) if json.loads(l).get('kind') != 'ddp']" "$f" > $N/$name.jsonl
done
files() { for s in 0 1 2; do [ -s $N/$1_$s.jsonl ] && echo $N/$1_$s.jsonl || echo -; done; }
b=($(files b))
[ "${b[*]}" != "- - -" ] && python scripts/controller_seeds.py benchmarks/controller_long{,_seed1,_seed2} --best_lr 0.01 \
  --rows $R --rows_from "${b[@]}" --out benchmarks/controller_default/b_raceprobe.md
# c at 2 processes: only a table of all 3 seeds (the README summary reads every table of the folder; queue_c.sh was
# stopped after seed 0's best-LR row, which runs/c_procs2_0.jsonl keeps).
c=($(files c_procs2))
[[ "${c[*]}" != *-* ]] && python scripts/controller_seeds.py benchmarks/cuthalf_c_procs2{,_seed1,_seed2} --best_lr 0.0003 \
  --rows $R --rows_from "${c[@]}" --out benchmarks/controller_default/c_procs2_raceprobe.md
true
