"""HDETTrainer on a LoRA-wrapped tiny Llama under torchrun; each rank dumps its adapter after every step.

The model and tokenizer come from ``--model_dir`` (tests/tiny_lm.py saves them), so the test can load the saved
adapter onto a fresh copy of the same base model.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, TrainerCallback

from hdet_hf import HDETTrainer, HDETTrainingArguments
from hdet_hf.process import finish_distributed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_lm  # noqa: E402  (tests/tiny_lm.py)


@dataclass
class WorkerArgs:
    model_dir: str = field(default="model")
    dump_dir: str = field(default="dump")


def adapter(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def frozen(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}


class AdapterRecorder(TrainerCallback):
    """The adapter after every optimizer step (after the converge, on converge steps)."""

    def __init__(self, model) -> None:
        self.model = model
        self.per_step: dict[int, dict[str, torch.Tensor]] = {}

    def on_step_end(self, args, state, control, **kwargs):
        self.per_step[state.global_step] = adapter(self.model)


def main() -> None:
    worker, args = HfArgumentParser((WorkerArgs, HDETTrainingArguments)).parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(worker.model_dir)
    base = AutoModelForCausalLM.from_pretrained(worker.model_dir)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    )
    frozen_before = frozen(model)
    encoded = tokenizer(tiny_lm.texts(64), padding="max_length", max_length=8)
    data = Dataset.from_dict({"input_ids": encoded["input_ids"], "labels": encoded["input_ids"]})
    recorder = AdapterRecorder(model)
    trainer = HDETTrainer(model=model, args=args, train_dataset=data, callbacks=[recorder])
    trainer.train()
    trainer.save_model(args.output_dir)  # an adapter: adapter_model.safetensors + adapter_config.json
    probe = torch.tensor(tokenizer(tiny_lm.texts(4, seed=1))["input_ids"])
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=probe).logits
    rank = dist.get_rank() if dist.is_initialized() else 0
    os.makedirs(worker.dump_dir, exist_ok=True)
    torch.save(
        {
            "adapter_per_step": recorder.per_step,
            "frozen_before": frozen_before,
            "frozen_after": frozen(model),
            "probe": probe,
            "logits": logits,
            "is_ddp": isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel),
        },
        os.path.join(worker.dump_dir, f"rank{rank}.pt"),
    )


if __name__ == "__main__":
    main()
    finish_distributed()
