# Session 42: the start race where the summary had no race yet -- task b (2,000 steps) on seeds 0-2 and task a
# seeds 3-4 (4 processes) -- from a worktree of the library at the session's first commit (PROBE_SHARE_TREE), so
# that edits made while it ran do not reach it.
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60
ONE="python benchmarks/controller_probe_share/run_one.py"
full4() { PROBE_SHARE_OUT=/tmp/race42 $ONE "$1" "$2" "$3" "$4"; }
ro4() { PROBE_SHARE_OUT=/tmp/ro42 RUN_ONE_EXTRA=--race_only $ONE "$1" "$2" "$3" "$4"; }
for s in 0 1 2; do
  f=controller_long$([ $s -gt 0 ] && echo "_seed$s")
  full4 $f b$s ${R}_low 0.01
  ro4 $f b$s ${R}_best,${R}_high 0.01
done
for s in 3 4; do
  full4 controller_seed$s a$s ${R}_low 0.01
  ro4 controller_seed$s a$s ${R}_high 0.01
done
