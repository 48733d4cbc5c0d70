# Session 57: the drop-in's race as HDETTrainer runs it (row readme_race_trainer: split by share and scored on 128
# train blocks spread over the set), the same cells as queue.sh, into the same folders. From a worktree of commit
# e73216a (WT=/tmp/wt57b; at d8a36e5 the row ran without its race: those rows were removed).
set -e
B=/work/main/benchmarks/drop_in_race_split
cd "${WT:-/tmp/wt57b}"
A2="--num_processes 2 --batch_size 16"
A4="--num_processes 4 --batch_size 8"
F2="--num_processes 2 --batch_size 16 --max_steps 400 --adam_beta2 0.99 --weight_decay 0.01"
python scripts/benchmark_drop_in.py --resume $A4 --seeds 0,1,2 --configs readme_race_trainer --out_dir $B/drop_in_procs4
python scripts/benchmark_drop_in.py --resume $A2 --seeds 0,1,2 --configs readme_race_trainer --out_dir $B/drop_in_procs2
python scripts/benchmark_drop_in.py --resume $F2 --seeds 0,1,2 --configs readme_race_trainer --out_dir $B/drop_in_f_procs2
