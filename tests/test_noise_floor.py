"""The noise floor under the adaptive temperature (`hdet_hf.noise_floor`) and the window's noise estimate, without
processes (the 2-process test is in test_engine_distributed.py)."""

import math

import numpy as np
import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.controller import (
    ControllerSettings,
    ControllerState,
    controller_step,
    loss_weights,
    within_noise,
)
from hdet_hf.noise_floor import score_noise, uses_noise_floor
from hdet_hf.score_window import ScoreWindow


def _window(step_losses, items, micro_batches=1):
    window = ScoreWindow()
    for loss, n in zip(step_losses, items):
        for _ in range(micro_batches):
            window.add_loss(torch.tensor(loss, dtype=torch.float64), n / micro_batches)
        window.end_step()
    return window


def _expected_variance(x, w):
    x, w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    return np.mean(np.diff(x) ** 2) / 2 * np.sum(w**2) / np.sum(w) ** 2


def test_the_window_variance_is_half_the_mean_squared_step_difference_over_the_effective_count():
    rng = np.random.default_rng(0)
    losses = (2.0 + 0.1 * rng.standard_normal(12)).tolist()
    items = rng.integers(3, 40, 12).tolist()
    window = _window(losses, items)
    assert window.mean_loss() == pytest.approx(np.average(losses, weights=items), rel=1e-12)
    assert window.mean_variance() == pytest.approx(_expected_variance(losses, items), rel=1e-12)
    # Gradient accumulation (the step's items over two micro-batches with the step's mean) changes nothing.
    assert _window(losses, items, micro_batches=2).mean_variance() == pytest.approx(
        window.mean_variance(), rel=1e-12
    )


def test_a_window_that_does_not_track_noise_keeps_the_same_mean_and_has_no_estimate():
    losses, items = [2.0, 2.1, 1.9, 2.05], [4, 5, 6, 4]
    tracked, untracked = _window(losses, items), ScoreWindow(track_noise=False)
    for loss, n in zip(losses, items):
        untracked.add_loss(torch.tensor(loss, dtype=torch.float64), n)
        untracked.end_step()
    assert untracked.mean_loss() == tracked.mean_loss() and untracked.steps == tracked.steps == 4
    assert math.isnan(untracked.mean_variance()) and math.isfinite(tracked.mean_variance())


def test_a_trend_inside_the_window_barely_moves_the_estimate():
    rng = np.random.default_rng(1)
    noise = 0.05 * rng.standard_normal(40)
    flat = _window((2.0 + noise).tolist(), [8] * 40).mean_variance()
    falling = _window((2.0 - np.linspace(0, 1, 40) + noise).tolist(), [8] * 40).mean_variance()
    # A loss falling by 1.0 over the window: the plain variance of the losses grows ~30x, this estimate < 1.5x.
    assert falling / flat < 1.5
    assert np.var(2.0 - np.linspace(0, 1, 40) + noise) / np.var(noise) > 30


def test_no_estimate_without_two_counted_steps_and_skipped_steps_do_not_count():
    assert math.isnan(ScoreWindow().mean_variance())
    assert math.isnan(_window([2.0], [4]).mean_variance())
    window = ScoreWindow()
    for loss, n in ((2.0, 4), (5.0, 0), (2.2, 4)):  # a step with no labelled item is skipped, not a loss of 5
        window.add_loss(torch.tensor(loss, dtype=torch.float64), n)
        window.end_step()
    assert window.mean_variance() == pytest.approx(0.2**2 / 2 * 32 / 64, rel=1e-12)
    # A non-finite step loss does not poison the differences of the steps around it.
    window = _window([2.0, float("nan"), 2.2, 2.3], [4, 4, 4, 4])
    assert math.isfinite(window.mean_variance())
    window.reset_loss()
    assert math.isnan(window.mean_variance()) and window.mean_loss() is None


def test_the_estimate_survives_a_checkpoint_and_an_old_checkpoint_has_none():
    losses, items = [2.0, 2.1, 1.9, 2.05, 2.0, 1.95], [4, 5, 6, 4, 5, 6]
    full = _window(losses, items)
    first = _window(losses[:3], items[:3])
    resumed = ScoreWindow()
    resumed.load_state_dict(first.state_dict(), torch.device("cpu"))
    for loss, n in zip(losses[3:], items[3:]):
        resumed.add_loss(torch.tensor(loss, dtype=torch.float64), n)
        resumed.end_step()
    assert resumed.mean_variance() == full.mean_variance() and resumed.mean_loss() == full.mean_loss()
    old = first.state_dict()
    del old["loss_noise"]
    legacy = ScoreWindow()
    legacy.load_state_dict(old, torch.device("cpu"))
    legacy.add_loss(torch.tensor(2.0), 4)
    legacy.end_step()
    assert math.isnan(legacy.mean_variance())  # that window votes without a floor
    legacy.reset_loss()
    assert math.isnan(_window([], []).mean_variance())


def test_the_floor_shrinks_a_two_replica_vote_within_the_noise_and_leaves_a_clear_one():
    losses = torch.tensor([1.00, 1.02])
    plain = loss_weights(losses, 1.0, "adaptive")
    assert plain.tolist() == pytest.approx([0.8808, 0.1192], abs=1e-4)  # any gap: full-size
    floored = loss_weights(losses, 1.0, "adaptive", noise=0.05)
    logit = 0.01 / 0.05
    assert floored.tolist() == pytest.approx([1 / (1 + math.exp(-2 * logit)), 1 / (1 + math.exp(2 * logit))])
    # A gap beyond twice the noise: the spread is larger than the floor, nothing changes.
    assert loss_weights(losses, 1.0, "adaptive", noise=0.005).tolist() == plain.tolist()
    # Unhealthy ranks still get 0; one healthy rank gets everything, whatever the floor.
    three = loss_weights(torch.tensor([1.0, float("nan"), 1.02]), 1.0, "adaptive", noise=0.05)
    assert three[1] == 0 and three[0] > three[2]
    assert loss_weights(torch.tensor([1.0, float("nan")]), 1.0, "adaptive", noise=0.05).tolist() == [1.0, 0.0]
    # The fixed temperature is in loss units already: the floor does not apply.
    assert (
        loss_weights(losses, 0.01, "fixed", noise=0.05).tolist()
        == loss_weights(losses, 0.01, "fixed").tolist()
    )


def test_the_controller_floors_only_the_rows_given_a_noise():
    settings = ControllerSettings(lr=1.0, momentum=0.0, combination="mean")
    m = torch.tensor([0.75, 1.25])
    rows = torch.tensor([[1.02, 1.00], [0.52, 0.50]])  # train loss, probe: both favour the high LR
    _, plain = controller_step(ControllerState(), m, rows, settings, base_value=1.0)
    _, floored = controller_step(ControllerState(), m, rows, settings, base_value=1.0, noise=[0.05, None])
    assert floored["row_deltas"][1] == plain["row_deltas"][1]  # the probe row keeps its full-size vote
    assert 0 < floored["row_deltas"][0] < plain["row_deltas"][0] / 3
    with pytest.raises(ValueError, match="one noise floor per score row"):
        controller_step(ControllerState(), m, rows, settings, base_value=1.0, noise=[0.05])


def test_which_runs_floor_the_vote():
    assert uses_noise_floor(HDETConfig(), 2)
    assert not uses_noise_floor(HDETConfig(), 3) and not uses_noise_floor(HDETConfig(), 4)
    assert uses_noise_floor(HDETConfig(controller_noise_floor="always"), 4)
    assert not uses_noise_floor(HDETConfig(controller_noise_floor="off"), 2)
    assert not uses_noise_floor(
        HDETConfig(controller_temperature_mode="fixed", controller_temperature=0.01), 2
    )
    with pytest.raises(
        ValueError, match="--hdet_controller_noise_floor must be one of two_replicas, always, off"
    ):
        HDETConfig(controller_noise_floor="sometimes")


def test_the_noise_is_the_root_mean_variance_of_the_scored_replicas():
    variances = torch.tensor([0.04, 0.0036, 1.0])
    assert score_noise(variances, torch.tensor([True, True, False])) == pytest.approx(math.sqrt(0.0218))
    assert score_noise(torch.tensor([0.04, float("nan")]), torch.tensor([True, True])) is None
    assert score_noise(torch.tensor([0.04, float("nan")]), torch.tensor([True, False])) == pytest.approx(0.2)
    assert score_noise(variances, torch.tensor([False, False, False])) is None


def test_with_abstention_a_gap_within_the_noise_is_no_vote_and_agreement_holds():
    settings = ControllerSettings(
        lr=1.0, momentum=0.0, combination="agree_mean", abstain_within_noise="always"
    )
    m = torch.tensor([0.75, 1.25])
    rows = torch.tensor([[1.02, 1.00], [0.52, 0.50]])  # train loss, probe: both favour the high LR
    _, quiet = controller_step(ControllerState(), m, rows, settings, base_value=1.0, noise=[0.05, None])
    assert (
        quiet["abstained"] == [True, False] and quiet["row_deltas"][0] == 0.0 and quiet["row_deltas"][1] > 0
    )
    assert quiet["delta"] == 0.0 and quiet["scale"] == 1.0  # one row without a direction: agree_mean holds
    # Shrinking instead (the default): the agreeing small vote still moves the scale up.
    shrink = ControllerSettings(lr=1.0, momentum=0.0, combination="agree_mean")
    _, small = controller_step(ControllerState(), m, rows, shrink, base_value=1.0, noise=[0.05, None])
    assert small["abstained"] == [False, False] and small["delta"] > 0 and small["scale"] > 1.0
    # A gap beyond twice the noise is a vote in both modes, bit for bit the same.
    _, clear = controller_step(ControllerState(), m, rows, settings, base_value=1.0, noise=[0.005, None])
    _, clear_shrink = controller_step(ControllerState(), m, rows, shrink, base_value=1.0, noise=[0.005, None])
    assert clear["abstained"] == [False, False] and clear["delta"] == clear_shrink["delta"] > 0
    # With the mean combination the quiet row counts as 0 in the mean; with no floor nothing abstains.
    mean = ControllerSettings(lr=1.0, momentum=0.0, combination="mean", abstain_within_noise="always")
    _, halved = controller_step(ControllerState(), m, rows, mean, base_value=1.0, noise=[0.05, None])
    assert halved["delta"] == pytest.approx(halved["row_deltas"][1] / 2)
    _, unfloored = controller_step(ControllerState(), m, rows, settings, base_value=1.0)
    _, unfloored_shrink = controller_step(ControllerState(), m, rows, shrink, base_value=1.0)
    assert unfloored == unfloored_shrink


def test_a_row_is_within_its_noise_when_its_healthy_spread_is_below_the_floor():
    assert within_noise(torch.tensor([1.02, 1.00]), 0.05, "adaptive")
    assert not within_noise(torch.tensor([1.2, 1.0]), 0.05, "adaptive")  # spread 0.1
    assert not within_noise(torch.tensor([1.02, 1.00]), None, "adaptive")
    assert not within_noise(torch.tensor([1.02, 1.00]), 0.05, "fixed")
    # Unhealthy or non-finite ranks do not count; one healthy rank has no spread to compare.
    assert within_noise(torch.tensor([1.02, 9.0, 1.00]), 0.05, "adaptive", torch.tensor([True, False, True]))
    assert not within_noise(torch.tensor([1.0, float("nan")]), 0.05, "adaptive")


def test_abstaining_on_raises_only_keeps_a_cut_within_the_noise():
    raises = ControllerSettings(lr=1.0, momentum=0.0, combination="agree_mean", abstain_within_noise="raises")
    m = torch.tensor([0.75, 1.25])
    up = torch.tensor([[1.02, 1.00], [0.52, 0.50]])  # both rows favour the high LR; the train gap within 0.05
    _, held = controller_step(ControllerState(), m, up, raises, base_value=1.0, noise=[0.05, None])
    assert held["abstained"] == [True, False] and held["delta"] == 0.0
    down = torch.tensor(
        [[1.00, 1.02], [0.50, 0.52]]
    )  # both favour the low LR: the small train vote still counts
    _, cut = controller_step(ControllerState(), m, down, raises, base_value=1.0, noise=[0.05, None])
    shrink = ControllerSettings(lr=1.0, momentum=0.0, combination="agree_mean")
    _, cut_shrink = controller_step(ControllerState(), m, down, shrink, base_value=1.0, noise=[0.05, None])
    assert cut["abstained"] == [False, False] and cut["delta"] == cut_shrink["delta"] < 0
    with pytest.raises(
        ValueError, match="--hdet_controller_abstain_within_noise must be one of off, raises, always"
    ):
        HDETConfig(controller_abstain_within_noise="sometimes")


def test_a_mark_splits_the_window_into_the_vote_and_the_steps_since_the_last_converge():
    """--hdet_controller_time_scale vote: a window spans several converges; each marks the sums, so the
    divergence guard reads the mean since the last converge while the vote reads the whole window. A state saved
    and loaded keeps the mark; a state saved before the mark existed starts the window at its beginning."""
    window = _window([1.0, 1.0], [4, 2])
    assert window.recent_mean_loss() == window.mean_loss() == 1.0  # no mark: the whole window
    window.mark()
    assert window.recent_mean_loss() is None  # nothing since the converge
    for loss, n in ((4.0, 3), (7.0, 0)):  # an unlabelled step counts for neither
        window.add_loss(torch.tensor(loss, dtype=torch.float64), n)
        window.end_step()
    assert window.recent_mean_loss() == 4.0
    assert window.mean_loss() == pytest.approx((6.0 + 12.0) / 9, rel=1e-12)
    restored = ScoreWindow()
    restored.load_state_dict(window.state_dict(), torch.device("cpu"))
    assert restored.recent_mean_loss() == 4.0 and restored.mean_loss() == window.mean_loss()
    old = window.state_dict()
    del old["loss_mark"]
    restored.load_state_dict(old, torch.device("cpu"))
    assert restored.recent_mean_loss() == restored.mean_loss()
    window.reset_loss()  # a vote: the next window starts without a mark
    assert (window.mark_sum, window.mark_weight) == (0.0, 0.0)
