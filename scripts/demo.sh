#!/usr/bin/env bash
# One command on a fresh CPU machine: install hdet_hf, then fine-tune the embedded tiny Llama on the Python
# standard library's docstrings with HDET + auto-LR on 4 gloo processes (about 4 minutes on 2 cores).
# Extra arguments go to scripts/finetune_clm.py, e.g. `bash scripts/demo.sh --max_steps 200`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The CPU wheel first, so no dependency pulls a multi-GB CUDA build of torch.
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
python3 -m pip install --quiet --disable-pip-version-check -e .

out=outputs/demo
# No ACCELERATE_USE_CPU=1 needed: with --hdet the arguments set use_cpu on a machine without GPUs.
accelerate launch --config_file accelerate_configs/cpu_4proc.yaml \
    scripts/finetune_clm.py --output_dir "$out" --overwrite_output_dir --hdet --hdet_auto_lr "$@"

echo
echo "Look at: $out/hdet_schedule.png (base LR and per-rank band, losses at each converge),"
echo "         $out/hdet_schedule.json (the adapted schedule), $out/eval_results.json, $out/README.md"
