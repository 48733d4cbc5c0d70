#!/bin/bash
# Session 49: the race lowers only where the copy below the start learned (beat the initial weights by 2 paired standard
# errors). Task j seed 1 at its best LR (the race lowered there on noise) as a full row; race-only decisions of every
# recorded lowering (c, g, i from 3x above, seeds 0-2, 4 processes) to check they stand. From a worktree of that commit.
cd /tmp/wt49c
T=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400"
mkdir -p /tmp/learned49/j1 && grep '"kind": "ddp"' /work/main/benchmarks/controller_heldout_j_seed1/results.jsonl > /tmp/learned49/j1/results.jsonl
PYTHONPATH=/tmp/wt49c python scripts/benchmark_quality.py --out_dir /tmp/learned49/j1 --resume --seed 1 $J \
  --grid 0.01 --max_grid_extensions 0 --best_lr 0.01 --configs ${T}_best
ONE="python benchmarks/controller_probe_share/run_one.py"
declare -A BEST=([c]=0.0003 [g]=0.0003 [i]=0.003)
for t in c g i; do for s in 0 1 2; do
  case $t in c) f=controller_docstrings;; *) f=controller_heldout_$t;; esac
  [ $s -gt 0 ] && f=${f}_seed$s
  PROBE_SHARE_TREE=/tmp/wt49c PROBE_SHARE_OUT=/tmp/learned49 RUN_ONE_EXTRA=--race_only $ONE $f $t$s ${T}_high "${BEST[$t]}"
done; done
echo QUEUE DONE
