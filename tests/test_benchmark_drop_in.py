"""scripts/benchmark_drop_in.py: --quick trains the drop-in in a hand-written DDP loop on 2 gloo processes and
reports each HDET run against the same loop's DDP; bad rows are named."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hdet_hf.testing.processes import offline_cpu_env

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_drop_in.py"


def run(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=offline_cpu_env(),
    )


def test_unknown_rows_and_starts_are_named():
    proc = run("--configs", "ddp,nope", "--report_only")
    assert proc.returncode != 0 and "Unknown --configs ['nope']" in proc.stderr
    proc = run("--starts", "middle", "--report_only")
    assert proc.returncode != 0 and "Unknown --starts ['middle']" in proc.stderr


@pytest.mark.slow
def test_quick_run_compares_the_drop_in_with_ddp_on_the_same_loop(tmp_path):
    out = tmp_path / "out"
    proc = run("--quick", "--out_dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = {r["name"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {"ddp_lr0.01_s0", "readme_best_s0"}
    ddp, hdet = records["ddp_lr0.01_s0"], records["readme_best_s0"]
    # DDP is OneCycleAutoLR with no spread; the readme row runs README's keywords with the horizon.
    assert ddp["config"]["lr_spread"] == 0 and hdet["config"]["lr_spread"] == 0.25
    assert (
        hdet["config"]["comparison_horizon"] == 0.1
        and hdet["config"]["controller_signal"] == "train_and_averaged_probe"
    )
    assert len(hdet["lr_rank0_per_step"]) == 30 and hdet["eval_loss"] > 0
    report = (out / "results.md").read_text()
    ratio = hdet["eval_loss"] / ddp["eval_loss"]
    assert "| readme_best_s0 | 0.01 | " in report and f"| {ratio:.3f} | {ratio:.3f} |" in report
    assert (out / "drop_in.png").stat().st_size > 0
    assert json.loads((out / "launches.jsonl").read_text().splitlines()[0])["command"].endswith(
        f"--out_dir {out}"
    )


def test_every_race_setting_belongs_to_a_row_that_races():
    # A split or own-probe race on a row the loop does not race would run the row without a race, silently.
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_drop_in", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert {"readme_race", "readme_race_split", "readme_race_trainer"} <= module.RACE_ROWS <= set(module.HDET_ROWS)
    assert set(module.SPLIT_RACE_ROWS) | set(module.RACE_PROBE_ROWS) <= module.RACE_ROWS
