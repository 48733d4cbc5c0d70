"""A tiny Llama trained with HDETTrainer (or plain Trainer) under torchrun; each rank dumps what it saw."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from datasets import Dataset
from torch.profiler import ProfilerActivity, profile
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback

from hdet_hf import HDETTrainer, HDETTrainingArguments
from hdet_hf.process import finish_distributed


@dataclass
class WorkerArgs:
    dump_dir: str = field(default="dump")
    plain_trainer: bool = field(default=False)
    num_samples: int = field(default=64)
    hidden_size: int = field(default=16)
    with_eval: bool = field(default=False)
    profile_race: bool = field(default=False)
    gathering_loss: bool = field(default=False)


def flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


class Recorder(TrainerCallback):
    """Records, per optimizer step, the LRs each param group ran at, the params, and collectives."""

    def __init__(self, trainer, max_steps: int):
        self.trainer = trainer
        self.lrs: list[list[float]] = []
        self.multipliers: list[float] = []
        self.params_mid: dict[int, torch.Tensor] = {}
        self.params_after_sync: dict[int, torch.Tensor] = {}
        self.collectives: dict[str, int] = {}
        self.max_steps = max_steps
        self.prof = None
        self.first_batch: list[int] | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 0 and self.prof is None:
            self.prof = profile(activities=[ProfilerActivity.CPU])
            self.prof.__enter__()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        opt = self.trainer.optimizer
        self.lrs.append([float(g["lr"]) for g in opt.param_groups])
        engine = getattr(self.trainer, "hdet_engine", None)
        if engine is not None:
            self.multipliers.append(engine.multiplier())

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.params_mid[state.global_step + 1] = flat_params(self.trainer.model)

    def on_step_end(self, args, state, control, **kwargs):
        self.params_after_sync[state.global_step] = flat_params(self.trainer.model)
        if state.global_step == self.max_steps and self.prof is not None:
            self.prof.__exit__(None, None, None)
            for event in self.prof.events():
                if event.name.startswith("gloo:"):
                    self.collectives[event.name] = self.collectives.get(event.name, 0) + 1
            self.prof = None


class GatheringTrainer(HDETTrainer):
    """A compute_loss that gathers across processes at every call and keeps running totals on the trainer, as TRL's
    SFTTrainer does (`accelerator.gather_for_metrics`, `_metrics`, `_total_train_tokens`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._metrics = {"train": [], "eval": []}
        self._total_train_tokens = 0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        seen = int(self.accelerator.gather_for_metrics(torch.ones(1)).sum())
        self._metrics[mode].append(seen)
        if mode == "train":
            self._total_train_tokens += seen
        return out


def profile_start_race(collectives: dict[str, int]) -> None:
    """Count the collectives of the start race (it runs in on_train_begin, before the Recorder's profile)."""
    import hdet_hf.trainer

    race = hdet_hf.trainer.run_start_race

    def profiled(trainer, steps):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            decision = race(trainer, steps)
        for event in prof.events():
            if event.name.startswith("gloo:"):
                collectives[event.name] = collectives.get(event.name, 0) + 1
        return decision

    hdet_hf.trainer.run_start_race = profiled


def main() -> None:
    worker, args = HfArgumentParser((WorkerArgs, HDETTrainingArguments)).parse_args_into_dataclasses()
    race_collectives: dict[str, int] = {}
    if worker.profile_race:
        profile_start_race(race_collectives)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=worker.hidden_size,
        intermediate_size=2 * worker.hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    model = LlamaForCausalLM(config)
    g = torch.Generator().manual_seed(1)
    # Learnable structure (a repeated pattern with noise) so losses fall and LRs matter.
    base = torch.randint(0, 64, (8,), generator=g)
    ids = base.repeat(worker.num_samples, 2)
    noise = torch.rand(ids.shape, generator=g) < 0.2
    ids = torch.where(noise, torch.randint(0, 64, ids.shape, generator=g), ids)
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    cls = Trainer if worker.plain_trainer else GatheringTrainer if worker.gathering_loss else HDETTrainer
    eval_data = data.select(range(16)) if worker.with_eval else None
    trainer = cls(model=model, args=args, train_dataset=data, eval_dataset=eval_data)
    recorder = Recorder(trainer, args.max_steps)
    trainer.add_callback(recorder)
    original_training_step = trainer.training_step

    def training_step(model, inputs, num_items_in_batch=None):
        if recorder.first_batch is None:  # which data this rank trains on
            recorder.first_batch = inputs["input_ids"].tolist()
        return original_training_step(model, inputs, num_items_in_batch)

    trainer.training_step = training_step
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    rank = dist.get_rank() if dist.is_initialized() else 0
    engine = getattr(trainer, "hdet_engine", None)
    os.makedirs(worker.dump_dir, exist_ok=True)
    torch.save(
        {
            "lrs": recorder.lrs,
            "multipliers": recorder.multipliers,
            "params_mid": recorder.params_mid,
            "params_after": recorder.params_after_sync,
            "final": flat_params(trainer.model),
            "collectives": recorder.collectives,
            "log_history": trainer.state.log_history,
            "is_ddp": isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel),
            "engine": engine.state_dict() if engine is not None else None,
            "lr_per_step": engine.lr_per_step if engine is not None else None,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "trainer_world_size": args.world_size,
            "first_batch": recorder.first_batch,
            "race_collectives": race_collectives,
            "train_loss_calls": getattr(trainer, "_metrics", {}).get("train"),
            "total_train_tokens": getattr(trainer, "_total_train_tokens", None),
        },
        os.path.join(worker.dump_dir, f"rank{rank}.pt"),
    )


if __name__ == "__main__":
    main()
    finish_distributed()
