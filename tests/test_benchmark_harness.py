"""hdet_hf.testing.benchmarks: what the four benchmark scripts share (machine record, results.jsonl I/O)."""

import argparse
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from hdet_hf.testing.benchmarks import (
    append_result,
    machine_info,
    machine_record,
    public_settings,
    read_results,
    usable_cores,
)
from hdet_hf.testing.processes import offline_cpu_env, torchrun_command

ROOT = Path(__file__).resolve().parent.parent


def test_machine_record_has_the_keys_the_speed_report_reads():
    m = machine_record()
    # benchmark_speed.render_markdown reads these, also from results.json files recorded before this module.
    assert {"usable_cores", "cpu", "ram_gib", "python", "torch", "transformers", "platform"} <= set(m)
    assert m["usable_cores"] == usable_cores() >= 1
    line = machine_info()
    assert line.startswith(f"{m['cpu']}, {os.cpu_count()} logical cores")
    assert f"torch {m['torch']}" in line and f"transformers {m['transformers']}" in line


def test_results_jsonl_round_trip_is_strict_json_and_the_last_record_wins(tmp_path):
    path = tmp_path / "results.jsonl"
    append_result(path, {"name": "a", "loss": float("nan"), "curve": [1.0, float("inf")]})
    append_result(path, {"name": "b", "loss": 2.0})
    append_result(path, {"name": "a", "loss": 1.5})  # a rerun of "a" replaces the first
    for line in path.read_text().splitlines():
        assert "NaN" not in line and "Infinity" not in line
    assert read_results(path) == [{"name": "b", "loss": 2.0}, {"name": "a", "loss": 1.5}]
    assert read_results(tmp_path / "missing.jsonl") == []


def test_public_settings_leave_out_the_worker_plumbing():
    args = argparse.Namespace(quick=True, _worker=True, _work_dir="/tmp/x", nprocs=2)
    assert public_settings(args) == {"quick": True, "nprocs": 2}


@pytest.mark.slow
def test_init_worker_joins_the_group_and_sets_the_threads(tmp_path):
    """Two gloo processes: ``threads=0`` splits the usable cores over the node's processes, None keeps what the
    launcher set (OMP_NUM_THREADS=5 here, so the two differ on most machines)."""
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import torch
            from hdet_hf.testing.benchmarks import init_worker, usable_cores
            before = torch.get_num_threads()
            w = init_worker("gloo", threads=None if sys.argv[1] == "keep" else 0)
            # One file per rank: two ranks printing to one stdout can interleave their lines.
            with open(f"{sys.argv[2]}/{sys.argv[1]}_rank{w.rank}.json", "w") as f:
                json.dump({"rank": w.rank, "world": w.world, "local_world": w.local_world,
                           "threads": w.threads, "before": before, "cores": usable_cores()}, f)
            """
        )
    )
    for mode in ("split", "keep"):
        proc = subprocess.run(
            torchrun_command(script, 2, [mode, str(tmp_path)]),
            capture_output=True,
            text=True,
            timeout=120,
            env=offline_cpu_env(threads=5, pythonpath=ROOT),
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        rows = [json.loads(path.read_text()) for path in sorted(tmp_path.glob(f"{mode}_rank*.json"))]
        assert sorted(r["rank"] for r in rows) == [0, 1]
        for r in rows:
            assert (r["world"], r["local_world"]) == (2, 2)
            expected = max(1, r["cores"] // 2) if mode == "split" else r["before"]
            assert r["threads"] == expected, (mode, r)
