"""The DiLoCo outer step: pure math, no processes."""

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.outer import outer_nesterov_step_


def test_lr_one_without_momentum_is_plain_averaging():
    average = torch.randn(5)
    params, anchors, momenta = [average.clone()], [torch.randn(5)], [torch.zeros(5)]
    outer_nesterov_step_(params, anchors, momenta, lr=1.0, momentum=0.0)
    # Equal up to rounding (anchor - (anchor - average)); the engine skips the step entirely at these values.
    assert torch.allclose(params[0], average, atol=1e-6) and torch.equal(anchors[0], params[0])


def test_two_nesterov_steps_match_the_formula():
    anchor, momentum, lr, mu = torch.tensor([2.0]), torch.zeros(1), 0.7, 0.9
    params, anchors, momenta = [torch.tensor([1.0])], [anchor.clone()], [momentum.clone()]
    expected = anchor.clone()
    m = momentum.clone()
    for average in (1.0, 0.5):
        params[0].fill_(average)  # what the converge's all-reduce left
        g = expected - average
        m = mu * m + g
        expected = expected - lr * (g + mu * m)
        outer_nesterov_step_(params, anchors, momenta, lr, mu)
        assert params[0].item() == pytest.approx(expected.item())
        assert torch.equal(anchors[0], params[0]) and momenta[0].item() == pytest.approx(m.item())


@pytest.mark.parametrize("kwargs", [{"outer_lr": 0.0}, {"outer_lr": float("inf")}, {"outer_momentum": 1.0}])
def test_bad_outer_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="--hdet_outer_"):
        HDETConfig(**kwargs)
