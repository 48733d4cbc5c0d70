"""scripts/benchmark_lora.py: --help works and --quick runs on 2 gloo processes with well-formed output.

Never asserts times (they depend on the machine and its load); the bytes per converge are exact.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hdet_hf.testing.processes import offline_cpu_env

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_lora.py"

pytest.importorskip("peft", reason="the LoRA benchmark needs `pip install 'hdet_hf[trl]'`")


def run(*args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=offline_cpu_env(),
    )


def test_help_lists_the_flags_and_bad_values_are_named():
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--quick", "--model", "--nprocs", "--lora_r", "--lora_targets", "--output_dir"):
        assert flag in proc.stdout
    proc = run("--nprocs", "1")
    assert proc.returncode != 0 and "--nprocs must be 2 or more" in proc.stderr


@pytest.mark.slow
def test_quick_run_on_two_processes_measures_full_and_lora(tmp_path):
    proc = run("--quick", "--output_dir", str(tmp_path), timeout=300)
    assert proc.returncode == 0, (
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
    )
    result = json.loads((tmp_path / "results.json").read_text())
    full, lora = result["rows"]
    assert (full["variant"], lora["variant"]) == ("full", "lora_r16") and result["nproc"] == 2
    assert full["trainable_params"] == full["params"]
    # LoRA adds its adapter to the same model and trains only that: the converge moves only its bytes.
    assert lora["params"] == full["params"] + lora["trainable_params"]
    assert lora["converge_mib"] * 2**20 == 4 * lora["trainable_params"]
    assert result["ratios"]["bytes_full_over_lora"] == pytest.approx(
        full["converge_mib"] / lora["converge_mib"]
    )
    assert all(r["converge_median_ms"] > 0 and r["step_mean_ms"] > 0 for r in result["rows"])
    assert "| full |" in (tmp_path / "results.md").read_text()
