import math
from dataclasses import replace

import pytest
import torch

from hdet_hf.controller import (
    ControllerSettings,
    ControllerState,
    controller_step,
    loss_weights,
    reference_gamma,
)

M = torch.tensor([0.5, 5 / 6, 7 / 6, 1.5], dtype=torch.float64)


def test_weights_favour_lower_loss_and_sum_to_one():
    w = loss_weights(torch.tensor([3.0, 2.0, 1.0]), temperature=0.5, mode="fixed")
    assert w.sum().item() == pytest.approx(1.0)
    assert w[2] > w[1] > w[0]
    expected = torch.softmax(
        (torch.tensor([3.0, 2.0, 1.0]).double().mean() - torch.tensor([3.0, 2.0, 1.0]).double()) / 0.5, 0
    )
    assert torch.allclose(w, expected)


def test_adaptive_temperature_is_scale_free():
    losses = torch.tensor([3.0, 2.9, 2.8, 3.05])
    w1 = loss_weights(losses, 1.0, "adaptive")
    w2 = loss_weights(losses * 100, 1.0, "adaptive")
    assert torch.allclose(w1, w2)
    assert torch.allclose(
        loss_weights(torch.ones(4), 1.0, "adaptive"), torch.full((4,), 0.25, dtype=torch.float64)
    )


def test_unhealthy_rank_gets_zero_weight():
    w = loss_weights(torch.tensor([1.0, float("nan"), 2.0, float("inf")]), 1.0, "fixed")
    assert w[1] == 0 and w[3] == 0
    assert w.sum().item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="healthy"):
        loss_weights(torch.tensor([float("nan")] * 2), 1.0, "fixed")


@pytest.mark.parametrize("update", ["multiplicative", "additive"])
def test_direction(update):
    settings = ControllerSettings(
        temperature=0.05, temperature_mode="fixed", lr=0.5, momentum=0.0, update=update
    )
    better_high = torch.tensor([3.0, 2.9, 2.8, 2.7])  # higher LR, lower loss
    better_low = better_high.flip(0)
    up, _ = controller_step(ControllerState(), M, better_high, settings, base_value=1e-3)
    down, _ = controller_step(ControllerState(), M, better_low, settings, base_value=1e-3)
    assert up.scale > 1.0 > down.scale
    same, info = controller_step(ControllerState(), M, torch.full((4,), 2.0), settings, base_value=1e-3)
    assert same.scale == pytest.approx(1.0) and info["delta"] == pytest.approx(0.0, abs=1e-12)


def test_additive_matches_paper_equations():
    settings = ControllerSettings(
        temperature=0.002, temperature_mode="fixed", lr=0.5, momentum=0.9, update="additive"
    )
    losses = torch.tensor([2.001, 2.0, 1.999, 2.0005], dtype=torch.float64)
    base = 2e-3
    state = ControllerState(scale=1.0, velocity=1e-5)
    new, info = controller_step(state, M, losses, settings, base_value=base)
    w = torch.softmax((losses.mean() - losses) / 0.002, 0)
    values = base * M
    delta = float((w * values).sum() - values.mean())
    velocity = 0.9 * 1e-5 + 0.1 * delta
    assert info["delta"] == pytest.approx(delta)
    assert new.velocity == pytest.approx(velocity)
    assert new.scale * base == pytest.approx(base + 0.5 * velocity)


def test_multiplicative_update_in_log_space():
    settings = ControllerSettings(
        temperature=1.0, temperature_mode="fixed", lr=0.7, momentum=0.5, update="multiplicative"
    )
    losses = torch.tensor([1.0, 1.2, 0.9, 1.1], dtype=torch.float64)
    new, info = controller_step(
        ControllerState(scale=2.0, velocity=0.01), M, losses, settings, base_value=1.0
    )
    w = torch.softmax(losses.mean() - losses, 0)
    delta = float((w * M.log()).sum() - M.log().mean())
    velocity = 0.5 * 0.01 + 0.5 * delta
    assert new.scale == pytest.approx(2.0 * math.exp(0.7 * velocity))


def test_value_stays_positive_and_bounded():
    # A huge additive step that the paper's rule would push below zero is clamped to the legal band.
    settings = ControllerSettings(
        temperature=1e-4, temperature_mode="fixed", lr=1e4, momentum=0.0, update="additive", max_factor=10.0
    )
    new, _ = controller_step(
        ControllerState(), M, torch.tensor([0.0, 1.0, 2.0, 3.0]), settings, base_value=1e-3
    )
    assert new.scale == pytest.approx(0.1)
    settings_up = ControllerSettings(
        temperature=1e-4,
        temperature_mode="fixed",
        lr=1e9,
        momentum=0.0,
        update="multiplicative",
        max_factor=10.0,
    )
    new, _ = controller_step(
        ControllerState(), M, torch.tensor([3.0, 2.0, 1.0, 0.0]), settings_up, base_value=1e-3
    )
    assert new.scale == pytest.approx(10.0)


def test_reference_gamma_sign_error_documented():
    # OneCycle defaults over 20 syncs: the reference's decay factor is negative, so (1 - gamma) > 1.
    gamma = reference_gamma(25.0, 1e4, 20)
    assert gamma < 0
    assert (1 - gamma) ** 20 == pytest.approx(1e4 / 25, rel=1e-9)  # grows ~400x instead of decaying


def test_loss_diverged_needs_both_the_factor_and_the_first_converges_loss():
    from hdet_hf.controller import loss_diverged

    # Ordinary regime (mean 4, started near 7): 10x the mean is the test.
    assert loss_diverged(41.0, last_mean=4.0, first_mean=6.9, factor=10)
    assert not loss_diverged(39.0, last_mean=4.0, first_mean=6.9, factor=10)
    # Near-memorised ensemble (mean 0.05): 2.0 is 40x the mean but far below the start, so not diverged;
    # back above the starting loss it is.
    assert not loss_diverged(2.0, last_mean=0.05, first_mean=6.9, factor=10)
    assert loss_diverged(7.5, last_mean=0.05, first_mean=6.9, factor=10)
    # Off, or nothing to compare with yet.
    assert not loss_diverged(1e9, last_mean=4.0, first_mean=6.9, factor=0)
    assert not loss_diverged(1e9, last_mean=None, first_mean=None, factor=10)
    assert loss_diverged(50.0, last_mean=4.0, first_mean=None, factor=10)


def test_two_signals_move_the_base_by_the_mean_of_their_hypergradients():
    settings = ControllerSettings(temperature=1.0, temperature_mode="adaptive", lr=1.0, momentum=0.0)
    m = torch.tensor([0.75, 1.0, 1.25])
    favours_high = torch.tensor([3.0, 2.0, 1.0])
    favours_low = torch.tensor([1.0, 2.5, 3.0])
    _, up = controller_step(ControllerState(), m, favours_high, settings, base_value=1.0)
    _, down = controller_step(ControllerState(), m, favours_low, settings, base_value=1.0)
    state, both = controller_step(
        ControllerState(), m, torch.stack([favours_high, favours_low]), settings, base_value=1.0
    )
    assert up["delta"] > 0 > down["delta"]
    assert both["delta"] == pytest.approx((up["delta"] + down["delta"]) / 2)
    assert both["weights"] == pytest.approx([(a + b) / 2 for a, b in zip(up["weights"], down["weights"])])
    assert math.log(state.scale) == pytest.approx(both["delta"])


def test_delta_cap_bounds_the_hypergradient_from_above_and_keeps_the_raw_one():
    settings = ControllerSettings(temperature=1.0, temperature_mode="adaptive", lr=1.0, momentum=0.0)
    m = torch.tensor([0.5, 1.0, 1.5])
    losses = torch.tensor([3.0, 2.0, 1.0])  # the high-LR rank is best: raw delta > 0
    free, info = controller_step(ControllerState(), m, losses, settings, base_value=1.0)
    assert info["raw_delta"] == info["delta"] > 0 and free.scale > 1.0
    capped, info = controller_step(ControllerState(), m, losses, settings, base_value=1.0, delta_cap=-0.1)
    assert info["delta"] == -0.1 and info["raw_delta"] > 0 and capped.scale < 1.0
    loose, info = controller_step(ControllerState(), m, losses, settings, base_value=1.0, delta_cap=10.0)
    assert loose.scale == free.scale and info["delta"] == info["raw_delta"]


def test_raise_gain_scales_moves_up_and_leaves_moves_down():
    """Multiplicative update: a raise is raise_gain x lambda x v, a cut lambda x v; additive ignores the gain."""
    up, down = torch.tensor([3.0, 2.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 2.0, 3.0])
    plain = ControllerSettings(temperature=1.0, temperature_mode="adaptive", lr=0.5, momentum=0.0)
    boosted = ControllerSettings(
        temperature=1.0, temperature_mode="adaptive", lr=0.5, momentum=0.0, raise_gain=2.0
    )
    for losses, gain in ((up, 2.0), (down, 1.0)):
        ref, ref_info = controller_step(ControllerState(), M, losses, plain, base_value=1e-3)
        new, info = controller_step(ControllerState(), M, losses, boosted, base_value=1e-3)
        assert info["velocity"] == ref_info["velocity"]  # the gain acts on the step, not on the measurement
        assert math.log(new.scale) == pytest.approx(gain * math.log(ref.scale))
    assert math.log(controller_step(ControllerState(), M, up, boosted, 1e-3)[0].scale) > 0
    additive = ControllerSettings(temperature=1.0, lr=1e-4, momentum=0.0, update="additive", raise_gain=2.0)
    additive_ref = ControllerSettings(temperature=1.0, lr=1e-4, momentum=0.0, update="additive")
    assert (
        controller_step(ControllerState(), M, up, additive, 1e-3)[0]
        == controller_step(ControllerState(), M, up, additive_ref, 1e-3)[0]
    )


def test_settings_from_config_carry_the_raise_gain():
    from hdet_hf.config import HDETConfig

    assert ControllerSettings.from_config(HDETConfig()).raise_gain == 2.0
    assert ControllerSettings.from_config(HDETConfig(controller_raise_gain=1.0)).raise_gain == 1.0
    assert ControllerSettings().raise_gain == 1.0  # the bare settings are the paper's symmetric update
    # ... and the signal combination: the engine builds its settings this way (reading 18).
    assert ControllerSettings.from_config(HDETConfig()).combination == "agree_mean"
    assert (
        ControllerSettings.from_config(HDETConfig(controller_signal_combination="mean")).combination == "mean"
    )


def test_two_replicas_cut_at_the_two_replica_gain_and_raise_as_before():
    """``cut_gain`` scales only moves that lower the scale; the engine's settings take
    --hdet_controller_two_replica_cut_gain with exactly two replicas and cut at full step otherwise (reading 35)."""
    from hdet_hf.config import HDETConfig

    M2 = torch.tensor([0.75, 1.25])
    down, up = torch.tensor([1.0, 2.0]), torch.tensor([2.0, 1.0])  # the higher multiplier worse / better
    full = ControllerSettings(temperature=1.0, lr=1.0, momentum=0.0, raise_gain=2.0)
    half = ControllerSettings(temperature=1.0, lr=1.0, momentum=0.0, raise_gain=2.0, cut_gain=0.5)
    cut_full, cut_half = (controller_step(ControllerState(), M2, down, s, 1e-3)[0] for s in (full, half))
    assert math.log(cut_full.scale) < 0
    assert math.log(cut_half.scale) == pytest.approx(0.5 * math.log(cut_full.scale), rel=1e-12)
    assert (
        controller_step(ControllerState(), M2, up, half, 1e-3)[0]
        == controller_step(ControllerState(), M2, up, full, 1e-3)[0]
    )
    assert ControllerSettings.from_config(HDETConfig(), 2).cut_gain == 0.5
    assert ControllerSettings.from_config(HDETConfig(), 4).cut_gain == 1.0
    assert ControllerSettings.from_config(HDETConfig()).cut_gain == 1.0  # replicas unknown: full cuts
    assert ControllerSettings.from_config(HDETConfig(controller_two_replica_cut_gain=1.0), 2).cut_gain == 1.0


def test_agree_moves_only_when_both_signals_ask_for_the_same_direction():
    """combination 'agree': opposite votes hold the scale; same-sign votes move by the smaller one."""
    from hdet_hf.controller import combine_votes

    assert combine_votes([0.2, -0.1], "agree") == 0.0
    assert combine_votes([0.2, 0.05], "agree") == 0.05
    assert combine_votes([-0.2, -0.05], "agree") == -0.05
    assert combine_votes([0.2, -0.1], "mean") == pytest.approx(0.05)
    assert combine_votes([0.2, -0.1], "agree_mean") == 0.0
    assert combine_votes([0.2, 0.1], "agree_mean") == pytest.approx(0.15)
    assert combine_votes([-0.2, -0.1], "agree_mean") == pytest.approx(-0.15)
    with pytest.raises(ValueError, match="'mean', 'agree' or 'agree_mean'"):
        combine_votes([0.1, 0.2], "median")
    m = torch.tensor([0.75, 1.0, 1.25])
    # Train loss favours the small step, the probe the large one: they disagree, so 'agree' holds.
    rows = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    settings = ControllerSettings(temperature=1.0, lr=1.0, momentum=0.0, combination="agree")
    held, info = controller_step(ControllerState(), m, rows, settings, base_value=1.0)
    assert held.scale == 1.0 and info["delta"] == 0.0 and info["row_deltas"][0] < 0 < info["row_deltas"][1]
    # Both favour the large step: it moves up by the smaller of the two hypergradients.
    rows = torch.tensor([[3.0, 2.0, 1.0], [2.2, 2.0, 1.9]])
    moved, info = controller_step(ControllerState(), m, rows, settings, base_value=1.0)
    assert moved.scale > 1.0 and info["delta"] == min(info["row_deltas"]) > 0
    mean, mean_info = controller_step(
        ControllerState(), m, rows, replace(settings, combination="mean"), base_value=1.0
    )
    assert mean_info["delta"] == pytest.approx(sum(info["row_deltas"]) / 2) and mean.scale > moved.scale


def test_a_shorter_interval_moves_the_lr_as_far_over_the_run_not_further():
    """--hdet_controller_time_scale run (default): lambda and beta are per the default interval, so T 10 in a
    2,000-step run (six converges per default interval of 60 steps) takes six moves of a sixth and a momentum whose
    memory is as long in steps: the same steady vote moves the LR as far over 600 steps as T 60 does. Per converge
    (the library before session 32) it moved six times as far (reading 37)."""
    from hdet_hf.config import HDETConfig

    losses = torch.tensor([1.0, 1.1, 1.2, 1.3], dtype=torch.float64)  # a steady "lower" vote

    def travel(sync_interval: int, time_scale: str) -> float:
        # lambda 0.1: far from the 10x bound (a full-size vote moves log(scale) by about lambda x 0.3 a converge).
        config = HDETConfig(sync_interval=sync_interval, controller_time_scale=time_scale, controller_lr=0.1)
        share = config.controller_interval_share(2000)
        settings = ControllerSettings.from_config(config, 4, share)
        state = ControllerState()
        for _ in range(600 // sync_interval):
            state = controller_step(state, M, losses, settings, 1e-3)[0]
        return math.log(state.scale)

    run = HDETConfig(sync_interval=10, controller_time_scale="run")
    assert run.controller_interval_share(2000) == pytest.approx(1 / 6)
    assert HDETConfig(controller_time_scale="run").controller_interval_share(2000) == 1.0  # the default T: no change
    assert run.controller_interval_share(300) == 1.0  # T 10 is the default there
    assert replace(run, sync_interval=200).controller_interval_share(2000) == 1.0  # longer: lambda as given
    # 'vote' (the default): one full-size vote per default interval, on six converges' windows summed.
    assert HDETConfig(sync_interval=10).controller_interval_share(2000) == 1.0
    per_run = travel(60, "run")
    assert per_run < 0
    assert travel(10, "run") == pytest.approx(per_run, rel=0.1)
    assert travel(10, "converge") == pytest.approx(6 * per_run, rel=0.1)  # per converge: six times as far
    settings = ControllerSettings.from_config(HDETConfig(sync_interval=10), 4, 1 / 6)
    assert settings.lr == pytest.approx(1.5 / 6) and settings.momentum == pytest.approx(0.5 ** (1 / 6))
