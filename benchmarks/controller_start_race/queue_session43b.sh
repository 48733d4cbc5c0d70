# Session 43 (reading 48), after queue_session43.sh: task i seed 0 from 3x above at 4 processes with the lowering
# row (its race does not lower: the run is the default's, recorded under the lowering row's name for the tables).
cd "$(dirname "$0")/../.."
L=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower
PROBE_SHARE_OUT=/tmp/race43l4 python benchmarks/controller_probe_share/run_one.py controller_heldout_i i0 ${L}_high 0.003
# Then the 2-process default before this session (the race raises only; from 3x above it did not raise, so these
# are the previous default's runs with today's library) where the lowering fired, for a paired comparison; the
# recorded 2-process default rows (session 30's `_cut0.5_high`) come from an older library.
R2=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60
declare -A BEST=([c]=0.0003 [g]=0.0003 [i]=0.003)
for ts in c0 g0 i1 c1 g1 c2 g2; do
  t=${ts%[0-9]} s=${ts#?}
  PROBE_SHARE_OUT=/tmp/race43r2 python benchmarks/controller_probe_share/run_one.py \
      "cuthalf_${t}_procs2$([ "$s" -gt 0 ] && echo "_seed$s")" "$ts" ${R2}_high "${BEST[$t]}"
done
