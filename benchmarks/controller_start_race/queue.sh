# Session 40 (reading 45): the start race (_race60) against the default, paired, 4 processes. Scratch copies of each
# recorded folder (its DDP rows) under $PROBE_SHARE_OUT; the default's rows are those of
# benchmarks/controller_probe_share/<task><seed> (same library behaviour since session 36; the race rows that did not
# raise reproduce them to the printed digits), and f2 / h2's default rows run here beside the race.
cd "$(dirname "$0")/../.."
export PROBE_SHARE_OUT=${PROBE_SHARE_OUT:-/tmp/race40}
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60
ONE="python benchmarks/controller_probe_share/run_one.py"
folder() {  # task seed -> recorded folder
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
run() { $ONE "$(folder "$1" "$2")" "$1$2" "$3" "${BEST[$1]}"; }
for t in a d e f g i c; do run $t 0 ${R}_low; done
for t in a f g i; do run $t 0 ${R}_best; done
for s in 1 2; do for t in a d e f g i c bp h; do run $t $s ${R}_low; done; done
run f 2 ${R%_race60}_low
run h 2 ${R%_race60}_low
for t in a bp d e f h c g i; do run $t 0 ${R}_high; done
for s in 1 2; do for t in a f e d g c i; do run $t $s ${R}_best; done; done
