"""The cool-down score: a replica's probe loss after a short LR cool-down on copies of its state."""

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.cooldown import cooldown_lr_factors, cooldown_score


def _trained_linear(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    for _ in range(3):
        (model(x) - y).pow(2).mean().backward()
        opt.step()
    return model, opt, x, y


def _snapshot(model, opt):
    params = [p.detach().clone() for p in model.parameters()]
    grads = [p.grad.clone() for p in model.parameters()]
    state = {i: {k: v.clone() for k, v in opt.state[p].items()} for i, p in enumerate(model.parameters())}
    return params, grads, state, [g["lr"] for g in opt.param_groups]


def _assert_unchanged(model, opt, snapshot):
    params, grads, state, lrs = snapshot
    for i, p in enumerate(model.parameters()):
        assert torch.equal(p.detach(), params[i])
        assert torch.equal(p.grad, grads[i])
        assert set(opt.state[p]) == set(state[i])
        assert all(torch.equal(opt.state[p][k], v) for k, v in state[i].items())
    assert [g["lr"] for g in opt.param_groups] == lrs


def test_linear_cooldown_factors():
    assert cooldown_lr_factors(4) == pytest.approx([0.8, 0.6, 0.4, 0.2])
    assert cooldown_lr_factors(1) == pytest.approx([0.5])
    with pytest.raises(ValueError, match="at least one"):
        cooldown_lr_factors(0)


def test_score_is_the_probe_after_real_steps_and_everything_is_restored_bit_for_bit():
    model, opt, x, y = _trained_linear()
    model.eval()  # no dropout: the cool-down below is reproducible by hand
    snapshot = _snapshot(model, opt)
    rng = torch.get_rng_state()
    lrs_seen = []

    def loss_fn(i):
        lrs_seen.append(opt.param_groups[0]["lr"])
        return (model(x) - y).pow(2).mean()

    def probe():
        return float((model(x) - y).pow(2).mean().detach())

    before = probe()
    score = cooldown_score(list(model.parameters()), opt, loss_fn, probe, steps=3)
    _assert_unchanged(model, opt, snapshot)
    assert torch.equal(torch.get_rng_state(), rng)
    assert lrs_seen == pytest.approx([0.05 * f for f in cooldown_lr_factors(3)])
    assert score < before  # three more descent steps on the probe's own data

    # The same three steps by hand on a copy give the same score.
    copy_model, copy_opt, *_ = _trained_linear()
    copy_model.eval()
    for factor in cooldown_lr_factors(3):
        copy_opt.param_groups[0]["lr"] = 0.05 * factor
        copy_opt.zero_grad()
        (copy_model(x) - y).pow(2).mean().backward()
        copy_opt.step()
    assert score == pytest.approx(float((copy_model(x) - y).pow(2).mean().detach()), rel=1e-6)


def test_state_is_restored_when_the_loss_raises():
    model, opt, x, y = _trained_linear()
    snapshot = _snapshot(model, opt)
    calls = []

    def loss_fn(i):
        calls.append(i)
        if i == 1:
            raise RuntimeError("out of memory")
        return (model(x) - y).pow(2).mean()

    with pytest.raises(RuntimeError, match="out of memory"):
        cooldown_score(list(model.parameters()), opt, loss_fn, lambda: 0.0, steps=3)
    assert calls == [0, 1]
    _assert_unchanged(model, opt, snapshot)


def test_dropout_in_the_cooldown_leaves_the_random_stream_alone():
    model, opt, x, y = _trained_linear()
    model.train()
    torch.manual_seed(123)
    cooldown_score(
        list(model.parameters()), opt, lambda i: (model(x) - y).pow(2).mean(), lambda: 0.0, steps=2
    )
    after = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(3))


def test_parameters_outside_the_scored_set_do_not_move_and_clipping_applies():
    model, opt, x, y = _trained_linear()
    model.eval()
    first, second = model[0], model[2]
    frozen_before = [p.detach().clone() for p in second.parameters()]
    norms = []

    def probe():
        return float((model(x) - y).pow(2).mean().detach())

    def loss_fn(i):
        return (model(x) - y).pow(2).mean() * 1e3  # a large gradient, clipped to norm 1e-3 below

    original_step = opt.step

    def step(*args, **kwargs):
        norms.append(float(torch.norm(torch.stack([p.grad.norm() for p in first.parameters()]))))
        assert all(p.grad is None for p in second.parameters())
        return original_step(*args, **kwargs)

    opt.step = step
    cooldown_score(list(first.parameters()), opt, loss_fn, probe, steps=2, max_grad_norm=1e-3)
    assert norms == pytest.approx([1e-3, 1e-3], rel=1e-4)
    assert all(torch.equal(p.detach(), b) for p, b in zip(second.parameters(), frozen_before))
    assert all(p.grad is not None for p in second.parameters())  # their real gradients are back


def test_config_validates_cooldown_steps():
    assert HDETConfig(controller_signal="cooldown_probe").cooldown_steps == 4
    with pytest.raises(ValueError, match="--hdet_cooldown_steps must be a positive integer"):
        HDETConfig(cooldown_steps=0)
    with pytest.raises(ValueError, match="--hdet_cooldown_steps must be a positive integer"):
        HDETConfig(cooldown_steps=2.5)


def test_a_base_cooldown_starts_from_the_lr_every_rank_stepped_at(monkeypatch):
    """``--hdet_cooldown_lr base``: in a step-size interval rank r stepped at base x narrowed(m_r), so its
    cool-down starts at its LR / narrowed(m_r); in a horizon interval every rank stepped at the base LR, so at 1.
    Rank 0 of 3 (multiplier 0.5 at spread 0.5, 0.8 with --hdet_lr_fan_out_scale 0.4), no processes."""
    import hdet_hf.engine as engine_module
    from hdet_hf.engine import HDETEngine

    # Rank 0 of 3 without processes: nothing below communicates.
    monkeypatch.setattr(engine_module, "rank_and_world_size", lambda rank, world, group: (0, 3))
    monkeypatch.setattr(HDETEngine, "_check_settings_agree", lambda self: None)
    starts = []
    monkeypatch.setattr(
        engine_module, "cooldown_score", lambda *args, lr_scale: starts.append(lr_scale) or 0.0
    )
    model = torch.nn.Linear(2, 1)
    config = HDETConfig(
        sync_interval=2, lr_spread=0.5, auto_lr=True, controller_signal="cooldown_probe", cooldown_lr="base",
        comparison_horizon=4, comparison_horizon_start=8, lr_fan_out_scale=0.4,
        controller_time_scale="run",  # a vote at every converge (T 2 is shorter than the default interval)
    )  # fmt: skip
    engine = HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=0.1), 16)
    engine.probe_fn, engine.cooldown_loss_fn = (lambda: 0.0), (lambda i: torch.zeros(()))
    multiplier = engine.multipliers(step=2)[0]
    engine.step, engine.steps_in_interval = 2, 2  # the interval 0-2: step size
    engine._probe_loss(at_average=False)
    engine.step = 4  # the interval 2-4: offsets along the run's direction
    engine._probe_loss(at_average=False)
    assert starts == [pytest.approx(1.0 / (1.0 + 0.4 * (multiplier - 1.0)), rel=1e-12), 1.0]
