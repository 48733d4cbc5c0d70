cd "$(dirname "$0")/../.." && set -e  # session 38: the race (mode B) at K 30 and 60, with paired standard errors
R="python benchmarks/controller_range_test/range_probe.py --modes B"
LM5="--grid 1e-3,3e-3,1e-2,3e-2,1e-1"
F="--batch_size 8 --hidden_size 64 --num_hidden_layers 2 --intermediate_size 172 --adam_beta2 0.99 --weight_decay 0.01"
D="--batch_size 4 --hidden_size 128 --num_hidden_layers 4 --intermediate_size 344 --adam_beta2 0.95 --weight_decay 0.05"
E="--batch_size 4 --hidden_size 96 --num_hidden_layers 3 --intermediate_size 256 --adam_beta2 0.98 --weight_decay 0.02"
BP="--batch_size 4 --adam_beta2 0.95 --weight_decay 0.1"
G="--task docstrings --batch_size 4 --adam_beta2 0.98 --weight_decay 0.01 --grid 3e-5,1e-4,3e-4,1e-3,3e-3"
for K in 30 60; do
  $R --name a_B${K}s --steps $K $LM5
  $R --name f_B${K}s --steps $K $LM5 $F
  $R --name e_B${K}s --steps $K $LM5 $E
  $R --name d_B${K}s --steps $K $LM5 $D
  $R --name bp_B${K}s --steps $K $LM5 $BP
  $R --name g_B${K}s --steps $K $G
  $R --name g1_B${K}s --steps $K $G --seed 1
done
