#!/bin/bash
# Session 53: today's default (row ..._probespread_raceprobe) on the language models a, f, h, e, d at 2 processes
# (queue.sh) and b' at 4 (queue_bp.sh), 3 seeds, every start, each cell its own run. Collects the HDET rows of the
# scratch folders (/tmp/q53/<task>_procs2_<seed>, /tmp/q53/bp_<seed>) into runs/, then writes
# benchmarks/controller_default/<task>_procs2_raceprobe.md against session 30's folders' DDP rows, and bp_raceprobe.md.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread_raceprobe
N=benchmarks/controller_today_s53/runs
mkdir -p $N
for f in /tmp/q53/*_procs2_*/results.jsonl /tmp/q53/bp_*/results.jsonl; do
  [ -f "$f" ] || continue
  name=$(basename "$(dirname "$f")")
  python -c "import json,sys; [print(l, end='') for l in open(sys.argv[1]) if json.loads(l).get('kind') != 'ddp']" "$f" > $N/$name.jsonl
done
for spec in a:0.01 f:0.01 h:0.01 e:0.01 d:0.003; do
  t=${spec%%:*}; best=${spec#*:}
  files=(); for s in 0 1 2; do files+=($([ -s $N/${t}_procs2_$s.jsonl ] && echo $N/${t}_procs2_$s.jsonl || echo -)); done
  [ "${files[*]}" = "- - -" ] && continue
  python scripts/controller_seeds.py benchmarks/cuthalf_${t}_procs2{,_seed1,_seed2} --best_lr $best --rows $R \
    --rows_from "${files[@]}" --out benchmarks/controller_default/${t}_procs2_raceprobe.md
done
files=(); for s in 0 1 2; do files+=($([ -s $N/bp_$s.jsonl ] && echo $N/bp_$s.jsonl || echo -)); done
if [ "${files[*]}" != "- - -" ]; then
  python scripts/controller_seeds.py benchmarks/controller_1000_best0.03 benchmarks/controller_1000_seed{1,2} \
    --best_lr 0.03 --rows $R --rows_from "${files[@]}" --out benchmarks/controller_default/bp_raceprobe.md
fi
