# Session 45: the drop-in's start race (`OneCycleAutoLR.start_race`, row readme_race) beside the recorded rows, task a
# at 2 and 4 processes and task f at 2, 3 seeds, from a worktree of the session's commit (WT=/tmp/wt45d).
set -e
B=/work/main/benchmarks
cd "${WT:-/tmp/wt45d}"
python scripts/benchmark_drop_in.py --resume --num_processes 2 --batch_size 16 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_procs2
python scripts/benchmark_drop_in.py --resume --num_processes 4 --batch_size 8 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_procs4
python scripts/benchmark_drop_in.py --resume --num_processes 2 --batch_size 16 --max_steps 400 --adam_beta2 0.99 --weight_decay 0.01 --seeds 0,1,2 --configs readme_race --out_dir $B/drop_in_f_procs2
