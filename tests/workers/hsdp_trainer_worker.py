"""HDETTrainer with --hdet_hsdp_shard_size under torchrun (gloo); each rank dumps its LRs and local shards per step."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from datasets import Dataset
from transformers import HfArgumentParser, LlamaForCausalLM, TrainerCallback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_lm  # noqa: E402

from hdet_hf import HDETTrainer, HDETTrainingArguments  # noqa: E402
from hdet_hf.collectives import local_data  # noqa: E402
from hdet_hf.hsdp import full_model_state_dict  # noqa: E402
from hdet_hf.process import finish_distributed  # noqa: E402


@dataclass
class WorkerArgs:
    dump_dir: str = field(default="dump")
    resume: str = field(default="")
    save_at: int = field(
        default=0
    )  # also save a checkpoint at this step (a resumed run keeps the saved save_steps)


class Recorder(TrainerCallback):
    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.steps: dict[int, dict] = {}
        self._lr = 0.0
        self.loaded: dict = {}

    def on_train_begin(self, args, state, control, **kwargs):
        # After a resume has loaded everything: what this rank starts from (parameter and optimizer shards).
        optimizer = self.trainer.optimizer
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.loaded = {
            "step": state.global_step,
            "shards": [local_data(p).clone() for p in self.trainer.model.parameters()],
            "optimizer": [
                {k: local_data(v).clone() for k, v in optimizer.state[p].items() if torch.is_tensor(v)}
                for p in params
            ],
            "engine_step": self.trainer.hdet_engine.step,
            "lrs": [float(g["lr"]) for g in optimizer.param_groups],
        }

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._lr = float(self.trainer.optimizer.param_groups[0]["lr"])

    def on_step_end(self, args, state, control, **kwargs):
        # After on_step_end of HDET's callback (added first): a scheduled or pre-save converge has happened.
        self.steps[state.global_step] = {
            "lr": self._lr,
            "shards": [local_data(p).clone() for p in self.trainer.model.parameters()],
        }


class SaveAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_save = True


class Notes(logging.Handler):
    """The HDET trainer's warnings (an elastic resume's notes, on rank 0)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    worker, args = HfArgumentParser((WorkerArgs, HDETTrainingArguments)).parse_args_into_dataclasses()
    tok = tiny_lm.tokenizer()
    encoded = tok(tiny_lm.texts(96), padding="max_length", max_length=8)
    rows = [{"input_ids": ids, "labels": ids} for ids in encoded["input_ids"]]
    train = Dataset.from_list(rows)
    trainer = HDETTrainer(model=tiny_lm.model(seed=0), args=args, train_dataset=train)
    recorder = Recorder(trainer)
    trainer.add_callback(recorder)
    if worker.save_at:
        # Before HDET's callback, which converges before a save.
        trainer.callback_handler.callbacks.insert(0, SaveAt(worker.save_at))
    notes = Notes()
    logging.getLogger("hdet_hf.trainer").addHandler(notes)
    trainer.train(resume_from_checkpoint=worker.resume or None)
    trainer.save_model()
    full = full_model_state_dict(trainer.model)
    rank = dist.get_rank()
    out = {
        "rank": rank,
        "steps": recorder.steps,
        "replica_rank": trainer.hdet_layout.replica_rank,
        "shard_rank": trainer.hdet_layout.shard_rank,
        "trajectory": trainer.hdet_engine.trajectory,
        "loaded": recorder.loaded,
        "notes": notes.messages,
    }
    if rank == 0:
        saved = LlamaForCausalLM.from_pretrained(args.output_dir).state_dict()
        out["saved_matches_gathered"] = sorted(full) == sorted(k for k in saved if k in full) and all(
            torch.equal(saved[k], full[k]) for k in full
        )
    torch.save(out, os.path.join(worker.dump_dir, f"rank{rank}.pt"))
    finish_distributed()


if __name__ == "__main__":
    main()
