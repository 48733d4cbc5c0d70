cd "$(dirname "$0")/../.." && set -e
# session 40 (reading 45): the race a replica group would run, one candidate per replica (4 replicas: start x
# {1, 2.154, 4.642, 10}, the controller's 10x bound), at one replica's batch, from 10x below ("lo"), the best LR
# ("be") and 3x above ("hi"). B_gap_and_se then holds the start candidate's gap to the winner and its paired se.
R="python benchmarks/controller_range_test/range_probe.py --modes B"
cand() { python -c "import sys; s=float(sys.argv[1]); print(','.join(f'{s*m:.4g}' for m in (1,2.154,4.642,10)))" "$1"; }
A="--batch_size 2"
F="--batch_size 2 --adam_beta2 0.99 --weight_decay 0.01"
E="--batch_size 1 --hidden_size 96 --num_hidden_layers 3 --intermediate_size 256 --adam_beta2 0.98 --weight_decay 0.02"
D="--batch_size 1 --hidden_size 128 --num_hidden_layers 4 --intermediate_size 344 --adam_beta2 0.95 --weight_decay 0.05"
BP="--batch_size 1 --adam_beta2 0.95 --weight_decay 0.1"
G="--task docstrings --batch_size 1 --adam_beta2 0.98 --weight_decay 0.01"
C="--task docstrings --batch_size 1"
run() {  # task flags best
  local t=$1 flags=$2 best=$3
  for K in 60 30; do for s in 0 1 2; do
    for st in lo be hi; do
      case $st in lo) x=$(python -c "print(f'{$best*0.1:.4g}')");; be) x=$best;; hi) x=$(python -c "print(f'{$best*3:.4g}')");; esac
      $R --name ${t}${s}_C${K}_${st} --steps $K $flags --seed $s --grid "$(cand $x)"
    done
  done; done
}
run a "$A" 0.01
run bp "$BP" 0.03
run e "$E" 0.01
run d "$D" 0.003
run g "$G" 0.0003
run c "$C" 0.0003
run f "$F" 0.01
