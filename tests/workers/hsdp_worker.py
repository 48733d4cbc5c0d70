"""HDET across HSDP replica groups (FSDP2, gloo) through HDETAccelerate.

Usage: hsdp_worker.py MODE DUMP_DIR STEPS [--save_at K CKPT_DIR] [--resume CKPT_DIR] [--shard N]

Each rank records, per optimizer step: its LR, its local parameter shards before and after the HDET step
(a converge happens inside it on the grid), and every torch.distributed collective with the ranks of its
group and the phase it ran in ("train": forward/backward/optimizer step, "hdet": the HDET step).
"""

from __future__ import annotations

import argparse
import functools
import os

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch import nn

from hdet_hf import HDETAccelerate, HDETConfig
from hdet_hf.collectives import local_data
from hdet_hf.process import finish_distributed

COLLECTIVES = (
    "all_reduce",
    "all_gather_single",
    "reduce_scatter_single",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_gather",
    "broadcast",
    "all_gather_object",
    "barrier",
)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class Tiny(nn.Module):
    _no_split_modules = ["Block"]  # what shard_model wraps separately, like a transformers model's layers

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(8), Block(8)])
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Data fixed by (step, rank): an interrupted run sees exactly what the uninterrupted one saw."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(4, 8, generator=g)
    return x, x[:, :2].sin() + 0.1 * rank


def count_collectives(log: list, phase: list) -> None:
    world = list(range(dist.get_world_size()))
    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue

        @functools.wraps(original)
        def wrapper(*args, __original=original, __name=name, **kwargs):
            group = kwargs.get("group")
            if group is None:
                group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
            ranks = world if group is None else dist.get_process_group_ranks(group)
            log.append((phase[0], phase[1], __name, list(ranks)))
            return __original(*args, **kwargs)

        setattr(dist, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["shared", "local"])
    parser.add_argument("dump")
    parser.add_argument("steps", type=int)
    parser.add_argument("--save_at", nargs=2)
    parser.add_argument("--resume")
    parser.add_argument("--shard", type=int, default=2)
    parser.add_argument("--auto_lr", action="store_true")
    parser.add_argument("--time_scale", default="run", help="HDETConfig.controller_time_scale")
    parser.add_argument("--cuda", action="store_true", help="NCCL, one GPU per process (the GPU test)")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=not args.cuda)
    device = accelerator.device
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Tiny()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    config = HDETConfig(
        hsdp_shard_size=args.shard,
        gradient_sync=args.mode,
        sync_interval=4,
        # A vote at every converge by default here (T 4 is shorter than the default interval); --time_scale vote: at
        # every 2nd.
        controller_time_scale=args.time_scale,
        lr_spread=0.5,
        explore_until=1.0,  # groups apart between every pair of converges (the default ends it halfway)
        auto_lr=args.auto_lr,
        auto_lr_warmup_steps=1,
        # The default signal: a shared probe batch scored at each group's interval-mean weights, plus train loss.
        controller_signal="train_and_averaged_probe",
    )
    probe_x, probe_y = (t.to(device) for t in batch(0, 999))  # the same batch on every rank

    @torch.no_grad()
    def probe() -> float:
        return float(nn.functional.mse_loss(model(probe_x), probe_y))  # the sharded model (bound below)

    hdet = HDETAccelerate(accelerator, config, total_steps=args.steps)
    model, optimizer, scheduler = hdet.prepare(model, optimizer, probe_fn=probe if args.auto_lr else None)
    start = 0
    out: dict = {"rank": rank, "steps": {}, "error": None}
    if args.resume:
        try:
            out["notes"] = hdet.load_checkpoint(args.resume)
        except ValueError as error:
            out["error"] = str(error)
            torch.save(out, os.path.join(args.dump, f"rank{rank}.pt"))
            finish_distributed()
            return
        start = hdet.engine.step
    log: list = []
    phase = ["train", 0]
    count_collectives(log, phase)
    for step in range(start + 1, args.steps + 1):
        phase[:] = ["train", step]
        lr = optimizer.param_groups[0]["lr"]
        x, y = (t.to(device) for t in batch(step, rank))
        loss = nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        pre = [local_data(p).cpu().clone() for p in model.parameters()]
        phase[0] = "hdet"
        report = hdet.step(loss)
        optimizer.zero_grad()
        out["steps"][step] = {
            "lr": lr,
            "pre": pre,
            "post": [local_data(p).cpu().clone() for p in model.parameters()],
            "converged": report is not None,
            "losses": report.losses if report is not None else None,
            "probe_losses": report.probe_losses if report is not None else None,
            "scale": hdet.engine.controllers["lr"].scale,
            "loss": float(loss),
            "loss_noise": report.loss_noise if report is not None else None,
        }
        if args.save_at and step == int(args.save_at[0]):
            phase[0] = "save"
            hdet.save_checkpoint(args.save_at[1])
            out["steps"][step]["post"] = [local_data(p).cpu().clone() for p in model.parameters()]
    out["collectives"] = log
    out["replica_rank"] = hdet.layout.replica_rank
    out["shard_rank"] = hdet.layout.shard_rank
    out["replicate_ranks"] = dist.get_process_group_ranks(hdet.layout.replicate_group)
    torch.save(out, os.path.join(args.dump, f"rank{rank}.pt"))
    finish_distributed()


if __name__ == "__main__":
    main()
