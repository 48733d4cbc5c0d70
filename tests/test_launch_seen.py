"""A launch the Trainer does not see: torchrun / ``accelerate launch`` on a CPU-only machine, without
``ACCELERATE_USE_CPU`` or ``--use_cpu``, as a user types it. HDET must either see every process or refuse."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from distributed import load_ranks, torchrun, user_env

REPO = Path(__file__).resolve().parents[1]
STOCK = Path(__file__).parent / "stock_scripts"

pytestmark = pytest.mark.slow

TRAIN = [
    "--per_device_train_batch_size", "4", "--learning_rate", "1e-2", "--report_to", "none",
    "--seed", "0", "--disable_tqdm", "true", "--max_steps", "4", "--save_strategy", "no",
    "--logging_steps", "1",
]  # fmt: skip


def test_hdet_trainer_under_torchrun_sees_every_process_without_use_cpu(tmp_path):
    torchrun(
        "trainer_worker.py",
        2,
        [
            "--output_dir",
            str(tmp_path / "out"),
            "--dump_dir",
            str(tmp_path / "dump"),
            *TRAIN,
            "--hdet",
            "--hdet_sync_interval",
            "2",
        ],
        env=user_env(),
        launcher="torchrun",  # the subject: what the Trainer sees under the real torchrun
    )
    ranks = load_ranks(tmp_path / "dump", 2)
    for r in ranks:
        assert r["trainer_world_size"] == 2
        assert r["is_ddp"]  # shared mode: DDP all-reduces gradients
    # Sharded data: the two replicas saw different batches, so their first-step losses differ.
    assert ranks[0]["first_batch"] != ranks[1]["first_batch"]


def test_stock_script_through_accelerate_launch_as_in_the_readme(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file",
        str(REPO / "accelerate_configs" / "cpu_2proc.yaml"), "--main_process_port", "0",
        "-m", "hdet_hf.launch", str(STOCK / "stock_train.py"), "--output_dir", str(out), *TRAIN,
        "--hdet", "--hdet_sync_interval", "2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=user_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-6000:]
    result = json.loads((out / "stock_result.json").read_text())
    assert result["trainer_world_size"] == 2 and result["ddp"]
    assert json.loads((out / "hdet_schedule.json").read_text())["world_size"] == 2


def test_hdet_accelerate_refuses_an_accelerator_that_sees_one_process(tmp_path):
    proc = torchrun(
        "accelerate_seen_worker.py", 2, [], env=user_env(), expect_failure=True, launcher="torchrun"
    )
    assert "launched on 2 processes (WORLD_SIZE=2) but the Accelerator sees 1" in proc.stderr
    assert "Accelerator(cpu=True)" in proc.stderr
    ok = torchrun("accelerate_seen_worker.py", 2, ["--cpu"], env=user_env(), launcher="torchrun")
    assert "rank 1 of 2" in ok.stdout
