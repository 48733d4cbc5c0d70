# session 40 (reading 45): the start race (_race60) on every task, seed 0; scratch copies of each recorded folder
# (its DDP rows) under $PROBE_SHARE_OUT, the benchmark run from this repository. Paired baseline: the default's
# rows of benchmarks/controller_probe_share/<task><seed> (same library behaviour since session 36).
cd "$(dirname "$0")/../.."
export PROBE_SHARE_OUT=${PROBE_SHARE_OUT:-/tmp/race40}
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60
ONE="python benchmarks/controller_probe_share/run_one.py"
for start in low best high; do
  $ONE controller a0 ${R}_$start 0.01
  $ONE controller_1000_best0.03 bp0 ${R}_$start 0.03
  $ONE controller_heldout d0 ${R}_$start 0.003
  $ONE controller_heldout_e e0 ${R}_$start 0.01
  $ONE controller_heldout_f f0 ${R}_$start 0.01
  $ONE controller_heldout_h h0 ${R}_$start 0.01
  $ONE controller_docstrings c0 ${R}_$start 0.0003
  $ONE controller_heldout_g g0 ${R}_$start 0.0003
  $ONE controller_heldout_i i0 ${R}_$start 0.003
done
