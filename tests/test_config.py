import warnings
from dataclasses import replace

import pytest
from transformers import HfArgumentParser

from hdet_hf import HDETConfig, HDETTrainingArguments


def parse(*flags):
    (args,) = HfArgumentParser(HDETTrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", "unused", *flags]
    )
    return args


def test_flags_map_onto_config():
    args = parse(
        "--hdet",
        "--hdet_lr_spread",
        "0.3",
        "--hdet_sync_interval",
        "7",
        "--hdet_gradient_sync",
        "shared",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "0.2",
        "--hdet_controller_temperature",
        "0.5",
        "--hdet_controller_lr",
        "0.1",
        "--hdet_controller_momentum",
        "0.8",
        "--hdet_seed",
        "3",
    )
    c = args.hdet_config
    assert (c.lr_spread, c.sync_interval, c.gradient_sync, c.auto_lr) == (0.3, 7, "shared", True)
    assert (
        c.auto_lr_warmup_steps,
        c.controller_temperature,
        c.controller_lr,
        c.controller_momentum,
        c.seed,
    ) == (0.2, 0.5, 0.1, 0.8, 3)


def test_every_config_field_has_a_flag_with_the_same_help():
    parser = HfArgumentParser(HDETTrainingArguments)
    actions = {a.dest: a for a in parser._actions}
    import dataclasses

    for f in dataclasses.fields(HDETConfig):
        assert actions[f"hdet_{f.name}"].help == f.metadata["help"]
    assert parse().hdet is False


def test_local_mode_turns_off_per_step_collectives():
    args = parse("--hdet", "--hdet_gradient_sync", "local")
    assert args.ddp_broadcast_buffers is False and args.average_tokens_across_devices is False
    assert parse("--hdet").average_tokens_across_devices is True  # shared, the default: DDP as usual
    assert parse().average_tokens_across_devices is True  # --hdet off: untouched


def test_defaults_are_the_settings_the_quality_benchmark_chose():
    # BENCHMARKS.md "Defaults these measurements support"; change both together.
    c = parse("--hdet").hdet_config
    assert (c.gradient_sync, c.lr_spread, c.sync_interval) == ("shared", 0.25, 0.03)
    assert (c.controller_lr, c.controller_momentum, c.controller_signal) == (
        1.5,
        0.5,
        "train_and_averaged_probe",
    )
    assert c.controller_raise_gain == 2.0  # reading 15
    assert c.controller_two_replica_cut_gain == 0.5  # reading 35
    assert c.controller_time_scale == "vote"  # reading 38
    assert c.keep_fan_out_between_votes is True  # reading 39
    assert c.controller_signal_combination == "agree_mean"  # reading 18
    assert c.controller_floor_after_peak is True  # reading 21
    assert (c.controller_line_search_threshold, c.controller_line_search_max_raise) == (
        4.0,
        4.0,
    )  # readings 22, 25
    assert c.controller_line_search_breaks_ties  # reading 24
    assert c.controller_line_search_centre  # reading 31
    assert c.controller_noise_floor == "two_replicas" and c.controller_line_search_until_bend  # reading 32
    assert c.controller_abstain_within_noise == "raises"  # reading 33
    assert c.lr_fan_out_scale == 0.4  # reading 23
    assert (c.controller_update, c.controller_temperature_mode, c.sync_warmup_steps) == (
        "multiplicative",
        "adaptive",
        0.0,
    )


@pytest.mark.parametrize("spread", ["dropout", "label_smoothing", "attention_temperature"])
def test_hyperparameters_acting_through_the_gradient_need_local_mode(spread):
    with pytest.raises(ValueError, match=f"--hdet_{spread}_spread needs --hdet_gradient_sync local"):
        HDETConfig(**{f"{spread}_spread": 0.5})
    assert HDETConfig(gradient_sync="local", **{f"{spread}_spread": 0.5}).gradient_sync == "local"
    # The LR and weight decay act in each rank's optimizer step: fine in shared mode, even without an LR spread.
    assert HDETConfig(lr_spread=0.0, weight_decay_spread=0.5).gradient_sync == "shared"


BAD = [
    (["--hdet_lr_spread", "1.0"], r"--hdet_lr_spread must be in \[0, 1\), but got 1.0"),
    (["--hdet_lr_spread", "-0.1"], r"--hdet_lr_spread must be in \[0, 1\)"),
    (
        ["--hdet_sync_interval", "0"],
        r"--hdet_sync_interval must be a whole number of optimizer steps >= 1 or a fraction",
    ),
    (["--hdet_auto_lr", "--hdet_lr_spread", "0"], r"--hdet_auto_lr needs a spread"),
    (["--hdet_controller_temperature", "-1"], r"--hdet_controller_temperature must be a positive"),
    (["--hdet_controller_temperature", "0"], r"--hdet_controller_temperature must be a positive"),
    (["--hdet_controller_momentum", "1.0"], r"--hdet_controller_momentum must be in \[0, 1\)"),
    (["--hdet_controller_lr", "-0.5"], r"--hdet_controller_lr must be >= 0"),
    (["--hdet_controller_max_factor", "1.0"], r"--hdet_controller_max_factor must be a finite number > 1"),
    (["--hdet_controller_raise_gain", "0.5"], r"--hdet_controller_raise_gain must be a finite number >= 1"),
    (
        ["--hdet_controller_two_replica_cut_gain", "0"],
        r"--hdet_controller_two_replica_cut_gain must be a number in \(0, 1\]",
    ),
    (
        ["--hdet_controller_two_replica_cut_gain", "1.5"],
        r"--hdet_controller_two_replica_cut_gain must be a number in \(0, 1\]",
    ),
    (
        ["--hdet_controller_line_search_threshold", "nan"],
        r"--hdet_controller_line_search_threshold must be a finite",
    ),
    (
        ["--hdet_controller_line_search_max_raise", "0.5"],
        r"--hdet_controller_line_search_max_raise must be a finite number > 1",
    ),
    (["--hdet_lr_fan_out_scale", "0"], r"--hdet_lr_fan_out_scale must be in \(0, 1\], but got 0.0"),
    (["--hdet_lr_fan_out_scale", "1.5"], r"--hdet_lr_fan_out_scale must be in \(0, 1\]"),
    (["--hdet_averaged_probe_share", "0"], r"--hdet_averaged_probe_share must be in \(0, 1\], but got 0.0"),
    (["--hdet_averaged_probe_share", "1.5"], r"--hdet_averaged_probe_share must be in \(0, 1\]"),
    (["--hdet_averaged_probe_share", "nan"], r"--hdet_averaged_probe_share must be in \(0, 1\]"),
    (["--hdet_auto_lr_warmup_steps", "2.5"], r"--hdet_auto_lr_warmup_steps must be an integer"),
    (["--hdet_auto_lr_warmup_steps", "-1"], r"--hdet_auto_lr_warmup_steps must be an integer"),
    (["--hdet_bucket_size_mb", "0"], r"--hdet_bucket_size_mb must be > 0"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_flags_are_refused_with_the_flag_the_value_and_a_fix(flags, message):
    with pytest.raises(ValueError, match=message):
        parse("--hdet", *flags)


def test_bad_choice_is_refused():
    with pytest.raises(SystemExit):  # argparse refuses values outside `choices`
        parse("--hdet_gradient_sync", "sometimes")
    with pytest.raises(ValueError, match="--hdet_gradient_sync must be one of local, shared"):
        HDETConfig(gradient_sync="sometimes")


def test_fsdp_is_refused_with_hdet_naming_the_hsdp_route():
    with pytest.raises(ValueError, match="--hdet does not run with --fsdp.*--hdet_hsdp_shard_size N"):
        parse("--hdet", "--fsdp", "full_shard")
    with pytest.raises(ValueError, match="--hdet_hsdp_shard_size must be an integer >= 0, but got -2"):
        HDETConfig(hsdp_shard_size=-2)


def test_sync_interval_is_steps_or_a_fraction_of_the_run():
    default = HDETConfig()  # 3 % of the run, never below 10 steps nor above the run
    assert [default.resolve_sync_interval(n) for n in (4, 12, 300, 1000, 2000)] == [4, 10, 10, 30, 60]
    assert HDETConfig(sync_interval=0.25).resolve_sync_interval(200) == 50
    assert HDETConfig(sync_interval=7).resolve_sync_interval(2000) == 7
    resolved = default.for_run(2000)
    assert resolved.sync_interval == 60 and default.sync_interval == 0.03  # a copy; the original is kept
    # From the command line every value parses as a float; whole numbers become step counts.
    steps = parse("--hdet", "--hdet_sync_interval", "20").hdet_config.sync_interval
    assert steps == 20 and isinstance(steps, int)
    assert parse("--hdet", "--hdet_sync_interval", "0.05").hdet_config.sync_interval == 0.05
    for bad in (2.5, 0, -0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="whole number of optimizer steps >= 1 or a fraction of the run"):
            HDETConfig(sync_interval=bad)


def test_run_length_checks():
    with pytest.raises(ValueError, match="longer than the run"):
        HDETConfig(sync_interval=100).check_run_length(50)
    with pytest.raises(ValueError, match="ends at or after the last step"):
        HDETConfig(auto_lr=True, auto_lr_warmup_steps=60).check_run_length(50)
    HDETConfig(auto_lr=True, auto_lr_warmup_steps=0.1).check_run_length(50)
    assert HDETConfig(auto_lr_warmup_steps=0.1).resolve_warmup_steps(50) == 5
    assert HDETConfig(auto_lr_warmup_steps=7).resolve_warmup_steps(50) == 7


def test_a_controller_that_could_never_act_before_exploration_ends_is_refused():
    # Default explore_until 0.5 of 50 steps: exploration ends at step 25; converges every 10 steps.
    assert HDETConfig().resolve_explore_until(50) == 25
    with pytest.raises(
        ValueError,
        match=r"--hdet_auto_lr_warmup_steps 0.6 \(step 30\), --hdet_explore_until 0.5 "
        r"\(step 25 of 50\).*no converge falls between.*controller would never run",
    ):
        HDETConfig(auto_lr=True, auto_lr_warmup_steps=0.6).check_run_length(50)
    with pytest.raises(
        ValueError, match=r"no converge falls between"
    ):  # converge at 30, exploration ends at 25
        HDETConfig(auto_lr=True, auto_lr_warmup_steps=21, explore_until=25).check_run_length(50)
    HDETConfig(auto_lr=True, auto_lr_warmup_steps=20).check_run_length(50)  # acts at the converge of step 20
    HDETConfig(auto_lr=True, auto_lr_warmup_steps=0.6, explore_until=1).check_run_length(50)
    HDETConfig(auto_lr_warmup_steps=0.6).check_run_length(50)  # no controller: nothing to refuse


def test_pointless_settings_warn_but_run():
    with pytest.warns(UserWarning, match="averages parameters after every step"):
        HDETConfig(sync_interval=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HDETConfig(sync_interval=2)


def test_votes_over_the_default_interval_while_converging_every_t():
    """--hdet_controller_time_scale vote: with T shorter than the default interval (0.03 of the run, at least 10
    steps) the controller votes every k-th converge, k the default interval in T's (rounded); lambda and beta act per
    vote as at the default interval, while the horizon's offsets widen by T's own share (`converge_share`)."""
    vote = HDETConfig(sync_interval=10, controller_time_scale="vote")
    assert vote.converges_per_vote(2000) == 6 and vote.controller_interval_share(2000) == 1.0
    assert vote.converge_share(2000) == pytest.approx(1 / 6)
    assert HDETConfig(sync_interval=7, controller_time_scale="vote").converges_per_vote(2000) == 9  # 60 / 7
    t25 = HDETConfig(sync_interval=25, controller_time_scale="vote")  # 2 x 25 = 50 of 60: lambda x 5/6
    assert t25.converges_per_vote(2000) == 2 and t25.controller_interval_share(2000) == pytest.approx(50 / 60)
    for scale in ("run", "converge"):  # a vote at every converge
        assert HDETConfig(sync_interval=10, controller_time_scale=scale).converges_per_vote(2000) == 1
    assert HDETConfig(sync_interval=10, controller_time_scale="converge").converge_share(2000) == 1.0
    assert HDETConfig(sync_interval=10, controller_time_scale="run").converge_share(2000) == pytest.approx(1 / 6)
    assert vote.converges_per_vote(300) == 1  # T 10 is the default there
    assert HDETConfig(sync_interval=120, controller_time_scale="vote").converges_per_vote(2000) == 1  # longer
    # Fewer converges per vote where k of them would leave no vote between the controller's warm-up and the end of
    # exploration: it must get to vote (a 12-step run with T 3 and exploration to step 6: one converge per vote).
    capped = HDETConfig(sync_interval=10, controller_time_scale="vote", auto_lr_warmup_steps=20, explore_until=50)
    assert capped.converges_per_vote(2000) == 5  # votes at 50
    short = HDETConfig(sync_interval=3, controller_time_scale="vote", auto_lr=True, auto_lr_warmup_steps=1)
    assert short.converges_per_vote(12) == 2  # votes at 6 (exploration ends at step 6)
    assert replace(short, auto_lr_warmup_steps=4, sync_interval=4).converges_per_vote(12) == 1  # the vote at 4
    with pytest.raises(ValueError, match=r"--hdet_controller_time_scale must be one of"):
        HDETConfig(controller_time_scale="votes")
