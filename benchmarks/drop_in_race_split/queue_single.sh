# Session 57: today's single race (row readme_race) on the same cells, the baseline of the split (queue.sh): session
# 45's recorded readme_race rows came from a library before the race's two-step raise (session 46), so today's library
# reruns them (one of them, a 4 processes seed 2 from 10x below, now raises to 4.64x). Each folder starts as the
# recorded folder's DDP sweep. From a worktree of commit 264db82 (WT=/tmp/wt57).
set -e
B=/work/main/benchmarks/drop_in_race_split/today_single
cd "${WT:-/tmp/wt57}"
for f in drop_in_procs2 drop_in_procs4 drop_in_f_procs2; do
  [ -f $B/$f/results.jsonl ] || { mkdir -p $B/$f; grep '"row": "ddp"' /work/main/benchmarks/$f/results.jsonl > $B/$f/results.jsonl; }
done
A2="--num_processes 2 --batch_size 16"
A4="--num_processes 4 --batch_size 8"
F2="--num_processes 2 --batch_size 16 --max_steps 400 --adam_beta2 0.99 --weight_decay 0.01"
python scripts/benchmark_drop_in.py --resume $A4 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_procs4
python scripts/benchmark_drop_in.py --resume $A2 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_procs2
python scripts/benchmark_drop_in.py --resume $F2 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_f_procs2
