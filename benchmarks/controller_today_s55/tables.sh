#!/bin/bash
# Session 55: collects the HDET rows of the scratch folders (/tmp/q55/<task>_procs2_<seed>) into runs/, then writes
# benchmarks/controller_default/<task>_procs2_raceprobe.md for each classifier with all 3 seeds (seed 0 of g and i
# from session 52's runs, c's best-LR row of seed 0 from session 54's): the README summary reads every table there.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
N=benchmarks/controller_today_s55/runs
mkdir -p $N
for f in /tmp/q55/*_procs2_*/results.jsonl; do
  [ -f "$f" ] || continue
  name=$(basename "$(dirname "$f")")
  python -c "import json,sys; [print(l, end='') for l in open(sys.argv[1]) if json.loads(l).get('kind') != 'ddp']" "$f" > $N/$name.jsonl
done
# c seed 0: session 54's best-LR row and this session's other two, in one file.
if [ -s $N/c_procs2_0.jsonl ] && ! grep -q '"start": "best"' $N/c_procs2_0.jsonl; then
  cat benchmarks/controller_today_s54/runs/c_procs2_0.jsonl $N/c_procs2_0.jsonl > $N/c_procs2_0.tmp && mv $N/c_procs2_0.tmp $N/c_procs2_0.jsonl
fi
complete() {  # a run file holds all three starts
  [ -s "$1" ] && [ "$(python -c "import json,sys; print(len({json.loads(l)['start'] for l in open(sys.argv[1])}))" "$1")" = 3 ]
}
for t in c g i; do
  best=0.0003; [ $t = i ] && best=0.003
  s0=$N/${t}_procs2_0.jsonl; [ $t != c ] && s0=benchmarks/controller_today_s52/runs/${t}_procs2_0.jsonl
  files=($s0 $N/${t}_procs2_1.jsonl $N/${t}_procs2_2.jsonl)
  ok=1; for f in "${files[@]}"; do complete $f || ok=0; done
  [ $ok = 1 ] && python scripts/controller_seeds.py benchmarks/cuthalf_${t}_procs2{,_seed1,_seed2} --best_lr $best \
    --rows $R --rows_from "${files[@]}" --out benchmarks/controller_default/${t}_procs2_raceprobe.md
done
true
