"""Multi-process checks of issue 11 (no silent wrong training), engine-level so no transformers import.

Usage: ``safety_worker.py SCENARIO DUMP_DIR``; every rank writes ``DUMP_DIR/rank<r>.pt``.

- ``settings``: several plans of per-rank settings; each rank records what creating the engine raised.
- ``optimizer_inf``: Adam, ``average_optimizer_state``; rank 1 puts +inf into one second moment before the
  converge; every rank records its optimizer state and parameters after it.
- ``gradient_sharing``: runs with and without a DDP wrapper, through the engine and the drop-in scheduler; each
  rank records what the first steps raised or warned and what the engine read (`shared_gradients`).
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch import nn

from hdet_hf import HDETConfig, OneCycleAutoLR
from hdet_hf.engine import HDETEngine
from hdet_hf.process import finish_distributed

# (name, settings of rank 0, settings of the other ranks, total steps per rank)
PLANS = [
    ("sync_interval", {"sync_interval": 2}, {"sync_interval": 3}, (8, 8)),
    ("lr_spread", {"lr_spread": 0.25}, {"lr_spread": 0.5}, (8, 8)),
    ("run_length", {}, {}, (8, 10)),
    ("same", {"bucket_size_mb": 1.0}, {"bucket_size_mb": 1.0}, (8, 8)),
]


def scenario_settings(rank: int, world: int) -> dict:
    out = {}
    for name, first, others, steps in PLANS:
        model = nn.Linear(2, 1)
        config = HDETConfig(**({"sync_interval": 2} | (first if rank == 0 else others)))
        try:
            HDETEngine(config, model, torch.optim.SGD(model.parameters(), lr=0.1), steps[min(rank, 1)])
            out[name] = None
        except ValueError as exc:
            out[name] = str(exc)
    return out


def scenario_optimizer_inf(rank: int, world: int) -> dict:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    config = HDETConfig(sync_interval=1, average_optimizer_state=True, lr_spread=0.5)
    engine = HDETEngine(config, model, optimizer, total_steps=4)
    model(torch.full((2, 3), float(rank + 1))).pow(2).sum().backward()
    optimizer.step()
    if rank == 1:
        optimizer.state[model.weight]["exp_avg_sq"][0, 0] = math.inf
    before = {k: v.clone() for k, v in optimizer.state[model.weight].items()}
    engine.add_loss(1.0)
    report = engine.end_step()
    return {
        "before": before,
        "after": {k: v.clone() for k, v in optimizer.state[model.weight].items()},
        "params": [p.detach().clone() for p in model.parameters()],
        "excluded": report.excluded_ranks,
    }


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, step_fn, rank: int, steps: int) -> dict:
    """``steps`` steps on this rank's own batch; what the first steps raised and warned, and the engine's reading."""
    out: dict = {"error": None, "warnings": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in range(steps):
                loss = model(torch.full((4, 3), float(rank + 1))).pow(2).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                step_fn(loss.detach())
        except ValueError as exc:
            out["error"] = str(exc)
    out["warnings"] = [str(w.message) for w in caught if "horizon" in str(w.message)]
    return out


def scenario_gradient_sharing(rank: int, world: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    out = {}
    for name in ("engine_ddp", "engine_local", "drop_in_ddp", "drop_in_unwrapped_ddp", "drop_in_local",
                 "drop_in_horizon_local"):  # fmt: skip
        torch.manual_seed(0)
        module = nn.Linear(3, 2)
        ddp = name.endswith("_ddp")
        model = DistributedDataParallel(module) if ddp else module
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        if name.startswith("engine"):
            config = HDETConfig(
                auto_lr=True, sync_interval=2, auto_lr_warmup_steps=2, controller_signal="train_loss"
            )
            engine = HDETEngine(config, module, optimizer, total_steps=8)
            engine.apply_lr([0.01])  # what a scheduler shell does at every step (a constant schedule)

            def step_fn(loss, engine=engine):
                engine.add_loss(loss)
                engine.end_step()
                engine.apply_lr([0.01])
        else:
            horizon = {"comparison_horizon": 0.1} if name == "drop_in_horizon_local" else {}
            with warnings.catch_warnings(record=True) as built:
                warnings.simplefilter("always")
                sched = OneCycleAutoLR(
                    optimizer, max_lr=0.01, total_steps=8, ensemble_lr_spread_ratio=0.25, model_sync_interval=2,
                    enable_auto_lr=True, auto_lr_warmup_steps=2, controller_update="multiplicative",
                    controller_temperature_mode="adaptive", loss_scale=1.0,
                    model=model if name != "drop_in_unwrapped_ddp" else module, **horizon,
                )  # fmt: skip
            engine = sched.engine
            step_fn = sched.step
            no_probe_warnings = sum("without probe_fn" in str(w.message) for w in built)
        result = _train(model, optimizer, step_fn, rank, steps=4)
        result.update(shared=engine.gradients_shared, horizon=engine.horizon.enabled)
        if name.startswith("drop_in"):
            out[name + "_no_probe_warnings"] = no_probe_warnings
        out[name] = result
        if name == "drop_in_unwrapped_ddp":
            out[name + "_config"] = (sched.hdet_config.comparison_horizon, engine.config.comparison_horizon)
            fresh = OneCycleAutoLR(
                torch.optim.AdamW(module.parameters(), lr=0.01), max_lr=0.01, total_steps=8,
                ensemble_lr_spread_ratio=0.25, model_sync_interval=2, enable_auto_lr=True, auto_lr_warmup_steps=2,
                controller_update="multiplicative", controller_temperature_mode="adaptive", loss_scale=1.0, model=module,
            )  # fmt: skip
            fresh.load_state_dict(sched.state_dict())
            out["drop_in_resumed"] = {
                "horizon": fresh.engine.horizon.enabled,
                "config": fresh.hdet_config.comparison_horizon,
                "step": fresh.engine.step,
            }
    # With a probe on 2 replicas the line search needs the horizon: its warning waits for the first step's answer.
    for name, wrap in (("probe_shared", True), ("probe_local", False)):
        torch.manual_seed(0)
        module = nn.Linear(3, 2)
        model = DistributedDataParallel(module) if wrap else module
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        with warnings.catch_warnings(record=True) as built:
            warnings.simplefilter("always")
            sched = OneCycleAutoLR(
                optimizer, max_lr=0.01, total_steps=40, ensemble_lr_spread_ratio=0.25, model_sync_interval=10,
                enable_auto_lr=True, auto_lr_warmup_steps=10, controller_update="multiplicative",
                controller_temperature_mode="adaptive", loss_scale=1.0, model=module,
                probe_fn=lambda module=module: float(module(torch.ones(2, 3)).pow(2).mean()),
            )  # fmt: skip
        trained = _train(model, optimizer, sched.step, rank, steps=2)
        out[name] = {
            "at_construction": sum("line's centre" in str(w.message) for w in built),
            "after_first_step": sum("line's centre" in message for message in trained["warnings"]),
            "horizon": sched.engine.horizon.enabled,
        }
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    scenario, dump_dir = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    result = globals()[f"scenario_{scenario}"](rank, world)
    os.makedirs(dump_dir, exist_ok=True)
    torch.save(result, os.path.join(dump_dir, f"rank{rank}.pt"))
    finish_distributed()


if __name__ == "__main__":
    main()
