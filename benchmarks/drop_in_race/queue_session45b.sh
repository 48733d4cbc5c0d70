# Session 45, after queue_session45.sh: `readme` with today's library (the same worktree) from 10x below, into
# scratch copies of each folder's DDP rows (the recorded `readme` rows are from sessions 31-35's libraries; a race
# that changes nothing leaves `readme_race` bit for bit today's `readme`: best LR seed 0 at 2 processes, 3.9457841873168946).
set -e
B=/work/main/benchmarks
cd "${WT:-/tmp/wt45d}"
for f in drop_in_procs2 drop_in_procs4 drop_in_f_procs2; do
  mkdir -p $B/drop_in_race/today_readme_$f
  python - "$B/$f/results.jsonl" "$B/drop_in_race/today_readme_$f/results.jsonl" <<'PY'
import json, sys
rows = [line for line in open(sys.argv[1]) if json.loads(line)["row"] == "ddp"]
open(sys.argv[2], "w").write("".join(rows))
PY
done
python scripts/benchmark_drop_in.py --resume --num_processes 2 --batch_size 16 --seeds 0,1,2 --configs readme --starts low --out_dir $B/drop_in_race/today_readme_drop_in_procs2
python scripts/benchmark_drop_in.py --resume --num_processes 4 --batch_size 8 --seeds 0,1,2 --configs readme --starts low --out_dir $B/drop_in_race/today_readme_drop_in_procs4
python scripts/benchmark_drop_in.py --resume --num_processes 2 --batch_size 16 --max_steps 400 --adam_beta2 0.99 --weight_decay 0.01 --seeds 0,1,2 --configs readme --starts low --out_dir $B/drop_in_race/today_readme_drop_in_f_procs2
