#!/bin/bash
# Session 52: today's default (row ..._probespread_raceprobe) on tasks a, d, e, f, h at 4 processes, 3 seeds.
# Seed 0 takes the spread probe's runs of session 50 (race on 32 examples; marked *) where the race on 128 examples
# decided the same (race-only, benchmarks/controller_race_lost_ground/race_probe/), and its own run elsewhere.
set -e
cd "$(dirname "$0")/../.."
R=shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4_race60_lower_largest_twosteps_ceil_probespread
S=benchmarks/controller_probe_spread/runs
N=benchmarks/controller_today_s52/runs
table() { # task folder best_lr seed0-files
  python scripts/controller_seeds.py benchmarks/$2 benchmarks/${2}_seed1 benchmarks/${2}_seed2 --best_lr $3 \
    --rows ${R}_raceprobe --same_as $R --rows_from $4 $N/${1}1.jsonl $N/${1}2.jsonl \
    --out benchmarks/controller_default/${1}_raceprobe.md
}
table a controller 0.01 $S/a0.jsonl
table d controller_heldout 0.003 $N/d0.jsonl
table e controller_heldout_e 0.01 benchmarks/controller_race_lost_ground/race_probe_runs/e0.jsonl,$S/e0.jsonl
table f controller_heldout_f 0.01 $N/f0.jsonl,$S/f0.jsonl
table h controller_heldout_h 0.01 $N/h0.jsonl,$S/h0.jsonl
# Task k: seeds 1-2 from 10x below ran again (their 128-example race raised to 10x, the 32-example one to 4.64x);
# every other cell is the lost-ground table's (from 3x above) or the spread probe's, whose races decided the same.
L=benchmarks/controller_race_lost_ground/runs
python scripts/controller_seeds.py benchmarks/controller_heldout_k{,_seed1,_seed2} --best_lr 0.03 \
  --rows ${R}_raceprobe --same_as $R --rows_from $L/k0.jsonl,$S/k0.jsonl $N/k1.jsonl,$L/k1.jsonl,$S/k1.jsonl \
  $N/k2.jsonl,$L/k2.jsonl,$S/k2.jsonl --out benchmarks/controller_default/k_raceprobe.md
