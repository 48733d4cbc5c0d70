"""`line_search` (``--hdet_controller_line_search_threshold``) as pure math; the engine-level behaviour, with
real processes, is `test_engine_distributed.py::test_line_search_sizes_a_raise_far_below_the_right_lr`."""

import math

import numpy as np
import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.line_search import LineSearchRaise, line_search_optimum

SPREAD = torch.tensor(
    [0.75, 11 / 12, 13 / 12, 1.25], dtype=torch.float64
)  # four replicas at the default spread 0.25


@pytest.mark.parametrize("optimum", [0.6, 1.0, 2.5, 4.0, 9.0])
def test_the_optimum_of_an_exact_parabola_in_any_rank_order(optimum):
    losses = 3.0 + 0.2 * (SPREAD - optimum) ** 2
    order = torch.tensor([2, 0, 3, 1])
    assert line_search_optimum(SPREAD[order], losses[order]) == pytest.approx(optimum, rel=1e-9)


def test_it_agrees_with_numpy_on_noisy_losses():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = torch.tensor(rng.uniform(0.5, 1.5, size=6))
        losses = torch.tensor(rng.normal(size=6))
        c2, c1, _ = np.polyfit(m.numpy(), losses.numpy(), 2)
        expected = (
            max(0.0, -c1 / (2 * c2)) if c2 > 0 else (math.inf if c1 + 2 * c2 * float(m.mean()) < 0 else 0.0)
        )
        got = line_search_optimum(m, losses)
        if c2 > 1e-6:
            assert got == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_a_straight_line_has_no_measured_optimum():
    # Progress proportional to the step (far below the right LR): the optimum is beyond anything measured.
    assert line_search_optimum(SPREAD, 5.0 - 0.1 * SPREAD) == math.inf
    # Bending down is no better measured than straight.
    assert line_search_optimum(SPREAD, 5.0 - 0.1 * SPREAD - 0.05 * SPREAD**2) == math.inf
    # Rising along the whole line: the smallest step is best.
    assert line_search_optimum(SPREAD, 5.0 + 0.1 * SPREAD) == 0.0


def test_equal_losses_measure_nothing():
    # Replicas that were not displaced score alike: no line at all (rounding in the fit once made this inf).
    assert line_search_optimum(SPREAD, torch.full_like(SPREAD, 2.0667002201080322)) is None
    assert line_search_optimum(SPREAD, torch.tensor([2.0, 2.0, 9.0, 2.0]), torch.tensor([1, 1, 0, 1])) is None


def test_too_few_points_or_masked_and_non_finite_ranks():
    assert line_search_optimum(torch.tensor([0.5, 1.5]), torch.tensor([1.0, 0.5])) is None
    assert line_search_optimum(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([1.0, 0.5, 0.7])) is None
    losses = 3.0 + 0.2 * (SPREAD - 2.0) ** 2
    # A masked rank and a non-finite loss leave three and then too few points.
    assert line_search_optimum(SPREAD, losses, torch.tensor([True, True, True, False])) == pytest.approx(2.0)
    broken = losses.clone()
    broken[0] = float("nan")
    assert line_search_optimum(SPREAD, broken, torch.tensor([True, True, True, False])) is None


def test_a_raise_needs_two_far_optima_in_a_row_and_is_capped():
    raises = LineSearchRaise(threshold=4.0, max_raise=2.0)
    assert raises.observe(6.0) == 1.0  # nothing to compare with yet
    assert raises.observe(6.0) == pytest.approx(1.5)  # 6 / 4
    assert raises.observe(math.inf) == 2.0  # the cap
    assert raises.observe(3.9) == 1.0  # this one is near
    assert raises.observe(100.0) == 1.0  # the last one was near
    assert (
        raises.observe(None) == 1.0 and raises.observe(8.0) == 1.0
    )  # a converge without a fit breaks the run
    assert raises.observe(4.0) == 1.0  # at the threshold: allowed, but a factor of 1
    off = LineSearchRaise(threshold=0.0, max_raise=2.0)
    assert not off.enabled and off.observe(50.0) == 1.0 and off.observe(50.0) == 1.0


def test_only_a_passed_raise_or_with_breaks_ties_a_tie_takes_the_line_search_raise():
    """`raise_for`: the factor `observe` allows applies to a controller move > 0, to a tie (exactly 0) only with
    ``breaks_ties``, never to a cut; the optimum is taken in (for the next converge's pair) whatever the move."""
    for breaks_ties in (False, True):
        raises = LineSearchRaise(threshold=4.0, max_raise=4.0, breaks_ties=breaks_ties)
        assert raises.raise_for(math.inf, 0.1) == 1.0  # the first of a pair
        assert raises.raise_for(12.0, -0.1) == 1.0  # a cut stays a cut
        assert raises.last_optimum == 12.0
        assert raises.raise_for(12.0, 0.0) == (3.0 if breaks_ties else 1.0)  # a tie
        assert raises.raise_for(math.inf, 0.2) == 4.0  # a passed raise, capped


def test_state_round_trip():
    raises = LineSearchRaise(threshold=4.0, max_raise=2.0)
    raises.observe(math.inf)
    restored = LineSearchRaise(threshold=4.0, max_raise=2.0)
    restored.load_state_dict(raises.state_dict())
    assert restored.last_optimum == math.inf and restored.observe(8.0) == 2.0
    empty = LineSearchRaise(threshold=4.0, max_raise=2.0)
    empty.load_state_dict({})  # a checkpoint from before the option existed
    assert empty.last_optimum is None


def test_config_validation():
    assert HDETConfig(controller_line_search_threshold=4.0).controller_line_search_threshold == 4.0
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(
            ValueError, match="--hdet_controller_line_search_threshold must be a finite number >= 0"
        ):
            HDETConfig(controller_line_search_threshold=bad)
    with pytest.raises(
        ValueError, match="--hdet_controller_line_search_max_raise must be a finite number > 1"
    ):
        HDETConfig(controller_line_search_max_raise=1.0)


def test_short_intervals_warn_that_the_line_search_is_uncalibrated():
    """Reading 25: over 4-step intervals the first fits are straight at any LR and the line search raised the
    best LR 4x; the engine says so (and how to avoid it) where the line search could act on such intervals."""
    import warnings

    from hdet_hf.engine import HDETEngine

    def build(**config) -> list[str]:
        model = torch.nn.Linear(3, 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            HDETEngine(
                HDETConfig(auto_lr=True, auto_lr_warmup_steps=0, controller_signal="probe", **config), model,
                torch.optim.SGD(model.parameters(), lr=0.1), 40,
            )  # fmt: skip
        return [str(w.message) for w in caught if "line_search_threshold" in str(w.message)]

    (message,) = build(sync_interval=4)
    assert "4-step intervals" in message and "--hdet_sync_interval 10 or more" in message
    assert build(sync_interval=10) == []
    assert build(sync_interval=4, controller_line_search_threshold=0.0) == []


def test_two_replicas_warn_that_the_line_search_cannot_act():
    """Reading 30: with 2 replicas and no centre point (`centre_point`) there is no line to fit, and a classifier
    10x below climbed far slower; the run says so where the line search is on and reads the probe, and only
    there."""
    import warnings

    def warned(replicas: int, **config) -> list[str]:
        settings = {"auto_lr": True, "auto_lr_warmup_steps": 0, "controller_signal": "probe", **config}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            raises = LineSearchRaise.for_run(HDETConfig(**settings).for_run(100), replicas)
        assert raises.enabled == (settings.get("controller_line_search_threshold", 4.0) > 0)
        return [str(w.message) for w in caught if "replicas to fit a line" in str(w.message)]

    # Without the comparison horizon (its anchor is the start a replica rebuilds the line's centre from).
    (message,) = warned(2, comparison_horizon=0.0)
    assert "does nothing here" in message and "reading 30" in message
    (cooldown,) = warned(2, controller_signal="cooldown_probe")
    assert cooldown == message
    assert warned(3, comparison_horizon=0.0) == [] and warned(8) == [] and warned(1) == []
    assert warned(2) == []  # the default rebuilds the centre (`centre_point`)
    assert warned(2, comparison_horizon=0.0, controller_line_search_threshold=0.0) == []
    assert warned(2, comparison_horizon=0.0, controller_signal="train_loss") == []


def test_until_bend_the_first_optimum_below_the_threshold_ends_the_line_search():
    raises = LineSearchRaise(threshold=4.0, max_raise=4.0, until_bend=True)
    assert (raises.observe(math.inf), raises.observe(math.inf), raises.observe(8.0)) == (1.0, 4.0, 2.0)
    assert raises.observe(2.0) == 1.0 and raises.bent
    # Far optima after the bend never raise again, and the bend survives a checkpoint.
    assert (raises.observe(8.0), raises.observe(math.inf)) == (1.0, 1.0)
    restored = LineSearchRaise(threshold=4.0, max_raise=4.0, until_bend=True)
    restored.load_state_dict(raises.state_dict())
    assert restored.bent and restored.observe(8.0) == 1.0
    # Without it (three or more replicas), the same optima raise again after a near one.
    plain = LineSearchRaise(threshold=4.0, max_raise=4.0)
    assert [plain.observe(m) for m in (math.inf, 8.0, 2.0, 8.0, math.inf)] == [1.0, 2.0, 1.0, 1.0, 4.0]
    assert not plain.bent


def test_until_bend_applies_only_where_the_centre_is_the_third_point():
    config = HDETConfig(auto_lr=True, controller_signal="train_and_averaged_probe").for_run(100)
    assert LineSearchRaise.for_run(config, 2).until_bend
    assert not LineSearchRaise.for_run(config, 4).until_bend
    off = HDETConfig(
        auto_lr=True, controller_signal="train_and_averaged_probe", controller_line_search_until_bend=False
    ).for_run(100)
    assert not LineSearchRaise.for_run(off, 2).until_bend
