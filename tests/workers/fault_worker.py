"""Fault-injection worker: runs a plan of tiny HDETTrainer scenarios in one process group, one after another.

Launched once per rank (``RANK``/``WORLD_SIZE``/``MASTER_*`` in the environment, as torchrun sets them) with
``python fault_worker.py plan.json``. Several scenarios share one launch because starting a process (torch +
transformers imports) costs far more than training the tiny model. Each scenario is a list of
`HDETTrainingArguments` flags plus faults to inject on one rank at one optimizer step:

- ``nan_loss``: the training loss is multiplied by NaN before backward (NaN gradients, then NaN parameters);
- ``inf_param``: one parameter entry is set to +inf just before the optimizer step (the loss stays finite);
- ``scale_loss``: the loss the engine records is multiplied by ``factor`` (backward untouched), i.e. a loss
  explosion seen by the divergence test only;
- ``sigkill``: the process kills itself with SIGKILL at the start of that step (no cleanup of any kind);
- ``sigkill_save``: the same, when the Trainer starts saving the checkpoint of that step (after the converge
  before the save, before this rank has written any file of it).

A scenario with ``expect_error`` records an `HDETDivergenceError`, or a ValueError/FileNotFoundError from a
refused resume, instead of failing.

Every rank writes ``<dump_dir>/<scenario>/rank<r>.pt`` with what it saw: LRs, multipliers, the parameters
just before and just after every converge, its optimizer state after each converge, the batches it trained
on, the engine's state at train begin (after a resume) and at the end.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from accelerate.state import AcceleratorState, GradientState
from datasets import Dataset
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, TrainerCallback

from hdet_hf import HDETTrainer, HDETTrainingArguments
from hdet_hf.engine import HDETDivergenceError
from hdet_hf.process import finish_distributed


def flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


def flat_optimizer_state(optimizer) -> torch.Tensor:
    """Every floating-point per-parameter tensor of the optimizer state (Adam moments), in order."""
    optimizer = getattr(optimizer, "optimizer", optimizer)
    parts = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            for value in optimizer.state.get(p, {}).values():
                if isinstance(value, torch.Tensor) and value.dim() > 0 and torch.is_floating_point(value):
                    parts.append(value.detach().reshape(-1).clone())
    return torch.cat(parts) if parts else torch.zeros(0)


def hash_tree(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def tiny_llama(hidden: int = 16) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config)


def tiny_data(num_samples: int = 64, reorder_for_accumulation: bool = False) -> Dataset:
    """A repeated pattern with noise (losses fall, LRs matter), as in trainer_worker.py.

    Rows come in blocks of 4 with alternating noise (10%, then 30% of tokens replaced): with batch 4 and a
    sequential sampler, even ranks always train on the cleaner rows, so the ranks' losses differ by far more
    than float rounding and the controller's ranking of replicas is not decided by noise.

    ``reorder_for_accumulation``: order the rows so that 2 ranks with batch 2 x 2 accumulation steps and a
    sequential sampler get, per optimizer step, exactly the rows that batch 4 x 1 gives them. Accelerate
    deals batches round-robin (rank r takes batches r, r + N, ...), so within each block of 8 rows the
    batch-2 run must see rows 0,1,4,5,2,3,6,7 of the batch-4 order.
    """
    g = torch.Generator().manual_seed(1)
    base = torch.randint(0, 64, (8,), generator=g)
    ids = base.repeat(num_samples, 2)
    rate = torch.tensor([0.1 if (i // 4) % 2 == 0 else 0.3 for i in range(num_samples)]).unsqueeze(1)
    noise = torch.rand(ids.shape, generator=g) < rate
    ids = torch.where(noise, torch.randint(0, 64, ids.shape, generator=g), ids)
    if reorder_for_accumulation:
        block = torch.tensor([0, 1, 4, 5, 2, 3, 6, 7])
        order = torch.cat([block + 8 * b for b in range(num_samples // 8)])
        ids = ids[order]
    return Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})


class FaultTrainer(HDETTrainer):
    """HDETTrainer that injects loss faults and records the rows each optimizer step trained on."""

    def __init__(self, *args: Any, faults: list[dict[str, Any]], rank: int, **kwargs: Any) -> None:
        self.faults = faults
        self.rank = rank
        self.batches: dict[int, list[tuple[int, ...]]] = {}
        super().__init__(*args, **kwargs)

    def fault(self, kind: str) -> dict[str, Any] | None:
        step = self.state.global_step + 1
        for f in self.faults:
            if f["kind"] == kind and f["rank"] == self.rank and f["step"] == step:
                return f
        return None

    def training_step(self, model, inputs, num_items_in_batch=None):
        rows = self.batches.setdefault(self.state.global_step + 1, [])
        rows.extend(tuple(r) for r in inputs["input_ids"].tolist())
        return super().training_step(model, inputs, num_items_in_batch)

    def _save_checkpoint(self, model, trial):
        if any(
            f["kind"] == "sigkill_save" and f["rank"] == self.rank and f["step"] == self.state.global_step
            for f in self.faults
        ):
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._save_checkpoint(model, trial)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.fault("nan_loss") is None:
            return result
        if return_outputs:
            return result[0] * math.nan, result[1]
        return result * math.nan


class Recorder(TrainerCallback):
    """Added after HDETCallback; wraps the engine at train begin to see each converge from both sides."""

    def __init__(self, trainer: FaultTrainer, scenario: dict[str, Any], rank: int) -> None:
        self.trainer = trainer
        self.scenario = scenario
        self.rank = rank
        self.lrs: list[list[float]] = []
        self.multipliers: list[float] = []
        self.converges: list[dict[str, Any]] = []
        self.begin: dict[str, Any] = {}
        self.checkpoint_hashes: dict[str, str] | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        trainer = self.trainer
        engine = trainer.hdet_engine
        # Runs after `_load_optimizer_and_scheduler`, so this is what a resume restored.
        self.begin = {
            "global_step": state.global_step,
            "engine_step": engine.step,
            "controllers": {
                k: {"scale": v.scale, "velocity": v.velocity} for k, v in engine.controllers.items()
            },
            "multipliers": engine.multipliers(),
            "lr_per_step": [list(r) for r in engine.lr_per_step],
            "trajectory_steps": [t["step"] for t in engine.trajectory],
            "params": flat_params(trainer.model),
            "optimizer_state": flat_optimizer_state(trainer.optimizer),
        }
        original_converge = engine.converge
        original_add_loss = engine.add_loss

        def converge(regular: bool = True):
            step = engine.step
            if self.scenario.get("hash_before_converge_at") == step:
                # Both ranks have finished every earlier save once both reach this barrier.
                dist.barrier()
                if self.rank == 0:
                    self.checkpoint_hashes = hash_tree(Path(args.output_dir))
            pre = flat_params(trainer.model)
            report = original_converge(regular=regular)
            self.converges.append(
                {
                    "step": step,
                    "regular": regular,
                    "pre": pre,
                    "post": flat_params(trainer.model),
                    "excluded": list(report.excluded_ranks),
                    "weights": list(report.weights),
                    "multipliers": dict(report.multipliers),
                    "optimizer_state": flat_optimizer_state(trainer.optimizer),
                }
            )
            return report

        def add_loss(loss, weight=1.0):
            f = trainer.fault("scale_loss")
            original_add_loss(loss * f["factor"] if f is not None else loss, weight)

        engine.converge = converge
        engine.add_loss = add_loss

    def on_step_begin(self, args, state, control, **kwargs):
        if self.trainer.fault("sigkill") is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        trainer = self.trainer
        self.lrs.append([float(g["lr"]) for g in trainer.optimizer.param_groups])
        self.multipliers.append(trainer.hdet_engine.multiplier())
        if trainer.fault("inf_param") is not None:
            with torch.no_grad():
                next(trainer.model.parameters()).view(-1)[0] = math.inf


def run_scenario(scenario: dict[str, Any], dump_root: Path) -> None:
    # Each scenario builds a fresh Accelerator (bf16 or not); the process group (PartialState) is kept.
    AcceleratorState._reset_state()
    GradientState._reset_state()
    (args,) = HfArgumentParser(HDETTrainingArguments).parse_args_into_dataclasses(scenario["args"])
    rank = dist.get_rank() if dist.is_initialized() else 0
    trainer = FaultTrainer(
        model=tiny_llama(),
        args=args,
        train_dataset=tiny_data(reorder_for_accumulation=scenario.get("reorder_for_accumulation", False)),
        faults=scenario.get("faults", []),
        rank=rank,
    )
    recorder = Recorder(trainer, scenario, rank)
    trainer.add_callback(recorder)
    error = None
    try:
        trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    except (HDETDivergenceError, ValueError, FileNotFoundError) as exc:
        if not scenario.get("expect_error"):
            raise
        error = f"{type(exc).__name__}: {exc}"
    engine = trainer.hdet_engine
    out = dump_root / scenario["name"]
    out.mkdir(parents=True, exist_ok=True)
    if engine is None or (not recorder.begin and error is not None):  # refused before training began
        torch.save({"error": error, "global_step": trainer.state.global_step}, out / f"rank{rank}.pt")
        return
    torch.save(
        {
            "error": error,
            "global_step": trainer.state.global_step,
            "lrs": recorder.lrs,
            "multipliers": recorder.multipliers,
            "converges": recorder.converges,
            "begin": recorder.begin,
            "batches": trainer.batches,
            "checkpoint_hashes": recorder.checkpoint_hashes,
            "final": flat_params(trainer.model),
            "final_optimizer_state": flat_optimizer_state(trainer.optimizer),
            "engine": engine.state_dict(),
            "lr_per_step": engine.lr_per_step,
            "log_history": trainer.state.log_history,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        },
        out / f"rank{rank}.pt",
    )


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    for scenario in plan["scenarios"]:
        run_scenario(scenario, Path(plan["dump_dir"]))


if __name__ == "__main__":
    main()
    finish_distributed()
