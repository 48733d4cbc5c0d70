"""The probe-based controller signals through the Accelerate API and the drop-in scheduler (one process)."""

import warnings

import pytest
import torch
from accelerate import Accelerator

from hdet_hf import HDETAccelerate, HDETConfig, OneCycleAutoLR


def test_accelerate_api_refuses_a_probe_signal_without_a_probe_before_preparing():
    accelerator = Accelerator(cpu=True)
    config = HDETConfig(auto_lr=True, controller_signal="train_and_averaged_probe", sync_interval=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdet = HDETAccelerate(accelerator, config, total_steps=8)
    model = torch.nn.Linear(4, 1)
    with pytest.raises(ValueError, match=r"pass probe_fn=.*controller_signal='train_loss'"):
        hdet.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert hdet.engine is None  # refused before anything was prepared


def test_drop_in_scheduler_scores_a_probe_at_each_controller_converge():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    probe_x = torch.randn(6, 4)
    calls = []

    def probe() -> float:
        calls.append(model.weight.detach().clone())
        return float(model(probe_x).pow(2).mean())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = OneCycleAutoLR(
            opt, max_lr=0.1, total_steps=12, ensemble_lr_spread_ratio=0.25, model_sync_interval=3,
            enable_auto_lr=True, auto_lr_warmup_steps=3, model=model, probe_fn=probe, explore_until=1.0,
            controller_time_scale="run",  # a vote at every converge (T 3 is shorter than the default interval)
        )  # fmt: skip
    assert sched.hdet_config.controller_signal == "train_and_averaged_probe"
    assert sched.hdet_config.explore_until == 1.0
    for _ in range(12):
        loss = (model(torch.randn(8, 4)) - 1).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step(loss)
    # Regular converges at 3, 6, 9, 12; the controller acts from step 3 on: one probe each.
    assert len(calls) == 4
    plain = OneCycleAutoLR(torch.optim.SGD(model.parameters(), lr=0.1), max_lr=0.1, total_steps=12)
    assert plain.hdet_config.controller_signal == "train_loss"
    assert plain.hdet_config.explore_until == HDETConfig().explore_until


def test_a_forced_converge_right_after_another_is_skipped():
    accelerator = Accelerator(cpu=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdet = HDETAccelerate(accelerator, HDETConfig(sync_interval=4), total_steps=8)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, _ = hdet.prepare(model, opt)
    for _ in range(2):
        loss = model(torch.randn(3, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        hdet.step(loss)
        opt.zero_grad()
    assert hdet.converge() is not None  # two steps since the last converge: the replicas may differ
    assert hdet.converge() is None  # nothing happened since: identical replicas, no all-reduce
    assert [t["step"] for t in hdet.engine.trajectory] == []  # forced converges do not touch the schedule


def test_accelerate_api_refuses_a_cooldown_signal_before_preparing():
    accelerator = Accelerator(cpu=True)
    config = HDETConfig(auto_lr=True, controller_signal="cooldown_probe", sync_interval=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdet = HDETAccelerate(accelerator, config, total_steps=8)
    model = torch.nn.Linear(4, 1)
    with pytest.raises(ValueError, match=r"cooldown_probe is HDETTrainer-only"):
        hdet.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), probe_fn=lambda: 0.0)
    assert hdet.engine is None  # refused before anything was prepared


def test_accelerate_api_refuses_the_start_race_before_preparing():
    accelerator = Accelerator(cpu=True)
    config = HDETConfig(auto_lr=True, start_race_steps=10, sync_interval=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdet = HDETAccelerate(accelerator, config, total_steps=8)
    model = torch.nn.Linear(4, 1)
    with pytest.raises(ValueError, match=r"start_race_steps=\.\.\.\) is for HDETTrainer.*call hdet.start_race"):
        hdet.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), probe_fn=lambda: 0.0)
    assert hdet.engine is None  # refused before anything was prepared
    # Asking for the race's lowering is refused alike (unset, the default, races and lowers only in HDETTrainer; a
    # custom loop calls hdet.start_race, which lowers by default).
    config = HDETConfig(auto_lr=True, start_race_lowers=True, sync_interval=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdet = HDETAccelerate(accelerator, config, total_steps=8)
    with pytest.raises(ValueError, match=r"start_race_lowers=True\) is for HDETTrainer's race"):
        hdet.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), probe_fn=lambda: 0.0)
    assert hdet.engine is None


def test_drop_in_scheduler_takes_the_sync_interval_as_a_fraction_of_the_run():
    model = torch.nn.Linear(4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one process: "nothing to spread"
        sched = OneCycleAutoLR(
            torch.optim.SGD(model.parameters(), lr=0.1), max_lr=0.1, total_steps=1000,
            ensemble_lr_spread_ratio=0.25, model_sync_interval=0.03,
        )  # fmt: skip
    assert sched.hdet_config.sync_interval == 0.03 and sched.engine.config.sync_interval == 30
    with pytest.raises(
        ValueError, match="model_sync_interval must be a positive integer number of steps or a fraction"
    ):
        OneCycleAutoLR(
            torch.optim.SGD(model.parameters(), lr=0.1), max_lr=0.1, total_steps=10, model_sync_interval=1.5
        )


def test_the_readmes_drop_in_call_runs_the_measured_default():
    """README.md's recommended `OneCycleAutoLR` keywords give exactly `HDETConfig`'s defaults with auto-LR (the
    setting BENCHMARKS.md measures), so a user of the drop-in runs what the tables report."""
    import dataclasses
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    call = re.search(r"scheduler = OneCycleAutoLR\(\n(.*?)\n\)", readme, re.S).group(1)
    kwargs = dict(re.findall(r"(\w+)=([^,\n]+)", call))
    assert "probe_fn" in kwargs and "comparison_horizon" in kwargs
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    values = {
        k: eval(v, {"model": model, "probe": lambda: 1.0}) for k, v in kwargs.items() if k not in ("max_lr",)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one process: nothing to spread
        sched = OneCycleAutoLR(opt, max_lr=3e-4, **values)
    default = HDETConfig(auto_lr=True)
    differ = {
        f.name: (getattr(sched.hdet_config, f.name), getattr(default, f.name))
        for f in dataclasses.fields(HDETConfig)
        if getattr(sched.hdet_config, f.name) != getattr(default, f.name)
    }
    # comparison_horizon=None is "10 % in shared mode with auto-LR", which the drop-in cannot detect.
    assert differ == {"comparison_horizon": (0.1, None)}
    assert default.resolve_comparison_horizon(10_000) == sched.hdet_config.resolve_comparison_horizon(10_000)
