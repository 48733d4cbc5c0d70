#!/bin/bash
# Session 49: --hdet_start_race_warmup 0.5 (the race's copies warm up over its first 30 of 60 steps). Held-out task j
# (a pretrained LM on code) full rows on seed 0; race-only decisions on seed 0 of every other task at every start.
# Ran from a worktree of the commit that added the setting (PROBE_SHARE_TREE=/tmp/wt49b), 4 processes.
cd /tmp/wt49b
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_rwu0.5
J="--corpus stdlib_code --init_from benchmarks/pretrained_tiny_lm --vocab_size 1024 --max_steps 200 --batch_size 4 --adam_beta2 0.95 --weight_decay 0.1 --eval_blocks 400"
PYTHONPATH=/tmp/wt49b python scripts/benchmark_quality.py --out_dir /work/main/benchmarks/controller_heldout_j --resume --seed 0 $J \
  --grid 0.01 --max_grid_extensions 0 --best_lr 0.01 --configs ${R}_low,${R}_best,${R}_high
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  case $1 in
    a) echo controller;; bp) echo controller_1000_best0.03;; c) echo controller_docstrings;; d) echo controller_heldout;;
    *) echo controller_heldout_$1;;
  esac
}
declare -A BEST=([a]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
for t in a bp d e f h c g i; do
  PROBE_SHARE_TREE=/tmp/wt49b PROBE_SHARE_OUT=/tmp/rwu49 RUN_ONE_EXTRA=--race_only $ONE "$(folder $t)" ${t}0 ${R}_best,${R}_high,${R}_low "${BEST[$t]}"
done
echo QUEUE DONE
