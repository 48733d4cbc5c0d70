# Session 45: the paired "winner" runs (`_race60_lower`, raise to the race's winner) for the between-starts races
# where "largest" raised past the winner (queue_session45.sh: c0, g2, i2 from x0.2, i0 from x1/3). From a worktree of
# the commit that lists these rows (PROBE_SHARE_TREE=/tmp/wt45w).
cd "$(dirname "$0")/../.."
W=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
ONE="python benchmarks/controller_probe_share/run_one.py"
PROBE_SHARE_OUT=/tmp/win45_fifth $ONE controller_docstrings c0 ${W}_fifth 0.0003
PROBE_SHARE_OUT=/tmp/win45_fifth $ONE controller_heldout_g_seed2 g2 ${W}_fifth 0.0003
PROBE_SHARE_OUT=/tmp/win45_fifth $ONE controller_heldout_i_seed2 i2 ${W}_fifth 0.003
PROBE_SHARE_OUT=/tmp/win45_third $ONE controller_heldout_i i0 ${W}_third 0.003
