"""A stock Hugging Face training script: HfArgumentParser + TrainingArguments + Trainer, nothing from hdet_hf.

tests/test_launch.py runs it unmodified, directly and through `hdet_hf.launch`. On rank 0 it writes
``stock_result.json`` (trainer and argument class names, log history) to ``--output_dir``.
"""

import json
import os
from dataclasses import dataclass, field

import torch
from datasets import Dataset
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


@dataclass
class ScriptArguments:
    num_samples: int = field(default=32, metadata={"help": "Synthetic training sequences."})
    subclass_trainer: bool = field(default=False, metadata={"help": "Train with StockTrainer(Trainer)."})


class StockTrainer(Trainer):
    """A subclass defined at import time, as many scripts do."""


def main() -> None:
    script_args, training_args = HfArgumentParser(
        (ScriptArguments, TrainingArguments)
    ).parse_args_into_dataclasses()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    model = LlamaForCausalLM(config)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (8,), generator=g).repeat(script_args.num_samples, 2)
    noise = torch.rand(ids.shape, generator=g) < 0.2
    ids = torch.where(noise, torch.randint(0, 64, ids.shape, generator=g), ids)
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    trainer_class = StockTrainer if script_args.subclass_trainer else Trainer
    trainer = trainer_class(model=model, args=training_args, train_dataset=data)
    trainer.train()
    trainer.save_model()  # pickles the arguments (training_args.bin)
    if trainer.is_world_process_zero():
        result = {
            "trainer_class": type(trainer).__name__,
            "trainer_mro": [c.__name__ for c in type(trainer).__mro__],
            "args_class": type(training_args).__name__,
            "trainer_world_size": training_args.world_size,
            "ddp": isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel),
            "log_history": trainer.state.log_history,
        }
        with open(os.path.join(training_args.output_dir, "stock_result.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
