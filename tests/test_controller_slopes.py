"""scripts/controller_slopes.py: the per-converge slope of replica losses on log(multiplier), per phase."""

import json
import math
import sys
from pathlib import Path

import pytest

SCRIPT_DIR = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPT_DIR))
import controller_slopes  # noqa: E402

MULTIPLIERS = [0.75, 0.9166667, 1.0833333, 1.25]


def exact(slope: float, offset: float = 4.0) -> list[float]:
    return [offset + slope * math.log(m) for m in MULTIPLIERS]


def test_slope_recovers_a_linear_dependence_and_skips_excluded_ranks():
    assert controller_slopes.converge_slope(exact(0.3), MULTIPLIERS) == pytest.approx(0.3)
    assert controller_slopes.converge_slope(exact(-0.1), MULTIPLIERS) == pytest.approx(-0.1)
    losses = exact(0.2)
    losses[3] = 99.0  # a diverged rank, excluded at the converge: must not bend the slope
    assert controller_slopes.converge_slope(losses, MULTIPLIERS, excluded=[3]) == pytest.approx(0.2)
    losses[3] = math.nan
    assert controller_slopes.converge_slope(losses, MULTIPLIERS) == pytest.approx(0.2)


def test_no_spread_gives_no_slope():
    assert controller_slopes.converge_slope([4.0, 4.1], [1.0, 1.0]) is None
    assert controller_slopes.converge_slope([4.0], [1.2]) is None


def row(slopes_by_step: dict[int, float], steps: int = 100, start_lr: float = 0.01) -> dict:
    return {
        "name": "shared_signal_best",
        "steps": steps,
        "start_lr": start_lr,
        "eval_loss": 3.5,
        "syncs": [
            {"step": s, "scale": 2.0, "losses": exact(b), "multipliers": MULTIPLIERS, "excluded": []}
            for s, b in slopes_by_step.items()
        ],
    }


def test_phase_summary_means_t_statistic_and_lr():
    r = row({10: 0.1, 20: 0.3, 30: -0.2, 40: -0.2, 60: 0.5})
    phases = controller_slopes.phase_summary(r, (0.0, 0.2, 0.5, 1.0))
    first, second, third = phases
    assert first["converges"] == 2 and first["slope"] == pytest.approx(0.2)
    # mean 0.2, sd 0.1414 over 2 converges -> t = 0.2 / (0.1414 / sqrt 2) = 2
    assert first["t"] == pytest.approx(2.0, rel=1e-4)
    assert first["lr"] == pytest.approx(0.02)  # start LR x the scale at the phase's last converge
    assert second["slope"] == pytest.approx(-0.2) and math.isinf(second["t"]) and second["t"] < 0
    assert third["converges"] == 1 and math.isnan(third["t"])


def test_cli_writes_the_table(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    rows = [row({5: 0.1, 10: 0.3}), {**row({}), "name": "ddp_lr0.01", "syncs": None}]
    (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "slopes.md"
    controller_slopes.main([str(folder), "--rows", "signal", "--out", str(out)])
    text = out.read_text()
    assert "| shared_signal_best | 0.01 | 3.5000 | +0.200 (t +2.0), LR 0.02 |  |" in text
    assert "ddp_lr0.01" not in text
    assert capsys.readouterr().out == text
    with pytest.raises(SystemExit):
        controller_slopes.main([str(tmp_path / "missing")])
