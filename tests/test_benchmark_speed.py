"""scripts/benchmark_speed.py: --help works and --quick runs on 2 gloo processes with well-formed output.

Never asserts speed numbers: those depend on the machine and on whatever else runs on it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_speed.py"


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        {
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
            "PYTHONUNBUFFERED": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    return env


def test_help_lists_the_flags():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--quick", "--nprocs", "--sync_intervals", "--device", "--backend", "--output_dir"):
        assert flag in proc.stdout


@pytest.mark.slow
def test_quick_run_on_two_processes_writes_tables(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output_dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
    )
    assert proc.returncode == 0, (
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "speed.png").stat().st_size > 0
    markdown = (tmp_path / "results.md").read_text()
    assert "| model | params | procs | mode | T |" in markdown
    assert "| model | procs | variant |" in markdown
    assert [run["nproc"] for run in results["runs"]] == [2]

    modes = {(r["mode"], r["sync_interval"]) for r in results["steps"]}
    ref = results["settings"]["reference_sync_interval"]
    expected = {("nocomm", None), ("ddp", None), ("shared", ref)}
    expected |= {("local", t) for t in results["settings"]["sync_intervals"]}
    assert modes == expected
    for row in results["steps"]:
        for key in ("params", "steps", "mean_ms", "median_ms", "mean_vs_nocomm", "median_vs_nocomm"):
            assert row[key] > 0, (key, row)
        if row["sync_interval"] is not None:
            assert row["window_steps"] % row["sync_interval"] == 0  # HDET windows include whole intervals

    variants = {r["variant"] for r in results["converge"]}
    assert {"fused", "flat", "per_tensor", "allreduce_only", "engine_converge"} <= variants
    for row in results["converge"]:
        assert row["median_ms"] > 0 and row["min_ms"] > 0 and row["vs_flat"] > 0, row

    assert {r["mode"] for r in results["memory"]} == {"nocomm", "ddp", "local", "shared"}
    assert all(r["peak_mib"] > 0 for r in results["memory"])
    assert all(r["measured_extra_mib"] > 0 and r["buckets"] >= 1 for r in results["converge_memory"])

    targets = {t["target"] for t in results["targets"]}
    assert len(targets) == 4
    assert all(isinstance(t["met"], bool) and t["value"] > 0 for t in results["targets"])


def test_help_lists_the_simulated_link_flags():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--simulate_links", "--link_latency_us", "--sim_only", "--scale_params", "--hsdp_groups"):
        assert flag in proc.stdout
    assert "SIMULATION" in proc.stdout


@pytest.mark.slow
def test_simulated_link_waits_the_modelled_time_and_is_labelled(tmp_path):
    """A link so slow (0.03 Gb/s) that its modelled all-reduce (~1 s for the small model) dwarfs the compute:
    every simulated DDP step must take at least that long (a wait cannot be shortened by load), a HDET local
    step at least a 1/T share of it, and the real-loopback modes none of it."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--sim_only", "--simulate_links", "0.03", "--window", "2",
         "--rounds", "1", "--reference_sync_interval", "2", "--sync_intervals", "2", "--warmup_steps", "1",
         "--converge_reps", "4", "--output_dir", str(tmp_path)],
        capture_output=True, text=True, timeout=400, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == [] and results["converge"] == []  # --sim_only
    (sim,) = results["simulation"]
    rows = {(r["mode"], r["link"]): r for r in sim["raw"]["rows"]}
    slow = rows[("ddp", "0.03 Gb/s")]
    modelled = slow["modelled_allreduce_ms"]
    assert modelled > 700
    assert slow["mean_ms"] >= modelled and slow["transfers_per_step"] >= 1
    local = rows[("local", "0.03 Gb/s")]
    assert local["mean_ms"] >= modelled / 2 and local["transfers_per_step"] == pytest.approx(0.5)
    assert rows[("shared", "0.03 Gb/s")]["mean_ms"] >= modelled
    for mode in ("nocomm", "ddp", "local", "shared"):
        real = rows[(mode, "-" if mode == "nocomm" else "real loopback")]
        assert real["transfers_per_step"] == 0 and not real["simulated"]
    assert {v["mode"] for v in sim["validation"]} == {"ddp", "local", "shared"}
    (ratio,) = [r for r in sim["ratios"] if r["link"] == "0.03 Gb/s"]
    assert ratio["ddp_vs_local"] > 1.15  # DDP pays the slow link every step, HDET local once per T = 2
    assert [s["replicas"] for s in sim["scenarios"]] == [2, 2, 2, 4]  # measured, 1B, HSDP 2 and 4 groups
    markdown = (tmp_path / "results.md").read_text()
    assert "## Simulated interconnect (SIMULATION" in markdown
    assert markdown.count("(simulation)") >= 2
