"""Engine-level scenarios under torchrun. Usage: engine_worker.py SCENARIO DUMP_DIR."""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from dist_backend import device, init_process_group  # tests/workers/: gloo on CPU, or NCCL on CUDA
from torch import nn

from hdet_hf import HDETConfig, OneCycleAutoLR
from hdet_hf.engine import HDETEngine
from hdet_hf.hyperparameters import Hyperparameter
from hdet_hf.process import finish_distributed


def model_with_buffers() -> nn.Module:
    torch.manual_seed(dist.get_rank() + 10)  # deliberately different init per rank
    return nn.Sequential(nn.Linear(5, 7), nn.BatchNorm1d(7), nn.Linear(7, 3))


def scenario_average(rank: int, world: int) -> dict:
    """Each rank sets its parameters to its rank number; one converge must give sum(range(N))/N exactly.

    Runs on ``dist_backend.device()`` (CPU/gloo, or CUDA/NCCL); results come back on CPU."""
    dev = device()
    model = model_with_buffers().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = HDETEngine(HDETConfig(sync_interval=1, lr_spread=0.5), model, opt, total_steps=4)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float(rank))
    engine.add_loss(torch.tensor(10.0 + rank, device=dev))
    report = engine.end_step()
    rank_valued = [p.detach().clone().cpu() for p in model.parameters()]
    # Random values next: every rank must end bit-identical, and equal to the float64 mean within rounding.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(rank * 100 + p.numel())))
        model[1].running_mean.fill_(float(rank) + 0.25)
    before = [p.detach().clone().cpu() for p in model.parameters()]
    running_mean_before = model[1].running_mean.clone().cpu()
    engine.add_loss(torch.tensor(1.0, device=dev))
    engine.end_step()
    return {
        "device": str(dev),
        "rank_valued": rank_valued,
        "report": report.to_dict(),
        "before": before,
        "after": [p.detach().clone().cpu() for p in model.parameters()],
        "running_mean_before": running_mean_before,
        "running_mean_after": model[1].running_mean.clone().cpu(),
        "num_batches_tracked": int(model[1].num_batches_tracked),
    }


def scenario_controller(rank: int, world: int) -> dict:
    """Losses injected so that high-LR ranks do better ('up') or worse ('down'); record the base scale."""
    out = {"device": str(device())}
    for direction in ("up", "down"):
        for update in ("multiplicative", "additive"):
            model = nn.Linear(3, 1).to(device())
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            temperature, mode = (1.0, "adaptive") if update == "multiplicative" else (0.01, "fixed")
            config = HDETConfig(
                controller_time_scale="converge",  # T 2 of a short run: the formulas below are per converge
                sync_interval=2,
                lr_spread=0.5,
                auto_lr=True,
                auto_lr_warmup_steps=0,
                controller_signal="train_loss",  # the injected losses are the signal
                controller_update=update,
                controller_temperature=temperature,
                controller_temperature_mode=mode,
                controller_lr=1.0 if update == "multiplicative" else 0.5,
                explore_until=1.0,  # the controller acts at every converge of the run
            )
            engine = HDETEngine(config, model, opt, total_steps=20)
            scales = []
            engine.apply_lr([1e-3])
            for _ in range(20):
                m = engine.multiplier()
                loss = 1.0 - 0.1 * m if direction == "up" else 1.0 + 0.1 * m
                engine.add_loss(torch.tensor(loss, device=device()))
                report = engine.end_step()
                engine.apply_lr([1e-3])
                if report is not None and report.regular:
                    scales.append(report.scale["lr"])
            out[f"{direction}_{update}"] = {
                "scales": scales,
                "permutations": [t["multipliers"]["lr"] for t in engine.trajectory],
            }
    return out


def scenario_onecycle(rank: int, world: int) -> dict:
    """The drop-in scheduler under torchrun: spread applied from step 1, averaging every T steps."""
    torch.manual_seed(rank)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = OneCycleAutoLR(
        opt,
        max_lr=0.1,
        total_steps=12,
        ensemble_lr_spread_ratio=0.5,
        model_sync_interval=4,
        enable_auto_lr=True,
        auto_lr_warmup_steps=4,
        model=model,
    )
    lrs, params = [], []
    gen = torch.Generator().manual_seed(rank)
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        x = torch.randn(8, 4, generator=gen)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss)
        params.append(torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]))
    return {"lrs": lrs, "params": params, "trajectory": sched.trajectory, "state": sched.state_dict()}


def scenario_accelerate(rank: int, world: int, gradient_sync: str = "local") -> dict:
    """HDETAccelerate in a no_trainer loop with gradient accumulation 2."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + 0.1 * s))
    from hdet_hf import HDETAccelerate

    hdet = HDETAccelerate(
        accelerator,
        # Exploring to the end: the spread is present at every step the test checks.
        HDETConfig(sync_interval=3, lr_spread=0.5, gradient_sync=gradient_sync, explore_until=1.0),
        total_steps=6,
    )
    model, opt, sched = hdet.prepare(model, opt, sched)
    gen = torch.Generator().manual_seed(rank)
    lrs, multipliers, after_sync = [], [], {}
    for _ in range(12):  # 12 micro-batches = 6 optimizer steps
        with accelerator.accumulate(model):
            x = torch.randn(8, 4, generator=gen)
            loss = model(x).pow(2).mean()
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                lrs.append(opt.param_groups[0]["lr"])
                multipliers.append(hdet.engine.multiplier())
            opt.step()
            report = hdet.step(loss)
            opt.zero_grad()
            if report is not None:
                after_sync[report.step] = torch.cat(
                    [p.detach().reshape(-1).clone() for p in model.parameters()]
                )
    return {
        "lrs": lrs,
        "multipliers": multipliers,
        "after_sync": after_sync,
        "schedule": hdet.engine.lr_per_step,
        "is_ddp": isinstance(model, torch.nn.parallel.DistributedDataParallel),
        "steps": hdet.engine.step,
    }


def scenario_exploration(rank: int, world: int, signal: str, explore_until: str = "0.5") -> dict:
    """A linear model trained with SGD for 12 steps, T 3, explore_until 0.5 ("default": HDETConfig's default):
    records LRs, multipliers, what the probe saw (the replica's weights at probe time) and the weights it trained
    through."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    until = {} if explore_until == "default" else {"explore_until": float(explore_until)}
    config = HDETConfig(
        sync_interval=3, lr_spread=0.5, auto_lr=True, auto_lr_warmup_steps=1, **until,
        controller_signal=signal, controller_momentum=0.0,
        controller_time_scale="run",  # a vote at every converge (T 3 of 12 steps; votes every k-th: `scenario_votes`)
        # Only the replicas' own probes are recorded here; the line's centre is `scenario_centre_point`'s.
        controller_line_search_centre=False,
    )  # fmt: skip
    engine = HDETEngine(config, model, opt, total_steps=12)
    probe_x = torch.linspace(-1, 1, 8).reshape(2, 4)

    def probe() -> float:
        seen.append(torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]))
        return float(model(probe_x).pow(2).mean())

    engine.probe_fn = probe
    seen: list[torch.Tensor] = []
    iterates: list[torch.Tensor] = []
    lrs, multipliers, active = [], [], []
    g = torch.Generator().manual_seed(rank)
    engine.apply_lr([0.1])
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        multipliers.append(engine.multiplier())
        x = torch.randn(8, 4, generator=g)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        iterates.append(torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]))
        engine.add_loss(loss)
        report = engine.end_step()
        if report is not None:
            active.append((report.step, report.controller_active, dict(report.scale)))
        engine.apply_lr([0.1])
    return {
        "lrs": lrs,
        "multipliers": multipliers,
        "seen": seen,
        "iterates": iterates,
        "active": active,
        "final": torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]),
        "trajectory": engine.trajectory,
        "explore_until": config.explore_until,
    }


def scenario_fitness(rank: int, world: int) -> dict:
    """Fitness-weighted converges: each rank sets its parameters to its rank number and reports loss 1 + rank.
    The first converge has no reference (plain mean); later ones weight rank r by exp(-z_r)."""
    model = nn.Linear(3, 1).to(device())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    config = HDETConfig(
        sync_interval=1,
        controller_time_scale="run",  # a vote at every converge (votes every k-th: `scenario_votes`)
        lr_spread=0.5,
        auto_lr=True,
        auto_lr_warmup_steps=0,
        explore_until=1.0,
        controller_signal="train_loss",
        converge_weights="fitness",
        comparison_horizon=0,  # the weighted mean itself, without offsets after it
    )
    engine = HDETEngine(config, model, opt, total_steps=4)
    engine.apply_lr([1e-3])
    averages = []
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float(rank))
        engine.add_loss(torch.tensor(1.0 + rank, device=device()))
        engine.end_step()
        engine.apply_lr([1e-3])
        averages.append([p.detach().clone().cpu() for p in model.parameters()])
    return {"averages": averages, "reference": engine.state_dict()["fitness_reference"]}


def _horizon_run(rank: int, **config) -> tuple:
    """A linear model, SGD at 0.1, 8 steps, T 2, spread 0.5 (the full fan-out: step-size intervals at m_r),
    auto-LR from the start, H 4 steps, plus ``config``; returns the model, optimizer, engine (LR applied for
    step 1) and this rank's data generator."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    settings = HDETConfig(
        sync_interval=2, lr_spread=0.5, auto_lr=True, auto_lr_warmup_steps=0, explore_until=1.0,
        controller_signal="train_loss", comparison_horizon=4, controller_time_scale="converge",
        **{"lr_fan_out_scale": 1.0, **config},
    )  # fmt: skip
    engine = HDETEngine(settings, model, opt, total_steps=8)
    engine.apply_lr([0.1])
    return model, opt, engine, torch.Generator().manual_seed(rank)


def scenario_horizon(rank: int, world: int) -> dict:
    """--hdet_comparison_horizon: a linear model, SGD, T 2, H 4 steps from step 4 (the step-size fan-out
    before), 8 steps, forced converges at steps 4 and 5. Records, after every converge, this rank's
    parameters, the engine's anchor and direction, and its next multiplier; per step its LR, base LR and
    multiplier."""
    model, opt, engine, g = _horizon_run(rank, comparison_horizon_start=4, early_comparison="one_interval")
    records, lrs = [], []
    for step in range(1, 9):
        lrs.append((opt.param_groups[0]["lr"], engine.lrs.rows[-1][0], engine.multiplier()))
        x = torch.randn(8, 4, generator=g)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        engine.add_loss(loss)

        def record(report, step: int = step) -> None:
            if report is None:
                return
            h = engine.horizon
            records.append({
                "step": step,
                "regular": report.regular,
                "params": [p.detach().clone() for p in model.parameters()],
                "anchors": [t.clone() for t in h.anchors] if h.anchors is not None else None,
                "directions": [t.clone() for t in h.directions] if h.directions is not None else None,
                "next_multiplier": engine.multiplier(),
            })  # fmt: skip

        record(engine.end_step())
        if step in (4, 5):  # 4: right after a regular converge (offsets only); 5: mid-interval
            record(engine.force_converge())
        engine.apply_lr([0.1])
    return {"records": records, "decay": engine.horizon.decay, "lrs": lrs}


def scenario_horizon_paired(rank: int, world: int) -> dict:
    """early_comparison="lower_of_both" over the whole run (horizon start 8 of 8 steps), T 2: the intervals
    starting at steps 0 and 4 use the step-size fan-out, those at 2 and 6 the offsets. Records, after every
    regular converge, the parameters, anchor, direction, next multiplier, the hypergradient used and the
    paired votes; per step the LR, base LR and multiplier."""
    model, opt, engine, g = _horizon_run(rank, comparison_horizon_start=8)
    records, lrs = [], []
    for step in range(1, 9):
        lrs.append((opt.param_groups[0]["lr"], engine.lrs.rows[-1][0], engine.multiplier()))
        x = torch.randn(8, 4, generator=g)
        loss = (model(x) - x.sum(1, keepdim=True) * (1 + rank)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        engine.add_loss(loss)
        report = engine.end_step()
        if report is not None and report.regular:
            h = engine.horizon
            records.append({
                "step": step,
                "params": [p.detach().clone() for p in model.parameters()],
                "anchors": [t.clone() for t in h.anchors] if h.anchors is not None else None,
                "directions": [t.clone() for t in h.directions] if h.directions is not None else None,
                "next_multiplier": engine.multiplier(),
                "delta": report.delta["lr"],
                "votes": dict(engine.paired_votes.latest),
            })  # fmt: skip
        engine.apply_lr([0.1])
    return {"records": records, "decay": engine.horizon.decay, "lrs": lrs}


def scenario_peak_floor(rank: int, world: int) -> dict:
    """Losses always favour the low-LR rank under a schedule that rises for 8 steps, then falls; with and
    without --hdet_controller_floor_after_peak, with the floor resumed from a mid-decay checkpoint, and under a
    schedule that peaks at step 2, before the early phase ends (here at half the run)."""
    peak_at_8 = [1e-3 * min(step, 8) / 8 if step <= 8 else 1e-3 * (20 - step) / 12 for step in range(1, 21)]
    peak_at_2 = [1e-3 * min(step, 2) / 2 if step <= 2 else 1e-3 * (21 - step) / 19 for step in range(1, 21)]

    def run(floor: bool, schedule: list[float], resume_at: int | None = None, early_end: float = 0.3) -> dict:
        def engine_for() -> HDETEngine:
            model = nn.Linear(3, 1).to(device())
            config = HDETConfig(
                controller_time_scale="converge",  # T 2 of a short run: the formulas below are per converge
                sync_interval=2,
                lr_spread=0.5,
                auto_lr=True,
                auto_lr_warmup_steps=0,
                controller_signal="train_loss",
                controller_lr=1.0,
                explore_until=1.0,
                controller_floor_after_peak=floor,
                comparison_horizon_start=early_end,
                controller_two_replica_cut_gain=1.0,  # full cuts reach the 10x bound within the run
            )
            return HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=1e-3), total_steps=20)

        engine = engine_for()
        engine.apply_lr([schedule[0]])
        scales, steps = [], []
        for step in range(1, 21):
            engine.add_loss(torch.tensor(1.0 + 0.1 * engine.multiplier(), device=device()))
            report = engine.end_step()
            if step == resume_at:  # a fresh engine continues from this one's checkpoint
                saved = engine.state_dict()
                engine = engine_for()
                engine.load_state_dict(saved)
            if step < 20:
                engine.apply_lr([schedule[step]])
            if report is not None and report.regular:
                scales.append(report.scale["lr"])
                steps.append(step)
        return {"scales": scales, "steps": steps, "floors": dict(engine.peak_floor.floors)}

    return {
        "off": run(False, peak_at_8),
        "on": run(True, peak_at_8),
        "resumed": run(True, peak_at_8, resume_at=14),
        "early_off": run(False, peak_at_2, early_end=0.5),
        "early_on": run(True, peak_at_2, early_end=0.5),
    }


def scenario_line_search(rank: int, world: int) -> dict:
    """One weight climbs at a constant gradient, so replica r ends an interval at w + lr x m_r x T and the probe
    ``(w - target)**2`` is a parabola in the multiplier with its optimum at (target - w) / (lr x T). With
    --hdet_controller_line_search_threshold 4, off, for a near target (the optimum stays below 4), and
    resumed from a checkpoint between two converges. The ``ties_*`` runs score with the train loss too, which
    favours the smaller multipliers (``1 + 0.1 m``) while the probe favours the larger: the votes disagree at
    every converge (gated delta 0), with --hdet_controller_line_search_breaks_ties off and on, and on with
    --hdet_controller_line_search_max_raise 4 (the others pin 2)."""

    def run(
        threshold: float,
        target: float,
        resume_at: int | None = None,
        ties: bool | None = None,
        max_raise: float = 2.0,
    ) -> dict:
        disagree = ties is not None

        def engine_for() -> tuple[HDETEngine, nn.Linear]:
            model = nn.Linear(1, 1, bias=False).to(device())
            with torch.no_grad():
                model.weight.zero_()
            config = HDETConfig(
                controller_time_scale="converge",  # T 2 of a short run: the formulas below are per converge
                sync_interval=2,
                lr_spread=0.5,
                auto_lr=True,
                auto_lr_warmup_steps=0,
                controller_signal="probe",
                controller_lr=0.5,
                explore_until=1.0,
                controller_floor_after_peak=False,
                comparison_horizon=0.0,
                controller_line_search_threshold=threshold,
                controller_line_search_max_raise=max_raise,
            )
            if disagree:
                config = dataclasses.replace(
                    config, controller_signal="train_and_averaged_probe", controller_signal_combination="agree_mean",
                    controller_line_search_breaks_ties=ties,
                )  # fmt: skip
            engine = HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=1e-2), total_steps=24)
            engine.probe_fn = lambda: float((model.weight.detach().double() - target).pow(2).sum())
            return engine, model

        engine, model = engine_for()
        engine.apply_lr([1e-2])
        converges = []
        for step in range(1, 25):
            model.zero_grad()
            (-model.weight.sum()).backward()  # the gradient is -1 on every rank: the weight climbs
            engine.optimizer.step()
            engine.add_loss(
                torch.tensor(1.0 + (0.1 * engine.multiplier() if disagree else 0.0), device=device())
            )
            report = engine.end_step()
            if step == resume_at:
                saved, weight = engine.state_dict(), model.weight.detach().clone()
                engine, model = engine_for()
                with torch.no_grad():
                    model.weight.copy_(weight)
                engine.load_state_dict(saved)
            engine.apply_lr([1e-2])
            if report is not None and report.regular:
                converges.append(
                    {
                        "step": step,
                        "scale": report.scale["lr"],
                        "multipliers": report.multipliers["lr"],
                        "probe_losses": report.probe_losses,
                        "delta": report.delta.get("lr"),
                    }
                )
        return {"converges": converges, "last_optimum": engine.line_search.last_optimum}

    return {
        "off": run(0.0, target=2.0),
        "on": run(4.0, target=2.0),
        "resumed": run(4.0, target=2.0, resume_at=9),
        "near_off": run(0.0, target=0.05),
        "near_on": run(4.0, target=0.05),
        "ties_off": run(4.0, target=2.0, ties=False),
        "ties_on": run(4.0, target=2.0, ties=True),
        "ties_near_off": run(4.0, target=0.05, ties=False),
        "ties_near_on": run(4.0, target=0.05, ties=True),
        "ties_on_bound4": run(4.0, target=2.0, ties=True, max_raise=4.0),
    }


def scenario_fan_out(rank: int, world: int) -> dict:
    """--hdet_lr_fan_out_scale 0.4 with --hdet_lr_spread 0.5 (step-size intervals at spread 0.2): the whole run
    is the early phase (lower_of_both, T 2, H 2 steps), so step-size intervals (starting at steps 0, 4, 8, ...) alternate with offset ones. The
    weight climbs at a constant gradient and the probe is a parabola in the step taken (`scenario_line_search`).
    Records per step the LR, base LR and multiplier; per
    regular converge the report, the line search's optimum and the paired votes."""
    model = nn.Linear(1, 1, bias=False).to(device())
    with torch.no_grad():
        model.weight.zero_()
    config = HDETConfig(
        sync_interval=2, lr_spread=0.5, lr_fan_out_scale=0.4, auto_lr=True, auto_lr_warmup_steps=0,
        controller_time_scale="run",  # a vote at every converge (votes every k-th: `scenario_votes`)
        controller_signal="probe", controller_lr=0.5, explore_until=1.0, controller_floor_after_peak=False,
        comparison_horizon=2, comparison_horizon_start=16, early_comparison="lower_of_both",
        controller_line_search_threshold=4.0,
    )  # fmt: skip
    engine = HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=1e-2), total_steps=16)
    engine.probe_fn = lambda: float((model.weight.detach().double() - 2.0).pow(2).sum())
    engine.apply_lr([1e-2])
    lrs, converges = [], []
    for step in range(1, 17):
        lrs.append((engine.optimizer.param_groups[0]["lr"], engine.lrs.rows[-1][0], engine.multiplier()))
        model.zero_grad()
        (-model.weight.sum()).backward()
        engine.optimizer.step()
        engine.add_loss(torch.tensor(1.0, device=device()))
        report = engine.end_step()
        if report is not None and report.regular:
            converges.append({
                "step": step, "multipliers": report.multipliers["lr"], "probe_losses": report.probe_losses,
                "delta": report.delta.get("lr"), "optimum": engine.line_search.last_optimum,
                "votes": dict(engine.paired_votes.latest),
            })  # fmt: skip
        engine.apply_lr([1e-2])
    return {"lrs": lrs, "converges": converges}


def scenario_centre_point(rank: int, world: int) -> dict:
    """Two replicas with the line search on (`centre_point`): the weight climbs at a constant gradient and the
    probe is a parabola in the step taken (`scenario_line_search`); step-size and offset intervals alternate
    (`scenario_fan_out`). Records per regular converge the report, the line search's optimum and, for each
    centre this rank probed, the rebuilt centre and what it was rebuilt from (its current weight and its
    interval mean). Runs: the line search on and off, with a forced converge inside one interval, resumed
    from a checkpoint between two converges, and scored by the averaged probe."""

    def run(threshold: float = 4.0, force_at: int | None = None, resume_at: int | None = None,
            signal: str = "probe", other_spread: bool = False, target: float = 2.0) -> dict:  # fmt: skip
        def engine_for() -> tuple[HDETEngine, nn.Linear]:
            model = nn.Linear(1, 1, bias=False).to(device())
            with torch.no_grad():
                model.weight.zero_()
            config = HDETConfig(
                controller_time_scale="converge",  # T 2 of a short run: moves and offsets per converge
                sync_interval=2, lr_spread=0.5, lr_fan_out_scale=0.4, auto_lr=True, auto_lr_warmup_steps=0,
                controller_signal=signal, controller_lr=0.5, explore_until=1.0, controller_floor_after_peak=False,
                comparison_horizon=2, comparison_horizon_start=16, early_comparison="lower_of_both",
                controller_line_search_threshold=threshold,
            )  # fmt: skip
            engine = HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=1e-3), total_steps=24)
            engine.probe_fn = lambda: float((model.weight.detach().double() - target).pow(2).sum())
            if other_spread:  # a second spread value: the replicas no longer differ in LR alone
                engine.add_hyperparameter(
                    Hyperparameter("weight_decay", 0.5, base=0.0, setter=lambda value: None)
                )
            probe_at = engine._probe_at

            def recording_probe_at(weights: list[torch.Tensor]) -> float:
                average = engine.window.average
                centres.append({
                    "step": engine.step, "centre": float(weights[0]), "own": float(model.weight),
                    "own_mean": None if average is None or not engine.window.average_count else float(average[0]),
                    "kind": "horizon" if engine.compares_over_horizon() else "step_size",
                })  # fmt: skip
                return probe_at(weights)

            engine._probe_at = recording_probe_at
            return engine, model

        centres: list[dict] = []
        engine, model = engine_for()
        engine.apply_lr([1e-3])
        converges = []
        for step in range(1, 25):
            model.zero_grad()
            (-model.weight.sum()).backward()
            engine.optimizer.step()
            engine.add_loss(torch.tensor(1.0, device=device()))
            report = engine.end_step()
            if step == force_at:
                engine.force_converge()
            if step == resume_at:
                saved, weight = engine.state_dict(), model.weight.detach().clone()
                engine, model = engine_for()
                with torch.no_grad():
                    model.weight.copy_(weight)
                engine.load_state_dict(saved)
            engine.apply_lr([1e-3])
            if report is not None and report.regular:
                converges.append({
                    "step": step, "scale": report.scale["lr"], "multipliers": report.multipliers["lr"],
                    "probe_losses": report.probe_losses, "delta": report.delta.get("lr"),
                    "optimum": engine.line_search.last_optimum, "fan_out": engine.lrs.fan_out_scale,
                    "bent": engine.line_search.bent,
                })  # fmt: skip
        return {"converges": converges, "centres": centres}

    return {
        "on": run(),
        "off": run(threshold=0.0),
        "forced": run(force_at=5),
        "resumed": run(resume_at=9),
        "averaged": run(signal="averaged_probe"),
        "other_spread": run(other_spread=True),
        "near": run(target=0.05),  # the probe's minimum within reach: the line bends
    }


def scenario_noise_floor(rank: int, world: int) -> dict:
    """Two replicas scored on the train loss, which is injected: per step ``1 + gap x (rank's multiplier - 1) +
    noise``, the noise a fixed sequence per rank (sd 0.05), each step's loss over a ragged number of items.
    Records every regular converge's report and the step losses each rank fed in. Runs: a small gap (within the
    noise) and a large one, the floor off, two micro-batches per step (gradient accumulation: same step means),
    and resumed from a checkpoint inside an interval."""

    def run(
        gap: float,
        floor: str = "two_replicas",
        micro_batches: int = 1,
        resume_at: int | None = None,
        abstain: str = "off",
        cut_gain: float = 0.5,
    ) -> dict:
        def engine_for() -> tuple[HDETEngine, nn.Linear]:
            model = nn.Linear(1, 1, bias=False).to(device())
            config = HDETConfig(
                sync_interval=5, lr_spread=0.5, auto_lr=True, auto_lr_warmup_steps=0, controller_signal="train_loss",
                controller_time_scale="run",  # a vote at every converge (votes every k-th: `scenario_votes`)
                controller_noise_floor=floor, explore_until=1.0, controller_line_search_threshold=0.0,
                controller_abstain_within_noise=abstain, controller_two_replica_cut_gain=cut_gain,
            )  # fmt: skip
            return HDETEngine(
                config, model, torch.optim.SGD(model.parameters(), lr=1e-3), total_steps=20
            ), model

        generator = torch.Generator().manual_seed(100 + rank)
        noise = (0.05 * torch.randn(20, generator=generator, dtype=torch.float64)).tolist()
        items = [4 + (3 * step + rank) % 5 for step in range(20)]
        engine, model = engine_for()
        engine.apply_lr([1e-3])
        fed, converges = [], []
        for step in range(20):
            loss = 1.0 + gap * (engine.multiplier() - 1.0) + noise[step]
            fed.append({"step": step + 1, "loss": loss, "items": items[step]})
            for _ in range(micro_batches):  # each micro-batch: the step's mean over its share of the items
                engine.add_loss(torch.tensor(loss, device=device()), items[step] / micro_batches)
            report = engine.end_step()
            if step + 1 == resume_at:
                saved = engine.state_dict()
                engine, model = engine_for()
                engine.load_state_dict(saved)
            engine.apply_lr([1e-3])
            if report is not None and report.regular:
                converges.append({
                    "step": report.step, "losses": report.losses, "weights": report.weights,
                    "loss_noise": report.loss_noise, "multipliers": report.multipliers["lr"], "scale": report.scale["lr"],
                    "delta": report.delta["lr"],
                })  # fmt: skip
        return {"fed": fed, "converges": converges}

    return {
        "small": run(0.01),
        "large": run(1.0),
        "off": run(0.01, floor="off"),
        "accumulated": run(0.01, micro_batches=2),
        "resumed": run(0.01, resume_at=7),
        "abstain": run(0.01, abstain="always"),
        "abstain_large": run(1.0, abstain="always"),
        "large_full_cuts": run(1.0, cut_gain=1.0),
    }


def scenario_votes(rank: int, world: int) -> dict:
    """``controller_time_scale="vote"``: T 10 in a 1,000-step run (default interval 30), so a vote every 3rd
    converge. A linear model trains by SGD at each rank's LR (so the replicas really differ); the train loss is
    injected: per step ``1 + 0.3 x (rank's multiplier - 1) + noise`` over a ragged number of items (a higher LR
    does worse), and, in the run "blow_up", 20x that on rank 1 for steps 21-30 (the last third of the first vote).
    Records every regular converge and each rank's parameters just before and after it. Runs: plain, resumed
    from a checkpoint at step 15 (between a converge and the vote), with the comparison horizon (offsets), and the
    blow-up. The "kept" runs have the horizon but compare by step size throughout (it starts at step 500), so
    the converges between votes leave the replicas apart (``keep_fan_out_between_votes``): resumed at step 25 (after
    a converge that kept them), with the blow-up in steps 11-20 (the guard resets rank 1 at step 20), with a forced
    converge right after step 20, and with the setting off. The "probed" runs score the averaged probe (with the
    train loss) at each vote: step sizes kept, the same resumed at step 25, and the horizon's offsets (every converge
    between votes averages); they record the weights each probe scored and every iterate. The "share" runs average
    only the last part of each vote's window (``averaged_probe_share``): a third with T 10 (kept, and resumed at step
    25, inside that third), a third with T 30 (a vote at every converge), and a fifth of the horizon's. The "resumed_forced" runs
    force a converge right after resuming (before any step): at step 20 after a kept converge, at step 25
    mid-interval, and at step 20 of a horizon interval (the replicas at their offsets)."""
    steps = 70

    def run(
        resume_at: int | None = None,
        horizon: float = 0.0,
        blow_up: tuple[int, int] | None = None,
        step_sizes: bool = False,
        keep: bool = True,
        force_at: int | None = None,
        probed: bool = False,
        force_after_resume: bool = False,
        share: float = 1.0,
        sync: int = 10,
    ) -> dict:
        def engine_for() -> tuple[HDETEngine, nn.Linear, torch.optim.Optimizer]:
            torch.manual_seed(0)
            model = nn.Linear(4, 1).to(device())
            opt = torch.optim.SGD(model.parameters(), lr=1e-2)
            config = HDETConfig(
                sync_interval=sync, controller_time_scale="vote", lr_spread=0.5, averaged_probe_share=share, auto_lr=True, auto_lr_warmup_steps=0,
                controller_signal="train_and_averaged_probe" if probed else "train_loss", explore_until=1.0,
                controller_line_search_threshold=0.0, controller_line_search_centre=False,
                comparison_horizon=0.1 if step_sizes else horizon, comparison_horizon_start=0.5 if step_sizes else 0.0,
                early_comparison="one_interval", controller_noise_floor="off", keep_fan_out_between_votes=keep,
            )  # fmt: skip
            return HDETEngine(config, model, opt, total_steps=1000), model, opt

        generator = torch.Generator().manual_seed(100 + rank)
        noise = (0.02 * torch.randn(steps, generator=generator, dtype=torch.float64)).tolist()
        data = torch.randn(steps, 8, 4, generator=torch.Generator().manual_seed(7 + rank)).to(device())
        items = [3 + (5 * step + rank) % 7 for step in range(steps)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            engine, model, opt = engine_for()
        fed, converges, seen, iterates = [], [], [], []
        probe_x = torch.linspace(-1, 1, 8).reshape(2, 4).to(device())

        def flat() -> torch.Tensor:
            return torch.cat([p.detach().reshape(-1).clone().cpu() for p in model.parameters()])

        def probe() -> float:
            seen.append({"step": engine.step, "weights": flat()})  # the weights the probe scored
            return float(model(probe_x).pow(2).mean())

        if probed:
            engine.probe_fn = probe
        for step in range(steps):
            engine.apply_lr([1e-2])
            opt.zero_grad()
            model(data[step]).pow(2).mean().backward()
            engine.average_gradients()  # shared mode (the horizon needs it): replicas differ by their LR alone
            opt.step()
            iterates.append(flat())
            loss = 1.0 + 0.3 * (engine.multiplier() - 1.0) + noise[step]
            if blow_up and rank == 1 and blow_up[0] <= step < blow_up[1]:
                loss *= 20.0  # steps 21-30: over the 30 steps 7.3x, under the guard's 10x; over the last 10 steps 20x
            fed.append({"step": step + 1, "loss": loss, "items": items[step]})
            engine.add_loss(torch.tensor(loss, device=device()), items[step])
            before = [p.detach().clone().cpu() for p in model.parameters()]
            report = engine.end_step()
            if report is not None and report.regular:
                converges.append({
                    "step": report.step, "losses": report.losses, "multipliers": report.multipliers["lr"],
                    "scale": report.scale["lr"], "delta": report.delta.get("lr"), "excluded": report.excluded_ranks,
                    "before": before, "after": [p.detach().clone().cpu() for p in model.parameters()],
                })  # fmt: skip
            if step + 1 == force_at:
                forced = engine.force_converge()
                converges.append({
                    "step": step + 1, "forced": forced is not None, "before": before,
                    "after": [p.detach().clone().cpu() for p in model.parameters()],
                })  # fmt: skip
            if step + 1 == resume_at:
                saved = engine.state_dict()
                weights, moments = model.state_dict(), opt.state_dict()
                engine, model, opt = engine_for()
                model.load_state_dict(weights)
                opt.load_state_dict(moments)
                engine.load_state_dict(saved)
                if probed:
                    engine.probe_fn = probe
                if force_after_resume:  # before any step: the replicas are still apart (kept, or mid-interval)
                    held = [p.detach().clone().cpu() for p in model.parameters()]
                    forced = engine.force_converge()
                    converges.append({
                        "step": step + 1, "forced": forced is not None, "before": held,
                        "after": [p.detach().clone().cpu() for p in model.parameters()],
                    })  # fmt: skip
        return {
            "fed": fed, "converges": converges, "vote_interval": engine.vote_interval, "seen": seen, "iterates": iterates,
            "warnings": [str(w.message) for w in caught],
        }  # fmt: skip

    return {
        "plain": run(),
        "resumed": run(resume_at=15),
        "horizon": run(horizon=0.1),
        "blow_up": run(blow_up=(20, 30)),
        "kept": run(step_sizes=True),
        "kept_resumed": run(step_sizes=True, resume_at=25),
        "kept_blow_up": run(step_sizes=True, blow_up=(10, 20)),
        "kept_forced": run(step_sizes=True, force_at=20),
        "kept_off": run(step_sizes=True, keep=False),
        "kept_probed": run(step_sizes=True, probed=True),
        "kept_probed_resumed": run(step_sizes=True, probed=True, resume_at=25),
        "horizon_probed": run(horizon=0.1, probed=True),
        "kept_probed_share": run(step_sizes=True, probed=True, share=1 / 3),
        "kept_probed_share_resumed": run(step_sizes=True, probed=True, share=1 / 3, resume_at=25),
        "probed_share_t30": run(step_sizes=True, probed=True, share=1 / 3, sync=30),
        "horizon_probed_share": run(horizon=0.1, probed=True, share=0.2),
        "kept_resumed_forced": run(step_sizes=True, resume_at=20, force_after_resume=True),
        "kept_mid_resumed_forced": run(step_sizes=True, resume_at=25, force_after_resume=True),
        "horizon_resumed_forced": run(horizon=0.1, resume_at=20, force_after_resume=True),
    }


def regression_race_data() -> tuple[Callable, list, list]:
    """The race scenarios' linear regression: seeds the global RNG (the same initial weights on every rank) and
    returns a batch maker, 20 race batches of 16 and 16 probe batches of one (the same on every rank)."""
    torch.manual_seed(0)
    target = torch.randn(8, 1)
    shared = torch.Generator().manual_seed(123)

    def example_batch(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 8, generator=generator)
        return x, x @ target + 0.1 * torch.randn(n, 1, generator=generator)

    return example_batch, [example_batch(16, shared) for _ in range(20)], [example_batch(1, shared) for _ in range(16)]


def regression_loss(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return (module(x) - y).pow(2).mean()


def scenario_drop_in_race(rank: int, world: int, max_lr: str, race: str) -> dict:
    """The drop-in's start race (``OneCycleAutoLR.start_race``) on a linear regression, then 12 steps of the loop;
    ``race`` "none" skips the call (the run without a race)."""
    example_batch, race_batches, probe_batches = regression_race_data()
    model = nn.Linear(8, 1)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=float(max_lr))
    sched = OneCycleAutoLR(
        opt, max_lr=float(max_lr), total_steps=12, ensemble_lr_spread_ratio=0.25, model_sync_interval=4,
        enable_auto_lr=True, auto_lr_warmup_steps=4, model=ddp, probe_fn=None,
    )  # fmt: skip

    before = [p.detach().clone() for p in model.parameters()]
    lr_before = opt.param_groups[0]["lr"]
    decision = None
    if race == "differing_probe":  # each rank its own probe examples: refused on every rank alike
        own_probe = [example_batch(1, torch.Generator().manual_seed(rank)) for _ in range(16)]
        try:
            sched.start_race(ddp, race_batches, regression_loss, own_probe, steps=20)
        except ValueError as error:
            return {"error": str(error), "weights": [p.detach().clone() for p in model.parameters()], "before": before}
    elif race == "differing_pair":  # each rank its own pair batches: refused on every rank alike
        own_pair = [example_batch(4, torch.Generator().manual_seed(rank)) for _ in range(20)]
        try:
            sched.start_race(ddp, race_batches, regression_loss, probe_batches, steps=20, lower_train_batches=own_pair)
        except ValueError as error:
            return {"error": str(error), "weights": [p.detach().clone() for p in model.parameters()], "before": before}
    elif race in ("split_self", "split_quarter"):  # the pair on its own batches: the same ones, or a quarter of each
        pair_batches = race_batches if race == "split_self" else [(x[:4], y[:4]) for x, y in race_batches]
        decision = sched.start_race(
            ddp, race_batches, regression_loss, probe_batches, steps=20, lower_train_batches=pair_batches
        )
    elif race == "accumulated":  # each race batch as 4 micro-batches of 4, accumulated into one step
        micro = [(x[i : i + 4], y[i : i + 4]) for x, y in race_batches for i in range(0, 16, 4)]
        decision = sched.start_race(ddp, micro, regression_loss, probe_batches, steps=20, accumulation_steps=4)
    elif race == "quarter":  # every copy on the quarter batches (the single race the split's pair must match)
        quarter = [(x[:4], y[:4]) for x, y in race_batches]
        decision = sched.start_race(ddp, quarter, regression_loss, probe_batches, steps=20)
    elif race != "none":
        decision = sched.start_race(ddp, race_batches, regression_loss, probe_batches, steps=20, lowers=race == "lowers")
    after_race = [p.detach().clone() for p in model.parameters()]
    lrs = [opt.param_groups[0]["lr"]]
    own = torch.Generator().manual_seed(rank)
    for _ in range(12):
        loss = regression_loss(ddp, example_batch(8, own))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss)
        lrs.append(opt.param_groups[0]["lr"])
    return {
        "decision": None if decision is None else decision.to_dict(),
        "before": before,
        "after_race": after_race,
        "lr_before": lr_before,
        "lrs": lrs,
        "final": [p.detach().clone() for p in model.parameters()],
        "record": sched.engine.recorder.record.extra.get("start_race"),
    }


def scenario_drop_in_race_fp16(rank: int, world: int, scaler: str) -> dict:
    """The drop-in's start race from far below with a loss under fp16 autocast so small that its gradients underflow
    in half precision without loss scaling; ``scaler`` "loop" passes the loop's GradScaler, "none" none."""
    _, race_batches, probe_batches = regression_race_data()
    model = nn.Linear(8, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)  # decay alone would move every copy
    sched = OneCycleAutoLR(
        opt, max_lr=1e-4, total_steps=12, ensemble_lr_spread_ratio=0.25, model_sync_interval=4,
        enable_auto_lr=True, auto_lr_warmup_steps=4, model=model, probe_fn=None,
    )  # fmt: skip

    def tiny_fp16_loss(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        with torch.autocast("cpu", dtype=torch.float16):
            out = module(x)
        return 1e-9 * (out.float() - y).pow(2).mean()  # d loss / d out ~1e-10: below fp16's smallest subnormal

    loop_scaler = torch.amp.GradScaler("cpu") if scaler == "loop" else None
    scaler_before = None if loop_scaler is None else loop_scaler.state_dict()
    decision = sched.start_race(model, race_batches, tiny_fp16_loss, probe_batches, steps=20, grad_scaler=loop_scaler)
    return {
        "decision": decision.to_dict(),
        "scaler_before": scaler_before,
        "scaler_after": None if loop_scaler is None else loop_scaler.state_dict(),
    }


def scenario_accelerate_race(rank: int, world: int, gradient_sync: str) -> dict:
    """HDETAccelerate.start_race far below the right LR (AdamW at 1e-4 on a regression), then 4 steps of the loop
    (in local mode the split race: ``lower_train_batches`` a quarter of each race batch)."""
    from accelerate import Accelerator

    from hdet_hf import HDETAccelerate

    accelerator = Accelerator(cpu=True)
    example_batch, race_batches, probe_batches = regression_race_data()
    model = nn.Linear(8, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    config = HDETConfig(auto_lr=True, sync_interval=2, lr_spread=0.25, gradient_sync=gradient_sync,
                        controller_signal="train_loss", start_race_steps=0)  # fmt: skip
    hdet = HDETAccelerate(accelerator, config, total_steps=8)
    model, opt, sched = hdet.prepare(model, opt)
    before = [p.detach().clone() for p in accelerator.unwrap_model(model).parameters()]
    lr_before = opt.param_groups[0]["lr"]

    # In local mode the split race: the start and the copy below it again on a quarter of each batch.
    pair = [(x[:4], y[:4]) for x, y in race_batches] if gradient_sync == "local" else None
    decision = hdet.start_race(race_batches, regression_loss, probe_batches, steps=20, lower_train_batches=pair)
    after_race = [p.detach().clone() for p in accelerator.unwrap_model(model).parameters()]
    lrs = [opt.param_groups[0]["lr"]]
    own = torch.Generator().manual_seed(rank)
    for _ in range(4):
        loss = regression_loss(model, example_batch(8, own))
        accelerator.backward(loss)
        opt.step()
        hdet.step(loss)
        opt.zero_grad()
        lrs.append(opt.param_groups[0]["lr"])
    return {
        "decision": decision.to_dict(), "before": before, "after_race": after_race, "lr_before": lr_before,
        "lrs": lrs, "record": hdet.engine.recorder.record.extra.get("start_race"),
    }  # fmt: skip


def main() -> None:
    scenario, dump_dir, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    result = globals()[f"scenario_{scenario}"](rank, world, *extra)
    os.makedirs(dump_dir, exist_ok=True)
    torch.save(result, os.path.join(dump_dir, f"rank{rank}.pt"))
    finish_distributed()


if __name__ == "__main__":
    main()
