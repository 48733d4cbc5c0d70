"""HDETTrainer on ragged labels: records, per optimizer step, the true per-token loss computed from the logits.

Samples are read in order (no shuffling), so the test knows which rank gets which samples: with 2 ranks and 4
samples per device, rank 0 gets samples 0-3, rank 1 gets 4-7, rank 0 gets 8-11, and so on (batches alternate). Samples 8-11 have
no labelled token at all, so rank 0's second micro-batch has nothing to score.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from datasets import Dataset
from transformers import HfArgumentParser, LlamaForCausalLM, TrainerCallback

from hdet_hf import HDETTrainer, HDETTrainingArguments
from hdet_hf.process import finish_distributed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_lm  # noqa: E402  (tests/tiny_lm.py)

VOCAB = 64


@dataclass
class WorkerArgs:
    dump_dir: str = field(default="dump")
    mean_loss_model: bool = field(
        default=False, metadata={"help": "Train MeanLossLM (no micro-batch without labelled tokens)."}
    )


class MeanLossLM(LlamaForCausalLM):
    """Like BERT's heads in transformers 5: forward takes **kwargs, but the loss is a plain mean that ignores
    ``num_items_in_batch`` (the Trainer would multiply it by the process count)."""

    def forward(self, input_ids=None, attention_mask=None, labels=None, num_items_in_batch=None, **kwargs):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kwargs)


class TruthTrainer(HDETTrainer):
    """Adds the summed token cross-entropy and the token count of every training micro-batch, from the logits."""

    truth: list[tuple[float, int]]
    _sum = 0.0
    _count = 0

    def _get_train_sampler(self, train_dataset=None):
        return torch.utils.data.SequentialSampler(
            train_dataset if train_dataset is not None else self.train_dataset
        )

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs["labels"]
        loss, outputs = super().compute_loss(
            model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
        )
        if model.training:
            targets = labels[..., 1:]
            logits = outputs.logits.detach().double()[..., :-1, :]
            self._sum += float(
                F.cross_entropy(
                    logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100, reduction="sum"
                )
            )
            self._count += int(targets.ne(-100).sum())
        return (loss, outputs) if return_outputs else loss


class StepTruth(TrainerCallback):
    def __init__(self, trainer: TruthTrainer) -> None:
        self.trainer = trainer
        self.steps: list[tuple[float, int]] = []

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.steps.append((self.trainer._sum, self.trainer._count))
        self.trainer._sum, self.trainer._count = 0.0, 0


def ragged_data(num_samples: int = 96, length: int = 16, empty_batch: bool = True) -> Dataset:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (num_samples, length), generator=g)
    labels = ids.clone()
    for i in range(num_samples):
        # Ragged prompts: the first 1..14 positions are masked, differently for every sample; the
        # samples of rank 1 have long masks, so its token count is a fraction of rank 0's.
        masked = 2 + int(torch.randint(0, 4, (1,), generator=g)) if (i // 4) % 2 == 0 else 10 + i % 5
        labels[i, :masked] = -100
    if empty_batch:
        labels[8:12] = -100  # rank 0's third micro-batch: nothing labelled
    return Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()})


def main() -> None:
    worker, args = HfArgumentParser((WorkerArgs, HDETTrainingArguments)).parse_args_into_dataclasses()
    model = tiny_lm.model(seed=0, vocab_size=VOCAB)
    if worker.mean_loss_model:
        # A plain mean over zero tokens is NaN (and so would be its gradients): no empty micro-batch here.
        model = MeanLossLM(model.config)
        model.load_state_dict(tiny_lm.model(seed=0, vocab_size=VOCAB).state_dict())
    data = ragged_data(empty_batch=not worker.mean_loss_model)
    trainer = TruthTrainer(model=model, args=args, train_dataset=data)
    recorder = StepTruth(trainer)
    trainer.add_callback(recorder)
    trainer.train()
    rank = dist.get_rank() if dist.is_initialized() else 0
    os.makedirs(worker.dump_dir, exist_ok=True)
    engine = trainer.hdet_engine
    torch.save(
        {
            "steps": recorder.steps,
            "trajectory": engine.trajectory,
            "divergence_events": engine.divergence_events,
            "trainer_scales_loss": trainer.model_accepts_loss_kwargs,
            "final_finite": all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters()),
        },
        os.path.join(worker.dump_dir, f"rank{rank}.pt"),
    )


if __name__ == "__main__":
    main()
    finish_distributed()
