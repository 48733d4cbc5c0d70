# Session 41 (reading 46): the queues as they ran, one after the other (race-only decisions, then full rows); the
# helpers are defined once, in the first section, and the later sections use them.
# queue42: 4-process race-only best/high seeds 1-2, 2-process race-only and full rows; queue43: 4-process
# race-only from 10x below with the below check; queue44: 2-process full rows from 10x below, seeds 1-2.

# ---- queue42
# Session 41: race decisions only (--race_only) where a full row is not needed, then 2-process full rows from 10x below.
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60
R2=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_cut0.5_race60
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {
  local sfx=$([ "$2" -gt 0 ] && echo "_seed$2")
  case $1 in
    a) [ "$2" -gt 0 ] && echo controller$sfx || echo controller;;
    bp) [ "$2" -gt 0 ] && echo controller_1000$sfx || echo controller_1000_best0.03;;
    c) echo controller_docstrings$sfx;;
    d) echo controller_heldout$sfx;;
    *) echo controller_heldout_$1$sfx;;
  esac
}
declare -A BEST=([a]=0.01 [bp]=0.03 [d]=0.003 [e]=0.01 [f]=0.01 [h]=0.01 [c]=0.0003 [g]=0.0003 [i]=0.003)
ro4() { PROBE_SHARE_OUT=/tmp/ro41 RUN_ONE_EXTRA=--race_only $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
p2folder() { echo "cuthalf_$1_procs2$([ "$2" -gt 0 ] && echo "_seed$2")"; }
ro2() { PROBE_SHARE_OUT=/tmp/ro41p2 RUN_ONE_EXTRA=--race_only $ONE "$(p2folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
full2() { PROBE_SHARE_OUT=/tmp/race41p2 $ONE "$(p2folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for s in 1 2; do for t in a bp d e f h c g i; do ro4 $t $s ${R}_high; done; done
for t in g i a f; do ro4 $t 2 ${R}_best; done
ro4 i 1 ${R}_best
for s in 1 2; do for t in bp h; do ro4 $t $s ${R}_best; done; done
ro4 c 2 ${R}_best
for t in a d e f h c g i; do ro2 $t 0 ${R2}_best; ro2 $t 0 ${R2}_high; done
for t in g c i a d f e h; do full2 $t 0 ${R2}_low; done
for s in 1 2; do for t in a d e f h c g i; do ro2 $t $s ${R2}_best; ro2 $t $s ${R2}_high; done; done

# ---- queue43
# the same helpers as above; the races with the check below the start go to their own scratch folder
ro4() { PROBE_SHARE_OUT=/tmp/ro43 RUN_ONE_EXTRA=--race_only $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
ro4 c 2 ${R}_high
for s in 0 1 2; do for t in a d f g c i; do ro4 $t $s ${R}_low; done; done
ro4 e 0 ${R}_low

# ---- queue44
for s in 1 2; do for t in g i a d f e h c; do full2 $t $s ${R2}_low; done; done
