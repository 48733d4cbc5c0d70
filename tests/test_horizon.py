"""hdet_hf/horizon.py: the discounted direction Z and the replica offsets along it (pure tensor math)."""

import math

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.engine import HDETEngine
from hdet_hf.horizon import HorizonOffsets, horizon_decay


def test_decay_is_exp_minus_t_over_h_and_zero_turns_it_off():
    assert horizon_decay(10, 30) == pytest.approx(math.exp(-1 / 3))
    assert horizon_decay(10, 0) == 0.0
    assert not HorizonOffsets(0.0).enabled and HorizonOffsets(0.5).enabled
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        HorizonOffsets(1.0)


def test_direction_is_the_discounted_sum_of_interval_updates():
    offsets = HorizonOffsets(0.5)
    p = torch.tensor([1.0, 2.0])
    offsets.update_([p])  # first converge: anchor only
    assert offsets.directions[0].tolist() == [0.0, 0.0]
    steps = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0]), torch.tensor([4.0, 4.0])]
    expected = torch.zeros(2)
    for update in steps:
        p = p + update
        offsets.update_([p])
        expected = 0.5 * expected + update
        assert torch.equal(offsets.directions[0], expected)
        assert torch.equal(offsets.anchors[0], p)
    # Z = 0.25 * u1 + 0.5 * u2 + u3
    assert offsets.directions[0].tolist() == [4.25, 5.0]


def test_a_converge_that_averaged_nothing_discounts_z_and_keeps_the_anchor():
    """`discount_` (the engine kept the replicas apart): Z decays as at any converge, the anchor stays, and the next
    update takes the whole displacement since the anchor."""
    offsets = HorizonOffsets(0.5)
    p = torch.tensor([1.0, 2.0])
    offsets.update_([p])
    offsets.update_([p + torch.tensor([2.0, 0.0])])  # Z = (2, 0), anchor (3, 2)
    offsets.discount_()
    assert offsets.directions[0].tolist() == [1.0, 0.0] and offsets.anchors[0].tolist() == [3.0, 2.0]
    offsets.update_([torch.tensor([3.0, 6.0])])  # 4 more along the second axis since the anchor
    assert offsets.directions[0].tolist() == [0.5, 4.0] and offsets.anchors[0].tolist() == [3.0, 6.0]
    HorizonOffsets(0.5).discount_()  # before any update: nothing to discount


def test_offsets_average_to_zero_over_symmetric_multipliers():
    offsets = HorizonOffsets(0.5)
    offsets.update_([torch.zeros(3)])
    offsets.update_([torch.tensor([1.0, -2.0, 0.5])])
    multipliers = [0.75, 1.25]
    replicas = []
    for m in multipliers:
        p = torch.tensor([1.0, -2.0, 0.5])
        offsets.offset_([p], m - 1.0)
        replicas.append(p)
    assert torch.equal(replicas[0], torch.tensor([0.75, -1.5, 0.375]))
    assert torch.equal(torch.stack(replicas).mean(0), torch.tensor([1.0, -2.0, 0.5]))


def test_release_frees_the_copies():
    offsets = HorizonOffsets(0.5)
    offsets.update_([torch.ones(2)])
    offsets.offset_([torch.ones(2)], 0.1)
    offsets.release()
    assert offsets.anchors is None and offsets.directions is None and not offsets.offsets_in_place
    assert offsets.state_dict() == {
        "horizon_anchors": None, "horizon_directions": None, "horizon_updates": 0, "horizon_offsets_in_place": False
    }  # fmt: skip


def test_state_round_trip():
    offsets = HorizonOffsets(0.5)
    offsets.update_([torch.ones(2)])
    offsets.update_([torch.full((2,), 3.0)])
    restored = HorizonOffsets(0.5)
    restored.load_state_dict(offsets.state_dict(), torch.device("cpu"))
    assert torch.equal(restored.directions[0], offsets.directions[0])
    assert torch.equal(restored.anchors[0], offsets.anchors[0])
    assert restored.has_direction and not restored.offsets_in_place
    offsets.offset_([torch.ones(2)], 0.1)  # the replicas sit at their offsets when saved: a resume knows it
    restored.load_state_dict(offsets.state_dict(), torch.device("cpu"))
    assert restored.offsets_in_place


def test_the_first_converge_leaves_no_direction():
    """After the first regular converge Z is zero (offsets along it displace nothing); from the second on it holds
    an update. A checkpoint from before the count existed is taken to hold one; release starts afresh."""
    offsets = HorizonOffsets(0.5)
    offsets.update_([torch.ones(2)])
    assert not offsets.has_direction
    first = offsets.state_dict()
    restored = HorizonOffsets(0.5)
    restored.load_state_dict(first, torch.device("cpu"))
    assert not restored.has_direction
    offsets.update_([torch.full((2,), 3.0)])
    assert offsets.has_direction
    legacy = offsets.state_dict()
    del legacy["horizon_updates"]
    restored.load_state_dict(legacy, torch.device("cpu"))
    assert restored.has_direction
    offsets.release()
    assert not offsets.has_direction
    offsets.update_([torch.ones(2)])
    assert not offsets.has_direction


def test_config_resolves_and_refuses():
    auto = {"auto_lr": True}
    assert HDETConfig(comparison_horizon=0.1, **auto).resolve_comparison_horizon(1000) == pytest.approx(100.0)
    assert HDETConfig(comparison_horizon=40, **auto).resolve_comparison_horizon(1000) == 40.0
    assert HDETConfig(comparison_horizon=0, **auto).resolve_comparison_horizon(1000) == 0.0
    # The default (None): 10 % of the run with the LR controller in plain shared mode, else off.
    assert HDETConfig(**auto).resolve_comparison_horizon(1000) == pytest.approx(100.0)
    assert HDETConfig().resolve_comparison_horizon(1000) == 0.0
    assert HDETConfig(gradient_sync="local", **auto).effective_comparison_horizon == 0.0
    assert HDETConfig(outer_lr=0.7, **auto).effective_comparison_horizon == 0.0
    assert HDETConfig(hsdp_shard_size=2, **auto).effective_comparison_horizon == 0.0
    assert HDETConfig(lr_groups=True, **auto).effective_comparison_horizon == 0.0
    for bad in (-0.1, 2.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="--hdet_comparison_horizon"):
            HDETConfig(comparison_horizon=bad, **auto)
    with pytest.raises(ValueError, match="--hdet_gradient_sync local"):
        HDETConfig(comparison_horizon=0.1, gradient_sync="local", **auto)
    with pytest.raises(ValueError, match="--hdet_outer_lr"):
        HDETConfig(comparison_horizon=0.1, outer_lr=0.7, **auto)
    with pytest.raises(ValueError, match="not with --hdet_lr_groups"):
        HDETConfig(comparison_horizon=0.1, lr_groups=True, **auto)
    with pytest.raises(ValueError, match="--hdet_auto_lr is off"):
        HDETConfig(comparison_horizon=0.1)
    # Where the horizon takes over from the early comparison: a fraction of the run or a step, default 0.3.
    assert HDETConfig(**auto).resolve_warmup_steps(1000, "comparison_horizon_start") == 300
    assert (
        HDETConfig(comparison_horizon_start=0, **auto).resolve_warmup_steps(1000, "comparison_horizon_start")
        == 0
    )
    assert (
        HDETConfig(comparison_horizon_start=40, **auto).resolve_warmup_steps(1000, "comparison_horizon_start")
        == 40
    )
    for bad in (-0.1, 1.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="--hdet_comparison_horizon_start must be an integer"):
            HDETConfig(comparison_horizon_start=bad, **auto)


def engine(**config) -> HDETEngine:
    """A 4-step single-process engine with auto-LR on a linear model (for state and resume checks)."""
    model = torch.nn.Linear(2, 1)
    return HDETEngine(
        HDETConfig(sync_interval=2, lr_spread=0.25, auto_lr=True, **config), model,
        torch.optim.SGD(model.parameters(), lr=0.1), 4,
    )  # fmt: skip


def test_a_checkpoint_from_before_the_horizon_resumes_only_with_one_interval_comparisons():
    """A state whose config has no comparison_horizon ran with one-interval comparisons (0): resuming it into
    a run whose default resolves to 0.1 would change the controller mid-run, so it is refused by name."""
    with pytest.warns(UserWarning, match="single process"):
        old = engine(comparison_horizon=0).state_dict()
    del old["config"]["comparison_horizon"], old["config"]["comparison_horizon_start"]
    with pytest.warns(UserWarning, match="single process"):
        fresh = engine()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_comparison_horizon 0.0, but this run has --hdet_comparison_horizon 0.1",
    ):
        fresh.load_state_dict(old)
    with pytest.warns(UserWarning, match="single process"):
        engine(comparison_horizon=0).load_state_dict(old)
    # A state saved with the default resumes with the default.
    with pytest.warns(UserWarning, match="single process"):
        engine().load_state_dict(engine().state_dict())


def test_a_horizon_checkpoint_from_before_its_start_existed_resumes_only_with_start_0():
    """Session 7's horizon ran from the first converge: its checkpoints (no comparison_horizon_start key) resume
    with --hdet_comparison_horizon_start 0, and the default (0.3) is refused by name; a checkpoint of the
    one-interval early phase (no early_comparison key) is refused under the default "lower_of_both"."""
    with pytest.warns(UserWarning, match="single process"):
        old = engine(comparison_horizon_start=0).state_dict()
    assert old["config"]["comparison_horizon"] == 0.1
    del old["config"]["comparison_horizon_start"], old["config"]["early_comparison"]
    with pytest.warns(UserWarning, match="single process"):
        fresh = engine()
    with pytest.raises(
        ValueError,
        match=r"--hdet_comparison_horizon_start 0.0, but this run has --hdet_comparison_horizon_start 0.3",
    ):
        fresh.load_state_dict(old)
    with pytest.warns(UserWarning, match="single process"):
        engine(comparison_horizon_start=0).load_state_dict(old)  # early_comparison does not apply: accepted
    with pytest.warns(UserWarning, match="single process"):
        one_interval = engine(early_comparison="one_interval").state_dict()
    del one_interval["config"]["early_comparison"]
    with pytest.warns(UserWarning, match="single process"):
        with pytest.raises(
            ValueError,
            match=r"--hdet_early_comparison one_interval, but this run has --hdet_early_comparison lower_of_both",
        ):
            engine().load_state_dict(one_interval)


def test_the_drop_in_scheduler_passes_the_horizon_and_its_start_on():
    from hdet_hf import OneCycleAutoLR

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="single process"):
        sched = OneCycleAutoLR(
            opt, max_lr=0.1, total_steps=100, model=model, ensemble_lr_spread_ratio=0.25, model_sync_interval=10,
            enable_auto_lr=True, auto_lr_warmup_steps=0.1, comparison_horizon=0.1, comparison_horizon_start=0.3,
        )  # fmt: skip
    assert sched.engine.horizon.enabled and sched.engine.horizon_start_step == 30
    assert sched.engine.lrs.step_spread and not sched.engine.compares_over_horizon()
    assert sched.engine.settings.raise_gain == 2.0  # the library default, passed on to the controller
    assert (
        sched.engine.lrs.fan_out_scale == 0.4
    )  # the library default: the step-size intervals fan out narrower
    with pytest.warns(UserWarning, match="single process"):
        symmetric = OneCycleAutoLR(
            torch.optim.SGD(model.parameters(), lr=0.1), max_lr=0.1, total_steps=100, model=model,
            ensemble_lr_spread_ratio=0.25, model_sync_interval=10, enable_auto_lr=True, auto_lr_warmup_steps=0.1,
            controller_update="multiplicative", raise_gain=1.0,
        )  # fmt: skip
    assert symmetric.engine.settings.raise_gain == 1.0 and symmetric.hdet_config.controller_raise_gain == 1.0
    assert (
        symmetric.hdet_config.controller_line_search_max_raise == 4.0
        and symmetric.engine.line_search.max_raise == 4.0
    )
    # Without a horizon there are no step-size intervals to narrow: every interval fans out at the full spread.
    assert symmetric.hdet_config.lr_fan_out_scale == 0.4 and symmetric.engine.lrs.fan_out_scale == 1.0
    with pytest.warns(UserWarning, match="single process"):
        full = OneCycleAutoLR(
            torch.optim.SGD(model.parameters(), lr=0.1), max_lr=0.1, total_steps=100, model=model,
            ensemble_lr_spread_ratio=0.25, model_sync_interval=10, enable_auto_lr=True, auto_lr_warmup_steps=0.1,
            comparison_horizon=0.1, fan_out_scale=1.0, line_search_breaks_ties=True, line_search_max_raise=2.0,
        )  # fmt: skip
    assert full.engine.lrs.fan_out_scale == 1.0 and full.hdet_config.lr_fan_out_scale == 1.0
    assert (
        full.hdet_config.controller_line_search_max_raise == 2.0 and full.engine.line_search.max_raise == 2.0
    )
    assert full.hdet_config.controller_line_search_breaks_ties


def test_paired_votes_bound_each_kind_by_the_others_latest_and_round_trip():
    from hdet_hf.horizon import PairedVotes

    votes = PairedVotes()
    assert votes.cap("one_interval") == 0.0 and votes.cap("horizon") == 0.0  # no raise on one word alone
    votes.record("one_interval", 0.2)
    assert votes.cap("horizon") == 0.2 and votes.cap("one_interval") == 0.0
    votes.record("horizon", -0.1)
    assert votes.cap("one_interval") == -0.1
    restored = PairedVotes()
    restored.load_state_dict(votes.state_dict())
    assert restored.latest == {"one_interval": 0.2, "horizon": -0.1}
    restored.load_state_dict({})  # a checkpoint from before paired votes existed
    assert restored.latest == {"one_interval": None, "horizon": None}


def test_early_comparison_is_checked():
    with pytest.raises(
        ValueError, match="--hdet_early_comparison must be one of lower_of_both, one_interval"
    ):
        HDETConfig(early_comparison="both")


def test_with_a_short_interval_the_offsets_are_as_wide_as_at_the_default_interval():
    """--hdet_controller_time_scale run: with T 10 in a 2,000-step run (the default interval is 60 steps) the
    replicas start as far apart along Z as T 60 would set them, not one short interval's worth; capped at Z itself.
    At the default interval (share 1) the offsets are unchanged (reading 37)."""
    short = HDETConfig(sync_interval=10, controller_time_scale="run")
    share = short.controller_interval_share(2000)
    # 'vote' (the default) widens them alike: by T's share, while its lambda acts once per default interval.
    assert HDETConfig(sync_interval=10).converge_share(2000) == share
    assert short.default_sync_interval(2000) == 60 and share == pytest.approx(1 / 6)
    widened = HorizonOffsets(horizon_decay(10, 200), share).offset_scale
    assert widened == pytest.approx(6 * (1 - math.exp(-10 / 200)))
    assert widened == pytest.approx(1 - math.exp(-60 / 200), rel=0.15)  # about the default interval's
    assert HorizonOffsets(horizon_decay(60, 200)).offset_scale == pytest.approx(1 - math.exp(-60 / 200))
    assert HorizonOffsets(horizon_decay(1, 2), 0.01).offset_scale == 1.0
    with pytest.raises(ValueError, match="interval share"):
        HorizonOffsets(0.5, 0.0)
