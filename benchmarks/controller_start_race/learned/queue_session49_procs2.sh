#!/bin/bash
# Session 49: task j at 2 processes, the runs whose race lowered under the significance gate alone, rerun with the
# least-progress gate (worktree /tmp/wt49d at the commit that added it) into /tmp/learned49_p2/<seed>.
cd /tmp/wt49d
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 8 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400 --num_processes 2"
for s in 0 1 2; do
  sfx=$([ $s -gt 0 ] && echo "_seed$s")
  src=/work/main/benchmarks/controller_heldout_j_procs2$sfx/results.jsonl
  rows=$(python - "$src" <<'PY'
import json, sys
print(",".join(r["name"] for r in map(json.loads, open(sys.argv[1])) if (r.get("start_race") or {}).get("lowered")))
PY
)
  [ -z "$rows" ] && continue
  out=/tmp/learned49_p2/$s; mkdir -p $out; grep '"kind": "ddp"' $src > $out/results.jsonl
  PYTHONPATH=/tmp/wt49d python scripts/benchmark_quality.py --out_dir $out --resume --seed $s $J \
    --grid 0.01 --max_grid_extensions 0 --best_lr 0.01 --configs $rows
done
echo QUEUE DONE
