"""`wide_probe` (``--hdet_controller_wide_probe_threshold``) as pure math and bookkeeping; the engine-level
behaviour, with real processes, is
`test_engine_distributed.py::test_wide_probe_raises_far_below_the_right_lr_and_ends_at_the_first_near_reading`."""

import math

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.wide_probe import LONG_STEP_BIAS, WIDE_GRID, WideProbe, wide_optimum


def _parabola_losses(optimum: float) -> list[float]:
    return [(k - optimum) ** 2 for k in WIDE_GRID]


@pytest.mark.parametrize(("optimum", "expected"), [(0.3, 1.0), (1.9, 2.0), (5.0, 4.0), (6.5, 8.0), (20.0, 16.0)])
def test_the_first_local_minimum_is_the_grid_point_nearest_a_parabolas_optimum(optimum, expected):
    assert wide_optimum(WIDE_GRID, _parabola_losses(optimum)) == expected


def test_a_loss_still_falling_at_the_last_point_reads_the_last_point():
    assert wide_optimum(WIDE_GRID, [10.0 - k for k in WIDE_GRID]) == WIDE_GRID[-1] == 32.0


def test_the_scan_stops_at_the_first_rise_even_with_a_deeper_minimum_further_on():
    # Noise that bumps at k = 4 ends the scan there: a far optimum must be read without a rise on the way.
    assert wide_optimum(WIDE_GRID, [5.0, 4.0, 4.1, 3.0, 2.0, 1.0]) == 2.0


@pytest.mark.parametrize("broken", [math.nan, math.inf])
def test_a_non_finite_loss_stops_the_scan(broken):
    # A step that far broke the model: the reading is the last point before it.
    assert wide_optimum(WIDE_GRID, [5.0, 4.0, 3.0, broken, 1.0, 0.5]) == 4.0


def test_one_loss_per_grid_point():
    with pytest.raises(ValueError, match="one loss per grid point"):
        wide_optimum(WIDE_GRID, [1.0, 2.0])


def test_raises_while_far_and_ends_at_the_first_near_reading():
    probe = WideProbe(threshold=16.0, max_raise=4.0)
    assert probe.enabled and probe.active
    assert probe.observe(16.0, step=24) == 16.0 / LONG_STEP_BIAS == 4.0
    assert probe.observe(32.0, step=36) == 4.0  # k*/4 = 8 is bounded by max_raise
    assert probe.active
    assert probe.observe(8.0, step=48) == 1.0 and not probe.active and probe.finished
    assert probe.readings == [(24, 16.0), (36, 32.0), (48, 8.0)]


def test_a_small_max_raise_bounds_each_raise_and_off_means_never_active():
    assert WideProbe(threshold=16.0, max_raise=2.0).observe(32.0) == 2.0
    # A threshold below 4 could read a raise factor < 1: no raise is ever a cut.
    assert WideProbe(threshold=2.0, max_raise=4.0).observe(2.0) == 1.0
    off = WideProbe(threshold=0.0, max_raise=4.0)
    assert not off.enabled and not off.active


def test_state_round_trip():
    probe = WideProbe(threshold=16.0, max_raise=4.0)
    probe.observe(32.0, step=20)
    probe.observe(4.0, step=30)
    restored = WideProbe(threshold=16.0, max_raise=4.0)
    restored.load_state_dict(probe.state_dict())
    assert restored.finished and restored.readings == probe.readings
    fresh = WideProbe(threshold=16.0, max_raise=4.0)
    fresh.load_state_dict({})  # a checkpoint from before the setting: never read, not finished
    assert fresh.active and fresh.readings == []


def test_config_validation():
    assert HDETConfig().controller_wide_probe_threshold == 0.0
    assert HDETConfig(controller_wide_probe_threshold=16.0).controller_wide_probe_threshold == 16.0
    for bad in (-1.0, 0.5, 1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="--hdet_controller_wide_probe_threshold must be 0 \\(off\\) or a finite"):
            HDETConfig(controller_wide_probe_threshold=bad)


def test_the_engine_reads_only_with_the_lr_controller_and_a_probe_signal():
    from hdet_hf.engine import HDETEngine

    def engine(**config) -> HDETEngine:
        model = torch.nn.Linear(3, 1)
        return HDETEngine(
            HDETConfig(controller_wide_probe_threshold=16.0, **config), model,
            torch.optim.SGD(model.parameters(), lr=0.1), 40,
        )  # fmt: skip

    assert engine(auto_lr=True).wide_probe.active
    assert not engine(auto_lr=False).wide_probe.enabled
    assert not engine(auto_lr=True, controller_signal="train_loss").wide_probe.enabled
