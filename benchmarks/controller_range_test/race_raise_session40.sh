cd "$(dirname "$0")/../.." && set -e
# session 40 (reading 45): the race at one replica's batch (global batch / 4) on the language models, on a grid that
# holds every raise-only candidate set start x {1, 2.15, 4.64, 10} from 10x below, the best LR and 3x above.
R="python benchmarks/controller_range_test/range_probe.py --modes B"
grid() { python -c "import sys; b=float(sys.argv[1]); print(','.join(f'{b*m:.4g}' for m in (0.1,0.215,0.464,1,2.15,3,4.64,6.45,10,13.9,30)))" "$1"; }
A="--batch_size 2"
F="--batch_size 2 --adam_beta2 0.99 --weight_decay 0.01"
E="--batch_size 1 --hidden_size 96 --num_hidden_layers 3 --intermediate_size 256 --adam_beta2 0.98 --weight_decay 0.02"
D="--batch_size 1 --hidden_size 128 --num_hidden_layers 4 --intermediate_size 344 --adam_beta2 0.95 --weight_decay 0.05"
BP="--batch_size 1 --adam_beta2 0.95 --weight_decay 0.1"
for K in 60 30; do
  for s in 0 1 2; do
    $R --name a${s}_R${K}_replica --steps $K $A --seed $s --grid "$(grid 0.01)"
    $R --name bp${s}_R${K}_replica --steps $K $BP --seed $s --grid "$(grid 0.03)"
    $R --name e${s}_R${K}_replica --steps $K $E --seed $s --grid "$(grid 0.01)"
    $R --name f${s}_R${K}_replica --steps $K $F --seed $s --grid "$(grid 0.01)"
    $R --name d${s}_R${K}_replica --steps $K $D --seed $s --grid "$(grid 0.003)"
  done
done
