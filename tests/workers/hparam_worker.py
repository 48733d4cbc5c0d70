"""Non-LR hyperparameters under torchrun: each rank records what its model, optimizer and loss really ran with.

Usage (one launch trains every family in turn, to pay the process start-up once):

    hparam_worker.py --families llama,gpt2 --dump_dir D --out_root O [--llama_flags "..."] [--gpt2_flags "..."]
                     <HDETTrainingArguments flags shared by every family>

Per family, each rank writes ``D/<family>/rank<r>.pt`` with:
- ``steps``: for every optimizer step, the values in effect during its forward/backward (recorded just before
  ``optimizer.step``): every dropout site, every param group's name/LR/weight decay, the label smoother's
  epsilon, every attention ``scaling``, the custom hyperparameter's last value, and the engine's multipliers,
  base values and permutations;
- ``converges``: right after each regular converge (weights identical on every rank), forward passes on one
  fixed batch: eval-mode logits with this rank's temperature and with the neutral one (same weights); at the
  neutral temperature, the Trainer's loss (with its label smoother) vs. the plain NLL, the train-mode
  deviation from eval mode per dropout seed, and the fraction of activations each ``nn.Dropout`` zeroes;
- ``custom_calls``: every value the custom hyperparameter's setter received;
- the log history, the engine state, the param-group membership and the values left on the model after train().
"""

from __future__ import annotations

import argparse
import os
import shlex

import torch
import torch.distributed as dist
from datasets import Dataset
from torch import nn
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    LlamaConfig,
    LlamaForCausalLM,
    TrainerCallback,
)

from hdet_hf import HDETTrainer, HDETTrainingArguments
from hdet_hf.hyperparameters import Hyperparameter, dropout_sites
from hdet_hf.process import finish_distributed

VOCAB = 64
SEQ = 16
CUSTOM = "custom_scale"
CUSTOM_BASE = 2.0
DROPOUT_SEEDS = (11, 12, 13, 14)


def build_model(family: str) -> nn.Module:
    torch.manual_seed(0)
    if family == "llama":
        config = LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=32,
            bos_token_id=1,
            eos_token_id=2,
        )
        return LlamaForCausalLM(config)
    if family == "gpt2":
        config = GPT2Config(
            n_embd=16,
            n_layer=2,
            n_head=2,
            vocab_size=VOCAB,
            n_positions=32,
            resid_pdrop=0.1,
            embd_pdrop=0.1,
            attn_pdrop=0.1,
            bos_token_id=1,
            eos_token_id=2,
        )
        return GPT2LMHeadModel(config)
    raise ValueError(f"Expected family llama or gpt2, but got {family!r}")


def build_data(num_samples: int) -> Dataset:
    g = torch.Generator().manual_seed(1)
    base = torch.randint(0, VOCAB, (8,), generator=g)
    ids = base.repeat(num_samples, SEQ // 8)
    noise = torch.rand(ids.shape, generator=g) < 0.2
    ids = torch.where(noise, torch.randint(0, VOCAB, ids.shape, generator=g), ids)
    return Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})


def attention_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(getattr(m, "scaling", None), float)]


def flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


class Recorder(TrainerCallback):
    def __init__(self, trainer: HDETTrainer, batch: dict[str, torch.Tensor], neutral_scaling: list[float]):
        self.trainer = trainer
        self.batch = batch
        self.neutral_scaling = neutral_scaling
        self.steps: list[dict] = []
        self.converges: list[dict] = []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        trainer, engine = self.trainer, self.trainer.hdet_engine
        model = trainer.accelerator.unwrap_model(trainer.model)
        optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
        self.steps.append(
            {
                "step": state.global_step + 1,
                "dropout": [float(getattr(m, a)) for m, a, _ in dropout_sites(model)],
                "groups": [
                    (str(g.get("name")), float(g["lr"]), float(g["weight_decay"]))
                    for g in optimizer.param_groups
                ],
                "epsilon": float(trainer.label_smoother.epsilon)
                if trainer.label_smoother is not None
                else None,
                "scaling": [float(m.scaling) for m in attention_modules(model)],
                "custom": trainer.custom_value,
                "multipliers": {name: engine.multiplier(name) for name in engine.hparams},
                "bases": {n: engine.base_value(n) for n, h in engine.hparams.items() if not h.is_lr},
                "lr_bases": list(engine.lr_per_step[-1]),
                "permutations": {k: list(v) for k, v in engine.permutations.items()},
            }
        )

    def on_step_end(self, args, state, control, **kwargs):
        report = self.trainer.hdet_engine.last_report
        if report is not None and report.regular and report.step == state.global_step:
            self.converges.append({"step": state.global_step, **self.forward_checks()})

    @torch.no_grad()
    def forward_checks(self) -> dict:
        trainer = self.trainer
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training = model.training
        ids = self.batch["input_ids"]
        out: dict = {
            "params": flat_params(model),
            "permutations": {k: list(v) for k, v in trainer.hdet_engine.permutations.items()},
            "epsilon": float(trainer.label_smoother.epsilon) if trainer.label_smoother is not None else None,
        }
        model.eval()
        out["eval_logits"] = model(input_ids=ids).logits
        modules = attention_modules(model)
        own = [m.scaling for m in modules]
        out["scaling"] = list(own)
        for m, s in zip(modules, self.neutral_scaling):
            m.scaling = s
        out["eval_logits_neutral"] = model(input_ids=ids).logits
        # The Trainer's loss on the same batch (its LabelSmoother, this rank's epsilon) vs. the plain NLL.
        batch = {k: v.clone() for k, v in self.batch.items()}
        out["trainer_loss_neutral"] = float(trainer.compute_loss(model, batch))
        out["nll_neutral"] = float(model(**{k: v.clone() for k, v in self.batch.items()}).loss)
        # Train mode, still at the neutral temperature (so only dropout differs between ranks): how far
        # dropout moves the output from eval mode, and what fraction each nn.Dropout zeroes.
        eval_logits = out["eval_logits_neutral"]
        zeroed: dict[int, list[float]] = {}

        def hook(index):
            def record(module, inputs, output):
                live = inputs[0] != 0
                zeroed.setdefault(index, []).append(float(((output == 0) & live).sum() / live.sum()))

            return record

        dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
        handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(dropouts)]
        model.train()
        deviations = []
        for seed in DROPOUT_SEEDS:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                deviations.append(float((model(input_ids=ids).logits - eval_logits).abs().mean()))
        for h in handles:
            h.remove()
        out["train_deviation"] = deviations
        out["zero_fraction"] = {i: sum(v) / len(v) for i, v in zeroed.items()}
        out["dropout_p"] = {i: float(m.p) for i, m in enumerate(dropouts)}
        out["dropout_sites"] = [float(getattr(m, a)) for m, a, _ in dropout_sites(model)]
        for m, s in zip(modules, own):
            m.scaling = s
        model.train(was_training)
        return out


def run_family(family: str, worker: argparse.Namespace, argv: list[str], rank: int) -> None:
    flags = shlex.split(getattr(worker, f"{family}_flags"))
    out_dir = os.path.join(worker.out_root, family)
    (args,) = HfArgumentParser(HDETTrainingArguments).parse_args_into_dataclasses(
        args=[*argv, *flags, "--output_dir", out_dir]
    )
    model = build_model(family)
    neutral_scaling = [m.scaling for m in attention_modules(model)]
    data = build_data(worker.num_samples)
    eval_data = data.select(range(8)) if worker.with_eval else None
    trainer = HDETTrainer(model=model, args=args, train_dataset=data, eval_dataset=eval_data)
    trainer.custom_value = None
    custom_calls: list[float] = []

    def set_custom(value: float) -> None:
        custom_calls.append(value)
        trainer.custom_value = value

    trainer.add_hyperparameter(
        Hyperparameter(CUSTOM, spread=0.5, base=CUSTOM_BASE, setter=set_custom, auto=True)
    )
    probe_batch = {
        "input_ids": torch.tensor(data[:8]["input_ids"]),
        "labels": torch.tensor(data[:8]["labels"]),
    }
    recorder = Recorder(trainer, probe_batch, neutral_scaling)
    trainer.add_callback(recorder)
    trainer.train()
    engine = trainer.hdet_engine
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    names = {id(p): n for n, p in unwrapped.named_parameters()}
    folder = os.path.join(worker.dump_dir, family)
    os.makedirs(folder, exist_ok=True)
    torch.save(
        {
            "family": family,
            "world_size": dist.get_world_size(),
            "steps": recorder.steps,
            "converges": recorder.converges,
            "custom_calls": custom_calls,
            "log_history": trainer.state.log_history,
            "engine": engine.state_dict(),
            "hparams": {
                n: {"spread": h.spread, "base": h.base, "is_lr": h.is_lr} for n, h in engine.hparams.items()
            },
            "group_members": [[names[id(p)] for p in g["params"]] for g in optimizer.param_groups],
            "all_params": [n for n, p in unwrapped.named_parameters() if p.requires_grad],
            "decay_names": trainer.get_decay_parameter_names(unwrapped),
            "configured_dropout": [p for _, _, p in dropout_sites(build_model(family))],
            "neutral_scaling": neutral_scaling,
            "after_train": {
                "scaling": [float(m.scaling) for m in attention_modules(unwrapped)],
                "dropout": [float(getattr(m, a)) for m, a, _ in dropout_sites(unwrapped)],
                "epsilon": float(trainer.label_smoother.epsilon)
                if trainer.label_smoother is not None
                else None,
                "base_values": {n: engine.base_value(n) for n, h in engine.hparams.items() if not h.is_lr},
            },
        },
        os.path.join(folder, f"rank{rank}.pt"),
    )
    dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--families", default="llama,gpt2")
    parser.add_argument("--dump_dir", required=True)
    parser.add_argument("--out_root", required=True)
    parser.add_argument("--llama_flags", default="")
    parser.add_argument("--gpt2_flags", default="")
    parser.add_argument("--num_samples", type=int, default=64)
    parser.add_argument("--with_eval", action="store_true")
    worker, argv = parser.parse_known_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for family in worker.families.split(","):
        run_family(family, worker, argv, rank)


if __name__ == "__main__":
    main()
    finish_distributed()
