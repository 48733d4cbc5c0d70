"""`centre_point` as pure math: the line's centre rebuilt from one replica's weights, and the third point it gives
two replicas' line search. The engine-level behaviour, with real processes, is
`test_engine_distributed.py::test_two_replicas_rebuild_the_lines_centre_for_the_line_search`."""

import math

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.centre_point import centre_after_offsets, centre_after_step_size, uses_centre_point, with_centre
from hdet_hf.line_search import line_search_optimum


def _weights(seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(5, 3, generator=generator, dtype=torch.float64),
        torch.randn(7, generator=generator, dtype=torch.float64),
    ]


@pytest.mark.parametrize("spread", [0.02, 0.25, 0.5])
def test_both_replicas_rebuild_the_mean_of_the_two_after_a_step_size_interval(spread):
    start, update = _weights(0), _weights(1)
    multipliers = (1 - spread, 1 + spread)  # two replicas: mean 1
    replicas = [[s + m * d for s, d in zip(start, update)] for m in multipliers]
    mean = [(a + b) / 2 for a, b in zip(*replicas)]
    for own, m in zip(replicas, multipliers):
        for rebuilt, expected, s, d in zip(centre_after_step_size(own, start, m), mean, start, update):
            torch.testing.assert_close(rebuilt, expected)
            torch.testing.assert_close(rebuilt, s + d)  # where the base LR takes the start
    assert all(
        t.data_ptr() != o.data_ptr()
        for t, o in zip(centre_after_step_size(replicas[0], start, 0.9), replicas[0])
    )
    with pytest.raises(ValueError, match="multiplier > 0"):
        centre_after_step_size(replicas[0], start, 0.0)


def test_both_replicas_rebuild_the_mean_of_the_two_after_an_offset_interval():
    average, direction, update = _weights(2), _weights(3), _weights(4)
    scale = 1 - math.exp(-0.5)
    multipliers = (0.75, 1.25)
    replicas = [
        [a + scale * (m - 1) * z + d for a, z, d in zip(average, direction, update)] for m in multipliers
    ]
    for own, m in zip(replicas, multipliers):
        for rebuilt, a, d in zip(centre_after_offsets(own, direction, scale * (m - 1)), average, update):
            torch.testing.assert_close(rebuilt, a + d)


@pytest.mark.parametrize("optimum", [0.3, 1.0, 1.7, 6.0])
def test_two_replicas_and_the_centre_fit_the_parabola_that_three_replicas_fit(optimum):
    three = torch.tensor([0.75, 1.0, 1.25], dtype=torch.float64)
    losses = 2.0 + 0.3 * (three - optimum) ** 2
    two = three[[2, 0]]  # two replicas in any rank order, and the centre the two of them rebuilt
    points = with_centre(
        two, losses[[2, 0]], torch.tensor([True, True]), torch.tensor([losses[1], losses[1]])
    )
    assert line_search_optimum(*points) == pytest.approx(optimum, rel=1e-9)
    assert line_search_optimum(three, losses) == pytest.approx(optimum, rel=1e-9)
    assert line_search_optimum(two, losses[[2, 0]]) is None  # without it: two points, no line


def test_the_centre_is_the_mean_over_the_scored_replicas_with_a_finite_centre():
    m, y = torch.tensor([0.8, 1.2]), torch.tensor([3.0, 2.0])
    both = with_centre(m, y, torch.tensor([True, True]), torch.tensor([2.4, 2.6]))
    assert both[0].tolist() == pytest.approx([0.8, 1.2, 1.0]) and both[1].tolist()[-1] == pytest.approx(2.5)
    assert both[2].tolist() == [True, True, True]
    one = with_centre(m, y, torch.tensor([True, False]), torch.tensor([2.4, 2.6]))
    assert one[1].tolist()[-1] == pytest.approx(2.4)
    nan = with_centre(m, y, torch.tensor([True, True]), torch.tensor([math.nan, 2.6]))
    assert nan[1].tolist()[-1] == pytest.approx(2.6)
    # No centre anywhere (an interval cut by a forced converge): the points are unchanged.
    unchanged = with_centre(m, y, torch.tensor([True, True]), torch.tensor([math.nan, math.nan]))
    assert unchanged[0] is m and unchanged[1] is y


def test_which_runs_use_the_centre_point():
    def uses(replicas: int = 2, **settings) -> bool:
        config = HDETConfig(**{"auto_lr": True, "auto_lr_warmup_steps": 0, **settings}).for_run(100)
        return uses_centre_point(config, replicas)

    assert uses()  # the default: shared gradients, the horizon, the averaged probe with the train loss
    assert uses(controller_signal="probe") and uses(controller_signal="averaged_probe")
    assert not uses(3) and not uses(8) and not uses(1)  # three replicas fit a line of their own
    assert not uses(controller_line_search_threshold=0.0)
    assert not uses(controller_line_search_centre=False)  # --no_hdet_controller_line_search_centre
    assert not uses(controller_signal="train_loss")
    assert not uses(controller_signal="cooldown_probe")  # a cool-down moves each replica off the line
    assert not uses(comparison_horizon=0.0)  # no anchor: the start of a step-size interval is unknown
    assert not uses(gradient_sync="local")  # each replica follows its own gradient: no common line
    assert not uses_centre_point(HDETConfig(auto_lr=False).for_run(100), 2)  # no controller, nothing to size
