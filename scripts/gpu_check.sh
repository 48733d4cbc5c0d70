#!/usr/bin/env bash
# One-command GPU check of hdet_hf: NCCL multi-process tests, DDP vs HDET local/shared throughput, the converge
# against one flat all-reduce, the simulated-interconnect table on GPU compute, and the HSDP path when this
# checkout has it. Adapts to the GPUs it finds (scripts/gpu_plan.py): one 8-GPU node or a single GPU, under
# 10 minutes (the parts' time limits add up to 570 s). Writes benchmarks/gpu/results-<host>.md (+ the benchmarks' own folders next to it).
#
#   bash scripts/gpu_check.sh                  # from the repository root, with hdet_hf installed
#   GPU_CHECK_GPUS=2 bash scripts/gpu_check.sh # use only the first 2 GPUs
#   OUT_DIR=/tmp/gpu bash scripts/gpu_check.sh # write elsewhere
#
# Exit status: 0 when every part passed, 1 when a part failed (the results file says which), 2 when there is no
# GPU to check.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PY=${PYTHON:-python}
HOST=$(hostname -s 2>/dev/null || hostname)
OUT_DIR=${OUT_DIR:-benchmarks/gpu}
RESULTS="$OUT_DIR/results-$HOST.md"
LOG_DIR="$OUT_DIR/logs-$HOST"

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

# ---- 1. find the GPUs (fail clearly without one)
command -v nvidia-smi >/dev/null 2>&1 ||
    die "no GPU: nvidia-smi is not on PATH. This check needs CUDA GPUs; on CPU run \`python -m pytest\` and \`python scripts/benchmark_speed.py\`."
nvidia-smi -L >/dev/null 2>&1 || die "no GPU: nvidia-smi -L failed (driver not loaded?)."
VISIBLE=$($PY -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)") ||
    die "could not import torch with $PY"
[ "$VISIBLE" -ge 1 ] 2>/dev/null || die "no GPU: torch.cuda.device_count() is ${VISIBLE:-?} (a CPU-only torch build?)."
GPUS=${GPU_CHECK_GPUS:-$VISIBLE}
if [ "$GPUS" -gt "$VISIBLE" ]; then die "GPU_CHECK_GPUS=$GPUS but only $VISIBLE GPU(s) are visible; use at most $VISIBLE."; fi
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((GPUS - 1)))}
PLAN=$($PY scripts/gpu_plan.py --gpus "$GPUS" --format shell) || die "scripts/gpu_plan.py failed for $GPUS GPU(s)"
eval "$PLAN"

mkdir -p "$OUT_DIR" "$LOG_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
START=$(date +%s)
STATUS=0
ROWS=()

# run NAME SECONDS CMD...: run a part under a time limit, log it, record pass/fail and its wall time.
run() {
    local name=$1 limit=$2
    shift 2
    local log="$LOG_DIR/$name.log" t0 rc
    t0=$(date +%s)
    echo "== $name (limit ${limit}s): $*"
    timeout --signal=TERM --kill-after=20 "$limit" "$@" >"$log" 2>&1
    rc=$?
    local verdict=passed
    if [ "$rc" -eq 124 ]; then verdict="TIMED OUT after ${limit}s"; elif [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; fi
    [ "$rc" -eq 0 ] || STATUS=1
    ROWS+=("| $name | $verdict | $(($(date +%s) - t0)) s | \`$*\` | \`$log\` |")
    echo "   $verdict ($(($(date +%s) - t0)) s); log: $log"
    return 0
}

# ---- 2. the core multi-process tests on NCCL (one GPU per process)
if [ -n "$PLAN_TEST_NPROCS" ]; then
    run nccl_tests 120 "$PY" -m pytest -q -x -rs --dist-backend nccl tests/test_engine_distributed.py \
        -k "exact_mean or controller_moves"
else
    ROWS+=("| nccl_tests | skipped: NCCL needs one GPU per process, found $GPUS | - | - | - |")
fi

# ---- 3. DDP vs HDET local/shared throughput, converge vs one flat all-reduce, memory
run speed 210 "$PY" scripts/benchmark_speed.py --device cuda --backend "$PLAN_BENCH_BACKEND" \
    --nprocs "$PLAN_BENCH_NPROCS" --models small,large --sync_intervals 10,50 --reference_sync_interval 50 \
    --window 100 --rounds 3 --warmup_steps 5 --converge_reps 40 --output_dir "$OUT_DIR/speed-$HOST"

# ---- 4. the simulated interconnect with GPU compute (a SIMULATION of 1-100 Gb/s links between replicas)
run simlink 150 "$PY" scripts/benchmark_speed.py --device cuda --backend "$PLAN_BENCH_BACKEND" \
    --nprocs "$PLAN_BENCH_NPROCS" --models large --sim_only --simulate_links 1,10,25,100 \
    --reference_sync_interval 10 --sync_intervals 10 --window 10 --rounds 2 --warmup_steps 5 \
    --output_dir "$OUT_DIR/simlink-$HOST"

# ---- 5. HSDP (issue 12 part 1), when this checkout has it and there are 4 GPUs
HSDP_NOTE="not run: this checkout has no tests/test_hsdp.py"
if [ -f tests/test_hsdp.py ]; then
    if [ "$PLAN_HSDP" = 1 ]; then
        # Its workers choose their backend; NCCL only if they read HDET_TEST_BACKEND (tests/workers/dist_backend.py).
        run hsdp 90 "$PY" -m pytest -q -x -rs --dist-backend nccl tests/test_hsdp.py
        HSDP_NOTE="run (see the hsdp row)"
    else
        HSDP_NOTE="not run: HSDP (2 groups x 2 shards) needs 4 GPUs, found $GPUS"
    fi
fi

# ---- 6. the results file
{
    echo "# GPU check: $HOST"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); wall time $(($(date +%s) - START)) s; command \`bash scripts/gpu_check.sh\`"
    echo "- hdet_hf $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain -- hdet_hf 2>/dev/null | grep -q . && echo +changes)"
    echo "- GPUs used: $GPUS of $VISIBLE visible; $("$PY" -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {\".\".join(map(str, torch.cuda.nccl.version()))}")' 2>/dev/null)"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/- GPU /'
    echo "- plan: tests on NCCL at ${PLAN_TEST_NPROCS:-no} processes; benchmark $PLAN_BENCH_NPROCS processes on $PLAN_BENCH_BACKEND; HSDP $HSDP_NOTE. $PLAN_NOTES"
    echo
    echo "| part | result | wall | command | log |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    for part in speed simlink; do
        if [ -f "$OUT_DIR/$part-$HOST/results.md" ]; then
            echo
            echo "## $part (from \`$OUT_DIR/$part-$HOST/results.md\`)"
            echo
            sed '1,/^$/d' "$OUT_DIR/$part-$HOST/results.md" | sed 's/^#/##/'
        fi
    done
} >"$RESULTS"
echo "wrote $RESULTS ($(($(date +%s) - START)) s)"
exit "$STATUS"
