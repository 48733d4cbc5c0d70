"""`OneCycleAutoLR.start_race` without processes: what it refuses, and that one process races nothing.

Its behaviour on 2 processes (a raise far below, bit-identical when nothing changes): test_engine_distributed.py.
"""

import pytest
import torch
from torch import nn

from hdet_hf import OneCycleAutoLR


def scheduler(auto_lr: bool = True, **extra) -> tuple[nn.Module, torch.optim.Optimizer, OneCycleAutoLR]:
    model = nn.Linear(3, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kwargs = dict(ensemble_lr_spread_ratio=0.25, model_sync_interval=4, enable_auto_lr=auto_lr, auto_lr_warmup_steps=2)
    return model, opt, OneCycleAutoLR(opt, max_lr=1e-3, total_steps=20, **kwargs, **extra)


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
    with pytest.raises(ValueError, match="lower_train_batches has 4"):  # the split race's pair: as many steps
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5, lower_train_batches=BATCHES[:4])
    with pytest.raises(ValueError, match="accumulation_steps=2 batches each, but train_batches has 5. Pass at least 6"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=3, accumulation_steps=2)
    with pytest.raises(ValueError, match="accumulation_steps must be"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5, accumulation_steps=0)
    with pytest.raises(ValueError, match="at least 2 batches"):
        sched.start_race(model, BATCHES, loss_fn, PROBE[:1], steps=5)
    with pytest.raises(ValueError, match="steps must be"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=0)
    with pytest.raises(ValueError, match="max_grad_norm"):
        sched.start_race(model, BATCHES, loss_fn, PROBE, steps=5, max_grad_norm=0.0)
    with pytest.raises(ValueError, match="not in the optimizer"):  # another model than the optimizer's
        sched.start_race(nn.Linear(3, 1), BATCHES, loss_fn, PROBE, steps=5)


def test_the_stall_ceiling_follows_the_race_unless_turned_off():
    # Default: the engine caps the controller below a stalled race candidate wherever start_race recorded one.
    *_, sched = scheduler()
    assert sched.hdet_config.start_race_stall_ceiling is None
    sched.engine.start_at_scale(1.0, race={"scale": 1.0, "lowered": False, "stall_ceiling": 2.15})
    assert sched.engine.race_ceiling() == 2.15
    *_, off = scheduler(stall_ceiling=False)
    assert off.hdet_config.start_race_stall_ceiling is False
    off.engine.start_at_scale(1.0, race={"scale": 1.0, "lowered": False, "stall_ceiling": 2.15})
    assert off.engine.race_ceiling() is None
    # Auto-LR off: nothing to cap, and no error for the default.
    assert scheduler(auto_lr=False)[2].hdet_config.start_race_stall_ceiling is None


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


def race_steps_trained(scaler: torch.amp.GradScaler | None, max_grad_norm: float | None, loss_scale: float = 1.0):
    """Ten RaceSteps on a regression from the same weights; the trained weights."""
    from hdet_hf.race_runner import RaceSteps

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    steps = RaceSteps(opt, list(model.parameters()), max_grad_norm, scaler)
    for batch in BATCHES * 2:
        steps.backward(loss_scale * loss_fn(model, 30 * batch))  # large gradients: clipping at 0.1 binds
        steps.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_race_steps_unscale_before_clipping_and_leave_the_runs_scaler_alone():
    # Scaling by a power of two is exact in fp32: through the scaler the race steps are the plain ones bit for bit,
    # also when clipping binds (clipping the scaled gradients would shrink every step 2**16-fold).
    run_scaler = torch.amp.GradScaler("cpu")
    before = run_scaler.state_dict()
    for clip in (None, 0.1):
        assert torch.equal(race_steps_trained(run_scaler, clip), race_steps_trained(None, clip))
    assert run_scaler.state_dict() == before
    # An overflowing scale skips the step (and backs off), as the run's scaler does, instead of writing inf weights.
    huge = torch.amp.GradScaler("cpu", init_scale=2.0**127)
    trained = race_steps_trained(huge, None, loss_scale=1e6)
    assert torch.isfinite(trained).all() and not torch.equal(trained, race_steps_trained(None, None, loss_scale=1e6))
    assert huge.get_scale() == 2.0**127

