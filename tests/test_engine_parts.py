"""The engine's parts on one process: statistics layout, health check, kept converge buffer, typed errors,
forced converges, and the run record the engine fills."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf import engine as engine_module
from hdet_hf.collectives import NoContributorError, Workspace, fused_average_
from hdet_hf.converge_stats import StatsLayout
from hdet_hf.engine import HDETDivergenceError, HDETEngine
from hdet_hf.replica import ReplicaTensors
from hdet_hf.schedule_metadata import HDETSchedule


def _engine(**config) -> HDETEngine:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one process: "nothing to spread"
        engine = HDETEngine(
            HDETConfig(sync_interval=2, **config), model, torch.optim.SGD(model.parameters(), lr=0.1), 6
        )
    engine.apply_lr([0.1])
    return engine


def test_stats_layout_names_every_column():
    layout = StatsLayout(["lr", "dropout"])
    rows = [
        layout.row(
            loss=2.0 + r, signal=5.0 - r, healthy=r != 1, scored=r == 0, multipliers={"lr": r, "dropout": -r}
        )
        for r in range(3)
    ]
    table = layout.read(torch.stack(rows))
    assert table.losses.tolist() == [2.0, 3.0, 4.0]
    assert table.signals.tolist() == [5.0, 4.0, 3.0]
    assert table.healthy.tolist() == [True, False, True] and table.excluded_ranks() == [1]
    assert table.scored.tolist() == [True, False, False]
    assert table.multipliers == {"lr": [0.0, 1.0, 2.0], "dropout": [0.0, -1.0, -2.0]}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["parameter", "bf16 parameter", "optimizer state"])
def test_health_check_finds_any_non_finite_value(bad, where):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4).to(torch.bfloat16))
    optimizer = torch.optim.Adam(model.parameters())
    model[0](torch.randn(2, 4)).sum().backward()
    optimizer.step()
    replica = ReplicaTensors(model, optimizer, average_optimizer_state=True)
    assert replica.all_finite()
    target = {
        "parameter": model[0].weight.data,
        "bf16 parameter": model[1].weight.data,
        "optimizer state": optimizer.state[model[0].weight]["exp_avg"],
    }[where]
    target.view(-1)[3] = bad
    assert not replica.all_finite()


def test_health_check_accepts_huge_finite_float64_values_and_ignores_unaveraged_state():
    model = torch.nn.Linear(2, 2).double()
    optimizer = torch.optim.Adam(model.parameters())
    model.weight.data.fill_(1e300)  # finite in float64, infinite if the check narrowed it to float32
    optimizer.state[model.weight]["exp_avg"] = torch.full((2, 2), math.nan, dtype=torch.float64)
    assert ReplicaTensors(model, optimizer, average_optimizer_state=False).all_finite()
    assert not ReplicaTensors(model, optimizer, average_optimizer_state=True).all_finite()


def test_workspace_keeps_one_buffer_and_gives_the_same_average():
    tensors = [torch.arange(6.0).view(2, 3), torch.ones(4)]
    workspace = Workspace()
    stats, count = fused_average_(tensors, torch.tensor([2.5]), 0, 1, workspace=workspace)
    kept = workspace.buffer
    assert kept is not None and count == 1 and stats.tolist() == [[2.5]]
    fused_average_(tensors, torch.tensor([2.5]), 0, 1, workspace=workspace)
    assert workspace.buffer is kept  # reused, not reallocated
    assert tensors[0].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and tensors[1].tolist() == [1.0] * 4
    bigger = [torch.ones(100)]
    fused_average_(bigger, torch.tensor([1.0]), 0, 1, workspace=workspace)
    assert workspace.buffer is not kept and workspace.buffer.numel() >= 100


def test_no_contributor_is_a_typed_error():
    with pytest.raises(NoContributorError):
        fused_average_([torch.ones(3)], torch.zeros(1), 0, 1, contribute=False)


def test_every_replica_diverged_is_recognised_by_type_not_message(monkeypatch):
    engine = _engine()

    def nobody(*args, **kwargs):
        raise NoContributorError("worded differently")

    monkeypatch.setattr(engine_module, "fused_average_", nobody)
    engine.add_loss(1.0)
    engine.end_step()
    with pytest.raises(HDETDivergenceError, match="Every HDET replica diverged by step 2"):
        engine.end_step()


def test_a_forced_converge_is_skipped_when_nothing_moved():
    engine = _engine()
    assert engine.force_converge() is None  # before the first step: identical replicas
    engine.add_loss(1.0)
    engine.end_step()
    report = engine.force_converge()
    assert report is not None and not report.regular and report.step == 1
    assert engine.force_converge() is None  # right after a converge
    engine.add_loss(1.0)
    assert engine.end_step() is not None  # step 2: regular converge
    assert engine.force_converge() is None
    assert [t["step"] for t in engine.trajectory] == [2]  # forced converges are not recorded


def test_the_engine_fills_one_schedule_that_round_trips():
    engine = _engine()
    for step in range(1, 5):
        engine.add_loss(2.0 / step)
        engine.end_step()
        engine.apply_lr([0.1 / (step + 1)])
    schedule = engine.schedule()
    assert schedule.trajectory is engine.trajectory  # the record itself, no copy
    assert [row[0] for row in schedule.lr_per_step] == pytest.approx([0.1, 0.05, 0.1 / 3, 0.025])
    assert len(engine.lr_per_step) == 5  # the row for step 5 is set but not part of the record yet
    assert [t["step"] for t in schedule.trajectory] == [2, 4]
    assert schedule.summary == {} and schedule.to_dict()["summary"]["lr"]["final"] == pytest.approx(0.025)
    assert schedule.divergence_events == [] and schedule.to_dict()["divergence_events"] == []
    data = schedule.to_dict()
    assert HDETSchedule.from_dict(data).to_dict() == data


def test_a_fractional_sync_interval_converges_every_that_share_of_the_run():
    # Default 0.03: 3 % of 1,000 steps is T 30; the engine, its trajectory and its checkpoint see 30.
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one process: "nothing to spread"
        engine = HDETEngine(HDETConfig(), model, torch.optim.SGD(model.parameters(), lr=0.1), 1000)
    engine.apply_lr([0.1])
    assert engine.config.sync_interval == 30
    regular = []
    for _ in range(95):
        engine.add_loss(1.0)
        report = engine.end_step()
        if report is not None:
            regular.append(report.step)
    assert regular == [30, 60, 90]
    assert engine.state_dict()["config"]["sync_interval"] == 30
