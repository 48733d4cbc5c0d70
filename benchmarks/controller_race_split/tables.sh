#!/bin/bash
# Session 56 (BENCHMARKS.md item 58): the README summary's cells under the race split by share (the defaults since
# session 56), per derive.py: where the split decides as today's race, today's run (a race that decides the same, with
# a stall ceiling the run never reached, leaves the run bit for bit); where it decides otherwise, the recorded full
# run whose race decided as the split does (4 processes, from 10x below: item 56's runs on half the global batch,
# controller_today_s54/full/; 2 processes, from 3x above: item 57's runs on a quarter, controller_today_s55/quarter2p_full/;
# a lowered run never rises above its start, so the stall ceiling, which differs there, cannot bind).
# Writes benchmarks/controller_default/{a,e,f}_split.md and {c,i}_procs2_split.md (the README summary's "split" overlay).
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread
S=benchmarks/controller_probe_spread/runs
N=benchmarks/controller_today_s52/runs
H=benchmarks/controller_today_s54/full
Q=benchmarks/controller_today_s55/quarter2p_full
T=benchmarks/controller_today_s55/runs
table4() { # task folder best_lr seed0-files seed1-files seed2-files (as controller_today_s52/tables.sh, the split's runs first)
  python scripts/controller_seeds.py benchmarks/$2 benchmarks/${2}_seed1 benchmarks/${2}_seed2 --best_lr $3 \
    --rows ${R}_raceprobe --same_as $R --rows_from $4 $5 $6 --out benchmarks/controller_default/${1}_split.md
}
table4 a controller 0.01 $H/a0.jsonl,$S/a0.jsonl $N/a1.jsonl $N/a2.jsonl
table4 e controller_heldout_e 0.01 $H/e0.jsonl,benchmarks/controller_race_lost_ground/race_probe_runs/e0.jsonl,$S/e0.jsonl \
  $H/e1.jsonl,$N/e1.jsonl $N/e2.jsonl
table4 f controller_heldout_f 0.01 $H/f0.jsonl,$N/f0.jsonl,$S/f0.jsonl $N/f1.jsonl $N/f2.jsonl
python scripts/controller_seeds.py benchmarks/cuthalf_c_procs2{,_seed1,_seed2} --best_lr 0.0003 --rows ${R}_raceprobe \
  --rows_from $Q/c0_high.jsonl,$T/c_procs2_0.jsonl $T/c_procs2_1.jsonl $T/c_procs2_2.jsonl \
  --out benchmarks/controller_default/c_procs2_split.md
python scripts/controller_seeds.py benchmarks/cuthalf_i_procs2{,_seed1,_seed2} --best_lr 0.003 --rows ${R}_raceprobe \
  --rows_from $Q/i0_high.jsonl,$N/i_procs2_0.jsonl $Q/i1_high.jsonl,$T/i_procs2_1.jsonl $T/i_procs2_2.jsonl \
  --out benchmarks/controller_default/i_procs2_split.md
