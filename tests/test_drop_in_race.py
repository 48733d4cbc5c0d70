"""`OneCycleAutoLR.start_race` without processes: what it refuses, and that one process races nothing.

Its behaviour on 2 processes (a raise far below, bit-identical when nothing changes): test_engine_distributed.py.
"""

import pytest
import torch
from torch import nn

from hdet_hf import OneCycleAutoLR


def scheduler(auto_lr: bool = True) -> tuple[nn.Module, torch.optim.Optimizer, OneCycleAutoLR]:
    model = nn.Linear(3, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kwargs = dict(ensemble_lr_spread_ratio=0.25, model_sync_interval=4, enable_auto_lr=auto_lr, auto_lr_warmup_steps=2)
    return model, opt, OneCycleAutoLR(opt, max_lr=1e-3, total_steps=20, **kwargs)


def loss_fn(module: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    return module(batch).pow(2).mean()


BATCHES = [torch.randn(4, 3) for _ in range(5)]
PROBE = [torch.randn(1, 3) for _ in range(4)]


def test_refuses_what_it_cannot_race():
    model, _, sched = scheduler(auto_lr=False)
    with pytest.raises(ValueError, match="enable_auto_lr"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5)
    model, _, sched = scheduler()
    with pytest.raises(ValueError, match="train_batches has 5"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=6)
    with pytest.raises(ValueError, match="at least 2 batches"):
        sched.start_race(model, BATCHES, loss_fn, PROBE[:1], steps=5)
    with pytest.raises(ValueError, match="steps must be"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=0)
    with pytest.raises(ValueError, match="max_grad_norm"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5, max_grad_norm=0.0)
    with pytest.raises(ValueError, match="not in the optimizer"):  # another model than the optimizer's
        sched.start_race(nn.Linear(3, 1), BATCHES, loss_fn, PROBE, steps=5)


def test_after_the_first_step_it_is_too_late():
    model, opt, sched = scheduler()
    loss_fn(model, BATCHES[0]).backward()
    opt.step()
    sched.step()
    with pytest.raises(RuntimeError, match="already stepped"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5)


def test_one_process_races_nothing_and_changes_nothing():
    model, opt, sched = scheduler()
    weights = [p.detach().clone() for p in model.parameters()]
    lr = opt.param_groups[0]["lr"]
    with pytest.warns(UserWarning, match="nothing to race"):
        assert sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5) is None
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters()))
    assert opt.param_groups[0]["lr"] == lr and not opt.state
