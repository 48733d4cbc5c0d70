"""scripts/ddp_ranking.py: from when on a run's own train loss ranks two LRs as their final evals do."""

import json
import sys
from pathlib import Path

import pytest

SCRIPT_DIR = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPT_DIR))
import ddp_ranking  # noqa: E402


def test_smoothing_averages_the_logged_points_inside_the_window():
    curve = [[10, 4.0], [20, 2.0], [30, 3.0]]
    assert ddp_ranking.smoothed(curve, 20) == [(10, 4.0), (20, 3.0), (30, 2.5)]
    assert ddp_ranking.smoothed(curve, 1) == [(10, 4.0), (20, 2.0), (30, 3.0)]


def test_information_time_is_the_first_step_after_the_last_wrong_ranking():
    best = [(10, 5.0), (20, 4.0), (30, 3.0), (40, 2.0)]
    # A higher LR that leads early (lower loss) and ends worse: right from step 30 on.
    high = [(10, 4.5), (20, 3.9), (30, 3.1), (40, 2.4)]
    assert ddp_ranking.information_time(high, best, worse_at_end=True, steps=40) == pytest.approx(0.75)
    # Right at every logged step: the first one.
    assert ddp_ranking.information_time(high[2:], best, worse_at_end=True, steps=40) == pytest.approx(0.75)
    assert ddp_ranking.information_time([(10, 6.0), (40, 2.5)], best, True, 40) == pytest.approx(0.25)
    # Still ranked the other way at the last shared step: never.
    assert ddp_ranking.information_time([(10, 6.0), (40, 1.9)], best, True, 40) is None
    # A run that ended better than the "best" curve: the same rule, the other way round.
    assert ddp_ranking.information_time([(10, 6.0), (40, 1.9)], best, False, 40) == pytest.approx(1.0)


def test_table_and_cli_on_a_recorded_folder(tmp_path, capsys):
    def row(lr, eval_loss, curve):
        return {
            "name": f"ddp_lr{lr:g}",
            "kind": "ddp",
            "start_lr": lr,
            "eval_loss": eval_loss,
            "steps": 40,
            "train_loss_curve": curve,
        }

    rows = [
        row(0.01, 3.0, [[10, 5.0], [20, 4.0], [30, 3.0], [40, 2.0]]),
        row(0.03, 3.3, [[10, 4.5], [20, 3.9], [30, 3.1], [40, 2.4]]),
        row(0.001, 4.0, [[10, 6.0], [20, 5.0], [30, 4.0], [40, 3.5]]),
        {"name": "shared_x_best", "kind": "hdet", "start_lr": 0.01, "eval_loss": 2.9},
    ]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    table = ddp_ranking.ranking_table(ddp_ranking.read_results(tmp_path / "results.jsonl"), window_share=0.01)
    assert table["best_lr"] == 0.01
    assert table["information_time"] == {0.001: pytest.approx(0.25), 0.03: pytest.approx(0.75)}
    assert ddp_ranking.main([str(tmp_path), "--window", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "| 0.03 | 3.3000 (1.100) |" in out and out.rstrip().endswith("| 75% |")
    assert "(best)" in out


def test_a_folder_without_two_recorded_curves_is_refused(tmp_path):
    rows = [{"name": "ddp_lr0.01", "kind": "ddp", "start_lr": 0.01, "eval_loss": 3.0, "steps": 40}]
    with pytest.raises(ValueError, match="two DDP rows"):
        ddp_ranking.ranking_table(rows, 0.05)
