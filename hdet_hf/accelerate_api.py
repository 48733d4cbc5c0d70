"""`HDETAccelerate`: HDET for custom ``no_trainer`` loops written with 🤗 Accelerate.

Shaped like Accelerate's ``LocalSGD``: a small object around the ``Accelerator``, with ``prepare`` in place
of ``accelerator.prepare`` and one ``step(loss)`` call after ``optimizer.step()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch import nn

from .config import DEFAULT_START_RACE_STEPS, HDETConfig
from .engine import ConvergeReport, HDETEngine
from .hsdp import (
    CHECKPOINT_FILENAME,
    HSDPEngine,
    HSDPLayout,
    build_layout,
    check_no_accelerate_sharding,
    resume_from_files,
    saved_files,
    shard_model,
    sharded_state,
)
from .process import check_launch_seen
from .race_runner import race_user_batches
from .schedulers import HDETLRScheduler
from .score_window import COOLDOWN_SIGNALS
from .start_race import RaceDecision

__all__ = ["HDETAccelerate"]


class HDETAccelerate:
    """HDET for a hand-written Accelerate loop.

    Args:
        accelerator: the run's `Accelerator`.
        config: an `HDETConfig`.
        total_steps: planned optimizer steps (controller warm-up, final converge).
        enabled: ``False`` makes every call a plain pass-through (``prepare`` = ``accelerator.prepare``),
            so one script serves both HDET and DDP runs.

    With ``HDETConfig(hsdp_shard_size=N)`` each group of N processes is one ensemble member, sharded with FSDP2
    (`hdet_hf.hsdp`): ``prepare`` shards the model and re-points the optimizer, and `save_checkpoint` /
    `load_checkpoint` write and read each rank's shards.

    Example (runs as is on one CPU process; launch the same loop with ``accelerate launch`` on N):
        >>> import torch
        >>> from accelerate import Accelerator
        >>> from hdet_hf import HDETAccelerate, HDETConfig
        >>> accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
        >>> model = torch.nn.Linear(4, 1)
        >>> optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        >>> data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        >>> loader = torch.utils.data.DataLoader(data, batch_size=4)
        >>> hdet = HDETAccelerate(accelerator, HDETConfig(lr_spread=0, sync_interval=2), total_steps=4)
        >>> model, optimizer, loader, scheduler = hdet.prepare(model, optimizer, loader)
        >>> for x, y in loader:
        ...     with accelerator.accumulate(model):
        ...         loss = torch.nn.functional.mse_loss(model(x), y)
        ...         accelerator.backward(loss)
        ...         optimizer.step()
        ...         report = hdet.step(loss)  # steps `scheduler` too; converges every 2 optimizer steps
        ...         optimizer.zero_grad()
        >>> hdet.engine.step, [entry["step"] for entry in hdet.engine.trajectory]
        (4, [2, 4])
        >>> hdet.converge()  # before your own evaluation or save; None: the last step already converged
    """

    def __init__(
        self, accelerator: Accelerator, config: HDETConfig, total_steps: int, enabled: bool = True
    ) -> None:
        self.accelerator = accelerator
        self.config = config
        self.total_steps = total_steps
        self.enabled = enabled
        self.engine: HDETEngine | None = None
        self.lr_scheduler: HDETLRScheduler | None = None
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.layout: HSDPLayout | None = None
        config.check_run_length(total_steps)
        if enabled:
            check_launch_seen(
                accelerator.num_processes,
                "the Accelerator",
                "On a machine without GPUs create it with Accelerator(cpu=True), or set ACCELERATE_USE_CPU=1.",
            )

    def prepare(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *others: Any,
        lr_scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        probe_fn: Callable[[], float] | None = None,
    ) -> tuple[Any, ...]:
        """``accelerator.prepare`` for HDET. Pass the scheduler last (positionally) or as ``lr_scheduler``.

        ``probe_fn`` returns this replica's loss on one fixed batch that is the same on every rank (a few
        held-out examples, in eval mode, without gradients). The probe-based controller signals need it
        (``HDETConfig.controller_signal``); `HDETTrainer` builds its own from the eval or train set.

        The model is not wrapped in DDP in ``local`` mode, and the scheduler is not given to Accelerate
        (its ``AcceleratedScheduler`` steps once per process per call, which would distort the schedule);
        HDET wraps it instead and steps it from ``step(loss)``.
        """
        rest = list(others)
        if lr_scheduler is None and rest and isinstance(rest[-1], torch.optim.lr_scheduler.LRScheduler):
            lr_scheduler = rest.pop()
        if not self.enabled:
            prepared = self.accelerator.prepare(model, optimizer, *rest)
            return (*prepared, lr_scheduler) if lr_scheduler is not None else prepared
        if self.config.auto_lr and self.config.controller_signal != "train_loss" and probe_fn is None:
            raise ValueError(
                f"controller_signal={self.config.controller_signal} scores replicas on a shared probe batch: "
                "pass probe_fn=<callable returning the loss on one fixed batch> to HDETAccelerate.prepare(), "
                "or use HDETConfig(controller_signal='train_loss')."
            )
        if self.config.auto_lr and self.config.controller_signal in COOLDOWN_SIGNALS:
            # The cool-down needs the training loss of chosen batches, which only HDETTrainer can build.
            raise ValueError(
                f"controller_signal={self.config.controller_signal} is HDETTrainer-only; use "
                "HDETConfig(controller_signal='train_and_averaged_probe') with HDETAccelerate."
            )
        if self.config.start_race_steps:
            # The race trains on chosen batches before the first step, which a custom loop owns: it calls
            # `start_race` with them (unset, the default races in HDETTrainer only).
            raise ValueError(
                "HDETConfig(start_race_steps=...) is for HDETTrainer, which draws the race's batches itself: a "
                "custom loop owns its batches. Drop it and call hdet.start_race(train_batches, loss_fn, "
                "probe_batches, steps=...) after prepare()."
            )
        if self.config.start_race_lowers:
            raise ValueError(
                "HDETConfig(start_race_lowers=True) is for HDETTrainer's race. Drop it: hdet.start_race(...) lowers "
                "by default (lowers=False: raise only)."
            )
        check_no_accelerate_sharding(self.accelerator, hsdp=bool(self.config.hsdp_shard_size))
        if self.config.hsdp_shard_size:
            # HSDP: HDET builds the 2-D mesh and shards the model itself (Accelerate's FSDP plugin cannot run on
            # CPU, and in local mode must not all-reduce across groups); Accelerate only places it, no DDP.
            self.layout = build_layout(self.config, self.accelerator.device.type)
            shard_model(model, self.layout, optimizer=getattr(optimizer, "optimizer", optimizer))
        if self.config.gradient_sync == "local" or self.layout is not None:
            model = self.accelerator.prepare_model(model, evaluation_mode=True)
            prepared = self.accelerator.prepare(optimizer, *rest)
            optimizer, *rest = prepared if rest else (prepared,)
        else:
            model, optimizer, *rest = self.accelerator.prepare(model, optimizer, *rest)
        self.model = model
        raw_optimizer = getattr(optimizer, "optimizer", optimizer)
        self.optimizer = raw_optimizer
        if self.layout is not None:
            self.engine = HSDPEngine(
                self.config, self.accelerator.unwrap_model(model), raw_optimizer, self.total_steps, layout=self.layout
            )
        else:
            self.engine = HDETEngine(
                self.config, self.accelerator.unwrap_model(model), raw_optimizer, self.total_steps
            )
        self.engine.probe_fn = probe_fn
        if lr_scheduler is None:
            lr_scheduler = torch.optim.lr_scheduler.LambdaLR(raw_optimizer, lambda _: 1.0)
        self.lr_scheduler = HDETLRScheduler(lr_scheduler, self.engine)
        if self.config.gradient_sync == "local" or self.layout is not None:
            # No DDP wrapper (and FSDP2 does not broadcast either): every replica starts from replica 0's weights.
            self.engine.broadcast_from_rank0()
        return (model, optimizer, *rest, self.lr_scheduler)

    def step(self, loss: torch.Tensor | float, num_items: torch.Tensor | int | None = None) -> ConvergeReport | None:
        """Call after ``optimizer.step()`` on every micro-batch; counts only real optimizer steps.

        ``loss`` is this micro-batch's mean loss (as the model returns it). Pass ``num_items`` (e.g. its
        labelled tokens, ``(labels != -100).sum()``) when batches are ragged: replicas are then compared on
        their per-token mean over the interval instead of the mean of per-batch means.
        """
        if not self.enabled:
            return None
        if self.engine is None:
            raise RuntimeError(
                "HDETAccelerate.step() was called before prepare(): call hdet.prepare(model, ...) first"
            )
        self.engine.add_loss(loss, 1.0 if num_items is None else num_items)
        if not self.accelerator.sync_gradients:
            return None
        report = self.engine.end_step()
        assert self.lr_scheduler is not None
        self.lr_scheduler.step()
        return report

    def start_race(
        self,
        train_batches: Sequence[Any],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        probe_batches: Sequence[Any],
        *,
        steps: int = DEFAULT_START_RACE_STEPS,
        max_grad_norm: float | None = None,
        lowers: bool = True,
        lower_train_batches: Sequence[Any] | None = None,
        accumulation_steps: int = 1,
    ) -> RaceDecision | None:
        """The start race (HDETTrainer's default with auto-LR), after ``prepare`` and before the first step.

        As `OneCycleAutoLR.start_race`: the replicas train copies of the initial weights for ``steps`` steps each
        at the peak LR x 1, 2.15, 4.64 and 10 (and x 0.464 when ``lowers``) on the first ``steps`` of
        ``train_batches`` (one replica's batch each: with gradient accumulation, the accumulated batch; on 8 or
        more processes a quarter of the global batch; half of it with ``lower_train_batches``, where the start and
        the copy below it race again on those, a quarter: HDETTrainer's split race; ``accumulation_steps``
        consecutive batches of each list a step, where a copy's step is larger than one device fits), score each
        copy on ``probe_batches`` (one loss per batch, paired over the copies) with ``loss_fn(model, batch)``, and
        start the controller at the decided scale; the run keeps its initial weights, optimizer state and random
        streams. The batch lists must be the same on every rank (checked). Whole replicas only (not
        ``hsdp_shard_size``). Under fp16 mixed precision the copies step through a copy of the Accelerator's
        GradScaler, as the run does. Returns the decision (None with one process).
        """
        if not self.enabled:
            return None
        if self.engine is None:
            raise RuntimeError("HDETAccelerate.start_race() was called before prepare(): call hdet.prepare(...) first")
        if self.layout is not None:
            raise ValueError(
                "HDETAccelerate.start_race() races whole replicas; with hsdp_shard_size each replica is sharded "
                "across processes. Start HSDP runs without it."
            )
        assert self.model is not None and self.optimizer is not None and self.lr_scheduler is not None
        decision = race_user_batches(
            self.engine, self.accelerator.unwrap_model(self.model), self.optimizer, train_batches, loss_fn,
            probe_batches, steps=steps, max_grad_norm=max_grad_norm, lowers=lowers,
            switch="HDETConfig(auto_lr=True)", grad_scaler=self.accelerator.scaler,
            lower_train_batches=lower_train_batches, accumulation_steps=accumulation_steps,
        )  # fmt: skip
        if decision is not None:
            self.lr_scheduler.reapply()  # the first step's LRs at the decided scale
        return decision

    def converge(self) -> ConvergeReport | None:
        """Average the replicas now (e.g. before evaluating or saving); no controller update. None when they are
        identical already (nothing happened since the last converge)."""
        if not self.enabled:
            return None
        if self.engine is None:
            raise RuntimeError(
                "HDETAccelerate.converge() was called before prepare(): call hdet.prepare(...) first"
            )
        report = self.engine.force_converge()
        if report is not None:
            assert self.lr_scheduler is not None
            self.lr_scheduler.reapply()
        return report

    def state_dict(self) -> dict[str, Any]:
        return self.engine.state_dict() if self.engine is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.engine is None:
            raise RuntimeError("Call prepare() before load_state_dict()")
        self.engine.load_state_dict(state)
        assert self.lr_scheduler is not None
        self.lr_scheduler.reapply()

    # ------------------------------------------------------------------------------ HSDP checkpoints
    def save_checkpoint(self, folder: str) -> None:
        """HSDP runs: converge, then every rank writes ``hdet_hsdp_rank{r}.pt`` (its parameter and optimizer
        shards and its HDET state; see `hdet_hf.hsdp.sharded_state`). A collective: call it on every rank."""
        engine = self._hsdp_engine("save_checkpoint")
        assert self.model is not None and self.optimizer is not None
        self.converge()
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, CHECKPOINT_FILENAME.format(rank=dist.get_rank()))
        tmp = path + ".tmp"
        torch.save(sharded_state(self.accelerator.unwrap_model(self.model), self.optimizer, engine.layout, engine), tmp)
        os.replace(tmp, path)
        dist.barrier()

    def load_checkpoint(self, folder: str) -> list[str]:
        """Resume what `save_checkpoint` wrote, after ``prepare``. The number of replica groups may differ
        (elastic, like the Trainer's resume), and so may the processes per group (the saved shards are re-cut:
        `hdet_hf.hsdp.resume_from_files`). Returns notes on what changed (empty for an exact resume)."""
        engine = self._hsdp_engine("load_checkpoint")
        assert self.model is not None and self.optimizer is not None and self.layout is not None
        first = os.path.join(folder, CHECKPOINT_FILENAME.format(rank=0))
        if not os.path.isfile(first):
            raise FileNotFoundError(f"{folder} has no {os.path.basename(first)}: not an HDET HSDP checkpoint.")
        loaded = torch.load(first, weights_only=True, mmap=True)
        saved = (loaded.get("layout") if isinstance(loaded, dict) else None) or {}
        if not all(isinstance(saved.get(k), int) for k in ("num_replicas", "shard_size")):
            raise ValueError(f"{first} has no layout: not a checkpoint written by HDETAccelerate.save_checkpoint.")

        def read(rank: int, mmap: bool) -> dict:
            path = os.path.join(folder, CHECKPOINT_FILENAME.format(rank=rank))
            if not os.path.isfile(path):
                raise FileNotFoundError(
                    f"{folder} has no {os.path.basename(path)}: a checkpoint of {saved['num_replicas']} replica "
                    f"groups x {saved['shard_size']} processes has one file per process (a process stopped while "
                    "saving it?). Resume from another checkpoint."
                )
            return torch.load(path, weights_only=True, mmap=mmap)

        notes = resume_from_files(
            read,
            self.accelerator.unwrap_model(self.model),
            self.optimizer,
            engine,
            saved_replicas=saved["num_replicas"],
            saved_shard_size=saved["shard_size"],
            source=os.path.join(
                folder,
                CHECKPOINT_FILENAME.format(rank=saved_files(self.layout, saved["num_replicas"], saved["shard_size"])[0][0]),
            ),
        )
        assert self.lr_scheduler is not None
        self.lr_scheduler.reapply()
        return notes

    def _hsdp_engine(self, what: str) -> HSDPEngine:
        if not isinstance(self.engine, HSDPEngine):
            raise RuntimeError(
                f"HDETAccelerate.{what}() is for HSDP runs (HDETConfig(hsdp_shard_size=N)), after prepare(); "
                "for whole replicas save state_dict() with your own checkpoint."
            )
        return self.engine
