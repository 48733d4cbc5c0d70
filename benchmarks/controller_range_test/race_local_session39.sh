cd "$(dirname "$0")/../.." && set -e  # session 39: the race at one replica batch (4 examples: --batch_size 1 x 4) on the classifier g
R="python benchmarks/controller_range_test/range_probe.py --modes B"
G="--task docstrings --adam_beta2 0.98 --weight_decay 0.01 --grid 3e-5,1e-4,3e-4,1e-3,3e-3"
for s in 0 1 2; do
  $R --name g${s}_B30_local --steps 30 $G --batch_size 1 --seed $s
done
for s in 0 1 2; do
  $R --name g${s}_B60_local --steps 60 $G --batch_size 1 --seed $s
done
