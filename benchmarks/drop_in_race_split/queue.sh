# Session 57: the drop-in's split race (row readme_race_split: the candidates on half the global batch, the start and
# the copy below it again on a quarter) beside session 45's readme_race rows, task a at 2 and 4 processes and task f at
# 2, 3 seeds, every start; from a worktree of commit 264db82 (WT=/tmp/wt57). Each folder starts as a copy of the
# recorded folder (its DDP sweep and readme_race rows); a control reruns readme_race on one cell per folder (scratch).
set -e
B=/work/main/benchmarks/drop_in_race_split
cd "${WT:-/tmp/wt57}"
for f in drop_in_procs2 drop_in_procs4 drop_in_f_procs2; do
  [ -f $B/$f/results.jsonl ] || { mkdir -p $B/$f; cp /work/main/benchmarks/$f/results.jsonl $B/$f/; }
done
A2="--num_processes 2 --batch_size 16"
A4="--num_processes 4 --batch_size 8"
F2="--num_processes 2 --batch_size 16 --max_steps 400 --adam_beta2 0.99 --weight_decay 0.01"
python scripts/benchmark_drop_in.py --resume $A4 --seeds 0,1,2 --starts low --configs readme_race_split --out_dir $B/drop_in_procs4
python scripts/benchmark_drop_in.py --resume $A2 --seeds 0,1,2 --starts low --configs readme_race_split --out_dir $B/drop_in_procs2
python scripts/benchmark_drop_in.py --resume $F2 --seeds 0,1,2 --starts low --configs readme_race_split --out_dir $B/drop_in_f_procs2
# control: today's library reruns a recorded readme_race cell bit for bit (scratch folders)
python scripts/benchmark_drop_in.py $A4 --seeds 2 --starts low --configs readme_race --out_dir /tmp/control57_a4
python scripts/benchmark_drop_in.py --resume $A4 --seeds 0,1,2 --starts high,best --configs readme_race_split --out_dir $B/drop_in_procs4
python scripts/benchmark_drop_in.py --resume $A2 --seeds 0,1,2 --starts high,best --configs readme_race_split --out_dir $B/drop_in_procs2
python scripts/benchmark_drop_in.py --resume $F2 --seeds 0,1,2 --starts high,best --configs readme_race_split --out_dir $B/drop_in_f_procs2
