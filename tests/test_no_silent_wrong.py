"""No silent wrong training (issue 11): what used to crash late, mix settings or corrupt state is now a clear
error before anything is written, or correct training.

Single-process tests live here; the multi-process ones are `test_reliability.py`'s
``test_a_rank_killed_while_saving_...`` and ``tests/test_no_silent_wrong_distributed.py`` (marked slow).
"""

from __future__ import annotations

import json
import math
import warnings
import weakref
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from hdet_hf import HDETConfig
from hdet_hf.collectives import fused_average_
from hdet_hf.engine import HDETDivergenceError, HDETEngine
from hdet_hf.hyperparameters import Hyperparameter
from hdet_hf.schedule_metadata import HDETSchedule, ReplayLR
from hdet_hf.testing.error_cases import train

FIXTURES = Path(__file__).parent / "fixtures"

# ================================================================================== item 11: converge memory


class PeakBytes(TorchDispatchMode):
    """Peak bytes of tensor storage allocated by torch ops inside the block (works on CPU).

    Every op output whose storage was not seen before counts as allocated until its storage is freed
    (storage objects keep their Python wrapper while alive, so a weakref finaliser sees the free).
    """

    def __init__(self, existing: list[torch.Tensor]) -> None:
        super().__init__()
        self.seen = {t.untyped_storage().data_ptr() for t in existing}
        self.live = 0
        self.peak = 0

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self.seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if nbytes == 0 or key in self.seen:
                    continue
                self.seen.add(key)
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._free, key, nbytes)
        return out


def test_a_bf16_converge_costs_twice_the_bucket_not_four_times():
    tensors = [torch.randn(64, 128).to(torch.bfloat16) for _ in range(8)]
    expected = [t.float().clone() for t in tensors]  # one process: the average is the tensor itself
    bucket_bytes = sum(t.numel() * t.element_size() for t in tensors)
    stats = torch.zeros(3, dtype=torch.float64)
    mode = PeakBytes(tensors + [stats])
    with mode:
        fused_average_(tensors, stats, 0, 1)
    # The float32 flat buffer is 2x the bf16 bytes; the statistics block adds a few bytes. The old code also
    # held a float32 copy of every tensor while concatenating them: 4x.
    assert mode.peak <= 2 * bucket_bytes + 1024, f"peak {mode.peak} bytes for a {bucket_bytes}-byte bucket"
    assert mode.peak >= 2 * bucket_bytes  # the measurement sees the flat buffer itself
    for t, e in zip(tensors, expected):
        assert torch.equal(t.float(), e)


# ================================================================================== item 10: schedule files


def _schedule_file(tmp_path, **changes):
    data = HDETSchedule(world_size=2, total_steps=2, sync_interval=1, lr_per_step=[[1e-3], [5e-4]]).to_dict()
    data.update(changes)
    path = tmp_path / "hdet_schedule.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "changes,match",
    [
        (
            {"lr_per_step": [[1e-3], [float("nan")]]},
            r"lr_per_step\[1\]\[0\].*finite number in \[0, 1000\], but got nan",
        ),
        ({"lr_per_step": [[-1e-3], [5e-4]]}, r"lr_per_step\[0\]\[0\].*but got -0.001"),
        ({"lr_per_step": [[1e-3], [1e30]]}, r"lr_per_step\[1\]\[0\].*but got 1e\+30"),
        ({"lr_per_step": [[1e-3], [None]]}, r"lr_per_step\[1\]\[0\].*but got None"),
        ({"lr_per_step": [[1e-3], ["0.1"]]}, r"lr_per_step\[1\]\[0\].*but got '0.1'"),
        ({"lr_per_step": 5}, r"field 'lr_per_step' must be a list of rows"),
        ({"world_size": 0}, r"field 'world_size' must be an integer >= 1, but got 0"),
        ({"sync_interval": "2"}, r"field 'sync_interval' must be an integer >= 1, but got '2'"),
        ({"param_group_names": 3}, r"field 'param_group_names' must be a list of strings"),
        ({"trajectory": [1, 2]}, r"field 'trajectory' must be a list of objects"),
        ({"trajectory": [{"step": "x"}]}, r"field 'trajectory\[0\].step' must be an integer"),
        ({"config": []}, r"field 'config' must be an object"),
        (
            {"values_per_step": {"dropout": "high"}},
            r"field 'values_per_step.dropout' must be a list of numbers",
        ),
    ],
)
def test_a_malformed_schedule_file_is_refused_with_the_field(tmp_path, changes, match):
    path = _schedule_file(tmp_path, **changes)
    with pytest.raises(ValueError, match=match) as info:
        HDETSchedule.from_pretrained(tmp_path)
    assert str(path) in str(info.value)


def test_a_deeply_nested_schedule_file_is_refused(tmp_path):
    (tmp_path / "hdet_schedule.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"nested too deeply|not valid JSON"):
        HDETSchedule.from_pretrained(tmp_path)
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    data = HDETSchedule(lr_per_step=[[0.1]]).to_dict()
    data["config"] = {"x": nested}
    with pytest.raises(ValueError, match=r"nested too deeply"):
        HDETSchedule.from_dict(data)


def test_replay_refuses_a_non_finite_table():
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"lr_per_step\[0\]\[0\].*but got inf"):
        ReplayLR(optimizer, [[float("inf")]])
    with pytest.raises(ValueError, match=r"rows of numbers"):
        ReplayLR(optimizer, [[None]])


# ================================================================================== item 2: crash-safe checkpoints


class Killed(BaseException):
    """Stands in for SIGKILL inside one process: nothing after it runs, no except clause catches it."""


def test_a_save_that_dies_midway_leaves_the_previous_checkpoint_usable(tmp_path, monkeypatch):
    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        name = str(getattr(f, "name", f))
        if "checkpoint-4" in name and "hdet_optimizer_rank0" in name:
            if hasattr(f, "write"):
                f.write(b"PK\x03\x04 half a file")
            raise Killed
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(Killed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(tmp_path, "--hdet_sync_interval", "2", "--save_total_limit", "1", refuse=False)
    monkeypatch.setattr(torch, "save", real_save)
    out = tmp_path / "out"
    # --save_total_limit 1 would have removed checkpoint-2 had the Trainer saved (and rotated) first.
    assert (out / "checkpoint-2" / "hdet_optimizer_rank0.pt").is_file()
    assert not (out / "checkpoint-4" / "hdet_optimizer_rank0.pt").exists()  # no half-written file
    assert not list((out / "checkpoint-4").glob(".*.tmp"))
    # The newest (partial) checkpoint is refused with the missing files and the one to use instead.
    with pytest.raises(FileNotFoundError) as info:
        train(tmp_path, "--hdet_sync_interval", "2", resume="out/checkpoint-4")
    message = str(info.value)
    assert "checkpoint-4 is incomplete: hdet_optimizer_rank0.pt, trainer_state.json missing" in message
    assert f"Resume from {out / 'checkpoint-2'}" in message and "not written by an HDET run" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = train(tmp_path, "--hdet_sync_interval", "2", resume="out/checkpoint-2", refuse=False)
    assert resumed.state.global_step == 4


# ================================================================================== items 5 and 7: loaded state


def _engine(**config) -> HDETEngine:
    model = torch.nn.Linear(2, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HDETEngine(
            HDETConfig(**{"sync_interval": 2, **config}), model, torch.optim.SGD(model.parameters(), lr=0.1), 4
        )


def test_a_version_1_state_file_still_loads_through_the_migration():
    state = torch.load(FIXTURES / "hdet_state_v1.pt", weights_only=True)
    assert state["version"] == 1 and "loss_weight" not in state and "config" not in state
    engine = _engine()
    engine.load_state_dict(state)
    assert engine.step == 1 and engine.steps_in_interval == 1
    # Version 1 summed one unweighted mean per step: the window's mean (2.5) is kept.
    assert engine.window.mean_loss() == 2.5
    report = engine.end_step()  # step 2 closes the interval with the migrated window
    assert report is not None and report.losses == [2.5]


def test_a_version_1_run_explored_to_the_end_so_its_resume_must_too():
    state = torch.load(FIXTURES / "hdet_state_v1.pt", weights_only=True)
    config = HDETConfig(sync_interval=2).to_dict()
    del config["explore_until"]  # version 1 had no such setting: it explored to the last step
    state = {**state, "config": config}
    with pytest.raises(
        ValueError, match=r"saved with --hdet_explore_until 1.0, but this run has --hdet_explore_until 0.5"
    ):
        _engine().load_state_dict(state)
    engine = _engine(explore_until=1.0)
    engine.load_state_dict(state)
    assert engine.step == 1


def test_a_checkpoint_from_before_the_raise_gain_resumes_only_with_gain_1():
    """Checkpoints written before --hdet_controller_raise_gain moved the LR up and down alike (gain 1): resuming
    one under the default 2 would change the controller mid-run, so it is refused by name."""
    state = _engine(auto_lr=True).state_dict()
    del state["config"]["controller_raise_gain"]
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_raise_gain 1.0, but this run has --hdet_controller_raise_gain 2.0",
    ):
        _engine(auto_lr=True).load_state_dict(state)
    _engine(auto_lr=True, controller_raise_gain=1.0).load_state_dict(state)


def test_a_checkpoint_from_before_the_signal_combination_resumes_only_with_mean():
    """Checkpoints written before --hdet_controller_signal_combination moved by the mean of the two signals'
    votes: resuming one under the default agree_mean would change the controller mid-run, so it is refused by
    name, and accepted with the setting it ran with."""
    state = _engine(auto_lr=True).state_dict()
    del state["config"]["controller_signal_combination"]
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_signal_combination mean, but this run has "
        r"--hdet_controller_signal_combination agree_mean",
    ):
        _engine(auto_lr=True).load_state_dict(state)
    _engine(auto_lr=True, controller_signal_combination="mean").load_state_dict(state)


def test_a_checkpoint_from_before_the_line_search_resumes_only_with_it_off():
    """Checkpoints written before --hdet_controller_line_search_threshold had no line-search raises: resuming one
    under the default 4 would change the controller mid-run, so it is refused by name, and accepted with 0."""
    state = _engine(auto_lr=True).state_dict()
    del (
        state["config"]["controller_line_search_threshold"],
        state["config"]["controller_line_search_max_raise"],
    )
    del state["line_search"]
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_line_search_threshold 0.0, but this run has "
        r"--hdet_controller_line_search_threshold 4.0",
    ):
        _engine(auto_lr=True).load_state_dict(state)
    engine = _engine(auto_lr=True, controller_line_search_threshold=0.0)
    engine.load_state_dict(state)
    assert engine.line_search.last_optimum is None


def test_the_line_search_bound_cannot_change_on_resume():
    """--hdet_controller_line_search_max_raise sizes the raises already taken: a checkpoint written under session
    17-19's default of 2 is refused by name under the default 4 and resumes with 2; ignored with the line search
    off."""
    state = _engine(auto_lr=True, controller_line_search_max_raise=2.0).state_dict()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_line_search_max_raise 2.0, but this run has "
        r"--hdet_controller_line_search_max_raise 4.0",
    ):
        _engine(auto_lr=True).load_state_dict(state)
    _engine(auto_lr=True, controller_line_search_max_raise=2.0).load_state_dict(state)
    off = {"auto_lr": True, "controller_line_search_threshold": 0.0}
    _engine(**off).load_state_dict(_engine(**off, controller_line_search_max_raise=2.0).state_dict())


def test_a_tie_break_cannot_change_on_resume():
    """--hdet_controller_line_search_breaks_ties decides which converges raised: a resume with the other value is
    refused by name; a checkpoint from before the setting ran without it; ignored with the line search off."""
    state = _engine(auto_lr=True, controller_line_search_breaks_ties=True).state_dict()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_line_search_breaks_ties True, but this run has "
        r"--hdet_controller_line_search_breaks_ties False",
    ):
        _engine(auto_lr=True, controller_line_search_breaks_ties=False).load_state_dict(state)
    del state["config"]["controller_line_search_breaks_ties"]  # written before the setting existed
    with pytest.raises(ValueError, match=r"saved with --hdet_controller_line_search_breaks_ties False"):
        _engine(auto_lr=True, controller_line_search_breaks_ties=True).load_state_dict(state)
    _engine(auto_lr=True, controller_line_search_breaks_ties=False).load_state_dict(state)
    off = {"auto_lr": True, "controller_line_search_threshold": 0.0}
    _engine(**off, controller_line_search_breaks_ties=True).load_state_dict(
        _engine(**off, controller_line_search_breaks_ties=False).state_dict()
    )


def test_a_fan_out_scale_cannot_change_on_resume():
    """--hdet_lr_fan_out_scale decides the LRs that ran: a resume with another value is refused by name. A
    checkpoint from before it existed stepped at the full spread, so it resumes only with 1."""
    state = _engine(auto_lr=True, lr_fan_out_scale=0.4).state_dict()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_lr_fan_out_scale 0.4, but this run has --hdet_lr_fan_out_scale 1.0",
    ):
        _engine(auto_lr=True, lr_fan_out_scale=1.0).load_state_dict(state)
    _engine(auto_lr=True, lr_fan_out_scale=0.4).load_state_dict(state)
    del state["config"]["lr_fan_out_scale"]  # written before the setting existed
    with pytest.raises(ValueError, match=r"saved with --hdet_lr_fan_out_scale 1.0, but this run has"):
        _engine(auto_lr=True, lr_fan_out_scale=0.4).load_state_dict(state)
    _engine(auto_lr=True, lr_fan_out_scale=1.0).load_state_dict(state)
    # Without a comparison horizon there are no step-size intervals to narrow: the setting is ignored.
    _engine(auto_lr=True, comparison_horizon=0.0, lr_fan_out_scale=1.0).load_state_dict(
        _engine(auto_lr=True, comparison_horizon=0.0, lr_fan_out_scale=0.4).state_dict()
    )


def test_a_hyperparameter_added_on_resume_is_refused_by_name():
    saved = _engine().state_dict()
    engine = _engine()
    engine.add_hyperparameter(Hyperparameter("router_aux_loss", spread=0.5, base=0.01, setter=lambda v: None))
    with pytest.raises(
        ValueError, match=r"explores \['lr'\], but this run explores.*new: \['router_aux_loss'\]"
    ):
        engine.load_state_dict(saved)


def test_settings_that_only_change_memory_may_change_on_resume():
    saved = _engine(bucket_size_mb=256.0).state_dict()
    _engine(bucket_size_mb=1.0).load_state_dict(saved)  # no error
    with pytest.raises(ValueError, match=r"--hdet_seed 0, but this run has --hdet_seed 3"):
        _engine(seed=3).load_state_dict(saved)


@pytest.mark.parametrize(
    "changes,match",
    [
        ({"world_size": 0}, r"field 'world_size' must be an integer >= 1, but got 0"),
        ({"controllers": {"lr": {"scale": -1.0, "velocity": 0.0}}}, r"controllers\['lr'\].scale.*got -1.0"),
        (
            {"controllers": {"lr": {"scale": math.inf, "velocity": 0.0}}},
            r"controllers\['lr'\].scale.*got inf",
        ),
        (
            {"lr_per_step": [[float("nan")]]},
            r"field 'lr_per_step\[0\]' must be a list of finite learning rates",
        ),
        ({"steps_since_sync": 7}, r"field 'steps_since_sync' must be an integer in \[0, step=2\]"),
        ({"generator_state": [1, 2]}, r"field 'generator_state' must be a uint8 tensor"),
        ({"step": -1}, r"field 'step' must be an integer >= 0"),
        (
            {"outer_anchors": [torch.zeros(3)]},
            r"field 'outer_anchors' does not match this model's 2 trainable",
        ),
        ({"peak_floor": {"peak": 1e-3, "floors": {"lr": 0.0}}}, r"field 'peak_floor' must be None or a dict"),
        ({"peak_floor": {"peak": math.nan, "floors": {}}}, r"field 'peak_floor' must be None or a dict"),
        ({"line_search": {"last_optimum": -1.0}}, r"field 'line_search' must be None or a dict"),
        ({"line_search": {"last_optimum": math.nan}}, r"field 'line_search' must be None or a dict"),
        ({"line_search": [4.0]}, r"field 'line_search' must be None or a dict"),
        ({"horizon_updates": -1}, r"field 'horizon_updates' must be None or an integer >= 0"),
        ({"horizon_updates": True}, r"field 'horizon_updates' must be None or an integer >= 0"),
        ({"loss_mark": [1.0]}, r"field 'loss_mark' must be a list of 2 finite numbers"),
        ({"fan_out_kept": 1}, r"field 'fan_out_kept' must be a bool"),
        ({"horizon_offsets_in_place": "yes"}, r"field 'horizon_offsets_in_place' must be a bool"),
        ({"steps_since_converge": -1}, r"field 'steps_since_converge' must be an integer >= 0"),
        ({"loss_mark": [math.nan, 2.0]}, r"field 'loss_mark' must be a list of 2 finite numbers"),
    ],
)
def test_edited_state_values_are_refused_with_the_field(changes, match):
    engine = _engine()
    engine.apply_lr([0.1])
    for _ in range(2):
        engine.add_loss(1.0)
        engine.end_step()
    state = {**engine.state_dict(), **changes}
    with pytest.raises(ValueError, match=match):
        _engine().load_state_dict(state, source="ck/hdet_state_rank0.pt")


# ================================================================================== item 8: averaged optimizer state


def test_a_non_finite_averaged_optimizer_state_makes_the_rank_unhealthy():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = HDETEngine(HDETConfig(sync_interval=1, average_optimizer_state=True), model, optimizer, 4)
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    optimizer.state[model.weight]["exp_avg_sq"][0, 0] = math.inf  # parameters and loss stay finite
    engine.add_loss(1.0)
    assert torch.isfinite(model.weight).all()
    # One process: the only replica is unhealthy, so there is nothing to average (on N ranks the others' average
    # replaces it: tests/test_no_silent_wrong_distributed.py).
    with pytest.raises(HDETDivergenceError):
        engine.end_step()


# ================================================================================== item 9: the probe batch


def test_the_probe_batch_comes_from_the_train_set_when_the_eval_set_is_empty(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = train(
            tmp_path,
            "--hdet_sync_interval",
            "2",
            "--hdet_auto_lr",
            "--hdet_controller_signal",
            "probe",
            "--save_strategy",
            "no",
            eval_dataset="empty",
            refuse=False,
        )
    assert trainer.state.global_step == 4 and trainer.hdet_engine.probe_fn is not None


def test_a_checkpoint_saved_with_a_removed_setting_is_refused_by_name():
    """Settings measured, not adopted and removed (`REMOVED_SETTINGS`): a checkpoint that ran one of them cannot
    be continued without it, so the resume is refused naming it; one saved with the neutral value resumes."""
    from hdet_hf.engine_state import REMOVED_SETTINGS

    assert REMOVED_SETTINGS["controller_wide_probe_threshold"] == 0.0
    for name, value in [
        ("controller_wide_probe_threshold", 16.0),
        ("fan_out_until_direction", True),
        ("controller_line_search_in_warmup", True),
        ("early_comparison_abstained", "frees"),
    ]:
        state = _engine(auto_lr=True).state_dict()
        state["config"][name] = value
        with pytest.raises(
            ValueError, match=rf"saved with --hdet_{name} {value}: a setting this version .* no longer"
        ):
            _engine(auto_lr=True).load_state_dict(state)
        state["config"][name] = REMOVED_SETTINGS[name]
        _engine(auto_lr=True).load_state_dict(state)
    # A session-22 checkpoint with the reading off also carries its (empty) state: ignored.
    state = _engine(auto_lr=True).state_dict()
    state.update(wide_probe={"finished": False, "readings": []}, wide_anchors=None)
    state["config"]["controller_wide_probe_threshold"] = 0.0
    # A session-29 checkpoint with the early pair's abstentions recorded ('bounds', today's behaviour): ignored.
    state.update(paired_votes_abstained={"one_interval": True, "horizon": False})
    state["config"]["early_comparison_abstained"] = "bounds"
    _engine(auto_lr=True).load_state_dict(state)


def test_the_controller_time_scale_cannot_change_on_resume_where_it_changes_the_moves():
    """--hdet_controller_time_scale sizes every move taken so far when T is shorter than the default interval (here
    T 2 of a 4-step run, whose default is 4): another value is refused by name, and a checkpoint from before the
    setting moved lambda per converge, so it resumes only with 'converge'. Where T is the default's or longer both
    values move alike and the setting is ignored."""
    state = _engine(auto_lr=True, controller_time_scale="converge").state_dict()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_controller_time_scale converge, but this run has --hdet_controller_time_scale vote",
    ):
        _engine(auto_lr=True).load_state_dict(state)
    run = _engine(auto_lr=True, controller_time_scale="run").state_dict()  # session 32's default
    with pytest.raises(ValueError, match=r"saved with --hdet_controller_time_scale run, but this run has .* vote"):
        _engine(auto_lr=True).load_state_dict(run)
    del state["config"]["controller_time_scale"]  # written before the setting existed
    with pytest.raises(ValueError, match=r"saved with --hdet_controller_time_scale converge"):
        _engine(auto_lr=True).load_state_dict(state)
    _engine(auto_lr=True, controller_time_scale="converge").load_state_dict(state)
    at_default = {"auto_lr": True, "sync_interval": 4, "explore_until": 1.0}
    old = _engine(**at_default).state_dict()
    del old["config"]["controller_time_scale"]
    _engine(**at_default).load_state_dict(old)


def test_keeping_the_fan_out_between_votes_cannot_change_on_resume_where_there_are_converges_between():
    """--hdet_keep_fan_out_between_votes decides whether the replicas were averaged between votes so far: with T 2
    of a 100-step run (default interval 10, a vote every 5 converges) another value is refused by name, and a
    checkpoint from before the setting (session 33: it averaged) resumes only with it off. With a vote at every
    converge (T 2 of a 4-step run) there is nothing between votes and the setting is ignored."""

    def engine(**config) -> HDETEngine:
        model = torch.nn.Linear(2, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            settings = HDETConfig(sync_interval=2, auto_lr=True, **config)
            return HDETEngine(settings, model, torch.optim.SGD(model.parameters(), lr=0.1), 100)

    assert engine().vote_interval == 10
    state = engine(keep_fan_out_between_votes=False).state_dict()
    with pytest.raises(
        ValueError,
        match=r"saved with --hdet_keep_fan_out_between_votes False, but this run has --hdet_keep_fan_out_between_votes True",
    ):
        engine().load_state_dict(state)
    del state["config"]["keep_fan_out_between_votes"]  # session 33's checkpoint
    with pytest.raises(ValueError, match=r"saved with --hdet_keep_fan_out_between_votes False"):
        engine().load_state_dict(state)
    engine(keep_fan_out_between_votes=False).load_state_dict(state)
    every_converge = _engine(auto_lr=True).state_dict()
    del every_converge["config"]["keep_fan_out_between_votes"]
    _engine(auto_lr=True).load_state_dict(every_converge)
    _engine(auto_lr=True, keep_fan_out_between_votes=False).load_state_dict(every_converge)


def test_the_averaged_probe_share_cannot_change_on_resume_where_an_averaged_probe_scores():
    """--hdet_averaged_probe_share decides which steps the saved mean weights hold: with the default signal (the
    averaged probe) another value is refused by name, and a checkpoint from before the setting (the whole window)
    resumes only at 1. Without an averaged probe nothing is averaged and the setting is ignored."""
    state = _engine(auto_lr=True, averaged_probe_share=0.5).state_dict()
    with pytest.raises(
        ValueError, match=r"saved with --hdet_averaged_probe_share 0.5, but this run has --hdet_averaged_probe_share 1.0"
    ):
        _engine(auto_lr=True).load_state_dict(state)
    _engine(auto_lr=True, averaged_probe_share=0.5).load_state_dict(state)
    old = _engine(auto_lr=True).state_dict()
    del old["config"]["averaged_probe_share"]  # a checkpoint from before session 36
    _engine(auto_lr=True).load_state_dict(old)
    with pytest.raises(ValueError, match=r"saved with --hdet_averaged_probe_share 1.0"):
        _engine(auto_lr=True, averaged_probe_share=0.5).load_state_dict(old)
    unaveraged = _engine(auto_lr=True, controller_signal="train_loss", averaged_probe_share=0.5).state_dict()
    _engine(auto_lr=True, controller_signal="train_loss").load_state_dict(unaveraged)
