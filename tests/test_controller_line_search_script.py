"""scripts/controller_line_search.py: the recorded line-search optima per start, counted and drawn."""

import json
import math
import sys
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPT_DIR))
import controller_line_search  # noqa: E402

M = [0.75, 11 / 12, 13 / 12, 1.25]


def sync(step, optimum, delta):
    """A converge whose probe losses are a parabola with its minimum at ``optimum`` (None: a straight line)."""
    losses = [2.0 - 0.1 * m if optimum is None else 2.0 + 0.1 * (m - optimum) ** 2 for m in M]
    return {"step": step, "multipliers": M, "probe_losses": losses, "delta": delta}


def test_counts_far_optima_and_where_a_raise_would_act(tmp_path):
    low = {
        "name": "r_low",
        "steps": 100,
        "syncs": [
            {"step": 10, "multipliers": M, "probe_losses": [2.0] * 4, "delta": 0.0},  # identical: no fit
            sync(20, None, 0.0),  # far, but the first one
            sync(30, 6.0, 0.1),  # far after far, and a raise: acts
            sync(40, 8.0, 0.0),  # far after far, but the controller held
            sync(50, 2.0, 0.1),  # near
            sync(60, 9.0, 0.1),  # far after near
        ],
    }
    best = {"name": "r_best", "steps": 100, "syncs": [sync(20, 1.0, 0.1), sync(30, 1.2, -0.1)]}
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "results.jsonl").write_text(json.dumps(low) + "\n" + json.dumps(best) + "\n")
    points = controller_line_search.optima(low)
    assert [f for f, _, _ in points] == [0.2, 0.3, 0.4, 0.5, 0.6]
    assert points[0][1] == math.inf and abs(points[1][1] - 6.0) < 1e-9
    lines = {line["start"]: line for line in controller_line_search.summarise([folder], "r", 4.0)}
    assert (
        lines["low"]["far"] == 4 and lines["low"]["acting_at"] == [0.3] and lines["low"]["ties_at"] == [0.4]
    )
    assert lines["best"]["far"] == 0 and lines["best"]["acting_at"] == [] and "high" not in lines
    out = tmp_path / "optima.png"
    controller_line_search.main([str(folder), "--rows", "r", "--plot", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fits_the_multipliers_a_step_size_interval_stepped_at():
    """With --hdet_lr_fan_out_scale 0.4 and the early phase alternating (T 10, horizon from step 30), the interval
    from step 20 stepped at 1 + 0.4 (m - 1) and is fitted there (the optimum in those units); the offset
    interval from step 10 keeps the recorded multipliers; without a horizon nothing is narrowed."""
    config = {"sync_interval": 10, "comparison_horizon": 0.1, "comparison_horizon_start": 0.3,
              "early_comparison": "lower_of_both", "lr_fan_out_scale": 0.4, "lr_spread": 0.25}  # fmt: skip
    narrow = [1 + 0.4 * (m - 1) for m in M]
    step_size = {"step": 30, "multipliers": M, "probe_losses": [2.0 + 0.1 * (m - 3.0) ** 2 for m in narrow],
                 "delta": 0.0}  # fmt: skip
    offsets = sync(20, 3.0, 0.0)
    row = {"name": "r_low", "steps": 100, "hdet_config": config, "syncs": [offsets, step_size]}
    assert controller_line_search.stepped_multipliers(row, step_size) == narrow
    assert controller_line_search.stepped_multipliers(row, offsets) == M
    (_, first, _), (_, second, _) = controller_line_search.optima(row)
    assert abs(first - 3.0) < 1e-9 and abs(second - 3.0) < 1e-9
    renamed = {**config, "lr_fan_out_spread": 0.1}
    del renamed["lr_fan_out_scale"]
    assert controller_line_search.stepped_multipliers({**row, "hdet_config": renamed}, step_size) == narrow
    plain = {**row, "hdet_config": {**config, "comparison_horizon": 0.0}}
    assert controller_line_search.stepped_multipliers(plain, step_size) == M
    # --hdet_fan_out_until_direction: the interval from step 10 had no direction yet, so it stepped narrowed too;
    # the offset interval from step 30 (the horizon's start) keeps the recorded multipliers.
    early = {**row, "hdet_config": {**config, "fan_out_until_direction": True}}
    assert controller_line_search.stepped_multipliers(early, offsets) == narrow
    assert controller_line_search.stepped_multipliers(early, sync(40, 3.0, 0.0)) == M
