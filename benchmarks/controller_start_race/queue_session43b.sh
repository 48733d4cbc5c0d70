# Session 43 (reading 48), after queue_session43.sh: task i seed 0 from 3x above at 4 processes with the lowering
# row (its race does not lower: the run is the default's, recorded under the lowering row's name for the tables).
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
PROBE_SHARE_OUT=/tmp/race43l4 python benchmarks/controller_probe_share/run_one.py controller_heldout_i i0 ${L}_high 0.003
