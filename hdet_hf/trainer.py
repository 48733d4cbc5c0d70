"""`HDETTrainer`: `transformers.Trainer` with HDET. Thin glue: the engine does the work.

Where it hooks into the Trainer loop (optimizer.step -> on_optimizer_step -> scheduler.step -> zero_grad
-> global_step += 1 -> on_step_end -> log/save/evaluate):
- ``training_step``: adds each micro-batch's loss to the engine (no communication);
- ``on_optimizer_step``: counts the optimizer step; every T steps the engine converges and, with auto-LR,
  moves the base LR and draws new multipliers;
- ``lr_scheduler.step``: `HDETLRScheduler` sets base x multiplier for the next step;
- ``on_step_end``/``on_epoch_end``: if the Trainer is about to evaluate or save, replicas are averaged first,
  so every evaluated or saved model is the ensemble mean (and every checkpoint is consistent);
- ``on_save``: each rank writes its own HDET state and optimizer state (the Trainer saves only rank 0's);
- ``_load_optimizer_and_scheduler``: resume restores them.

In ``local`` gradient mode Accelerate is asked not to wrap the model in DDP (see
`_prepare_model_without_ddp`), so no gradient collective runs between converges.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .engine import HDETEngine
from .hyperparameters import (
    Hyperparameter,
    attention_temperature_hyperparameter,
    dropout_hyperparameter,
    label_smoothing_hyperparameter,
    lr_param_groups,
    weight_decay_hyperparameter,
)
from .schedule_metadata import MODEL_CARD_TAG, PLOT_FILENAME, HDETSchedule, add_to_model_card
from .schedulers import HDETLRScheduler

__all__ = ["HDETTrainer", "HDETTrainerMixin", "HDETCallback", "STATE_FILENAME", "OPTIMIZER_FILENAME"]

logger = logging.getLogger(__name__)

STATE_FILENAME = "hdet_state_rank{rank}.pt"
OPTIMIZER_FILENAME = "hdet_optimizer_rank{rank}.pt"


class HDETCallback(TrainerCallback):
    """Drives the engine from Trainer events. Added by `HDETTrainer`; not meant to be used alone."""

    def __init__(self, trainer: HDETTrainer) -> None:
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is not None and args.hdet_config.gradient_sync == "local" and engine.step == 0:
            engine.broadcast_from_rank0()
        # Model tags reach every card written later, including PEFT's adapter card, which rewrites the tag list.
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        if engine is not None and hasattr(model, "add_model_tags"):
            model.add_model_tags([MODEL_CARD_TAG])

    def on_optimizer_step(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is not None:
            engine.end_step()

    def _converge_before_eval_or_save(self, control) -> None:
        engine = self.trainer.hdet_engine
        if (
            engine is not None
            and engine.steps_since_sync > 0
            and (control.should_save or control.should_evaluate)
        ):
            engine.converge(regular=False)
            self.trainer.lr_scheduler.reapply()

    def on_step_end(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is None:
            return
        report = engine.last_report
        if report is not None and report.step == state.global_step and report.regular:
            # Trainer.log resets control.should_log; keep the Trainer's own decision for this step.
            should_log = control.should_log
            self.trainer.log(report.to_logs())
            control.should_log = should_log
        self._converge_before_eval_or_save(control)

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.trainer.hdet_engine is not None:
            self._converge_before_eval_or_save(control)

    def on_save(self, args, state, control, **kwargs):
        if self.trainer.hdet_engine is not None:
            folder = os.path.join(
                self.trainer._get_output_dir(None), f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            )
            self.trainer.save_hdet_state(folder)

    def on_train_end(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is not None:
            # The trained model is the ensemble mean: give it the base values, not this rank's multiplied ones.
            engine.apply_base_values()
            if args.should_save:
                self.trainer.save_hdet_schedule(args.output_dir)
                # A card written during training (TRL writes one at every checkpoint) gets the final schedule.
                self.trainer.add_hdet_to_model_card()


class HDETTrainerMixin:
    """HDET behaviour for any `transformers.Trainer` subclass (``class MyTrainer(HDETTrainerMixin, Seq2SeqTrainer)``).

    Runs HDET when ``args.hdet`` is set (an `HDETTrainingArguments`).

    Without ``--hdet`` nothing changes: same losses, same checkpoints as `Trainer`.

    """

    # Every instance registers here so `hdet_hf.launch` can tell whether a stock script built a Trainer.
    instances_created: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.hdet_engine: HDETEngine | None = None
        self._extra_hyperparameters: list[Hyperparameter] = []
        HDETTrainerMixin.instances_created += 1
        super().__init__(*args, **kwargs)
        if self.hdet_enabled:
            self.add_callback(HDETCallback(self))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Trainer subclasses that override create_model_card without calling super() (TRL's trainers) would
        # drop the HDET section; wrap such an override so the section follows whatever card it writes.
        own = cls.__dict__.get("create_model_card")
        if own is not None and not getattr(own, "_adds_hdet_section", False):
            cls.create_model_card = _adding_hdet_section(own)

    @property
    def hdet_enabled(self) -> bool:
        return bool(getattr(self.args, "hdet", False))

    # ------------------------------------------------------------------------------- set-up
    def create_accelerator_and_postprocess(self) -> None:
        super().create_accelerator_and_postprocess()
        if self.hdet_enabled and self.args.hdet_config.gradient_sync == "local":
            self.accelerator.prepare_model = _prepare_model_without_ddp(self.accelerator.prepare_model)

    def add_hyperparameter(self, hyperparameter: Hyperparameter) -> None:
        """Explore a custom scalar too (call before ``train()``); see `hdet_hf.hyperparameters`.

        Example:
            >>> from hdet_hf.hyperparameters import Hyperparameter
            >>> trainer.add_hyperparameter(Hyperparameter(  # doctest: +SKIP
            ...     "router_aux_loss", spread=0.5, base=0.01, auto=True,
            ...     setter=lambda v: setattr(trainer.model.config, "router_aux_loss_coef", v)))
        """
        if self.hdet_engine is not None and self.hdet_engine.step > 0:
            raise RuntimeError("add_hyperparameter must be called before training starts")
        self._extra_hyperparameters.append(hyperparameter)

    def create_optimizer(self, model=None):
        if not (self.hdet_enabled and self.args.hdet_config.lr_groups) or self.optimizer is not None:
            return super().create_optimizer(model)
        opt_model = self.model if model is None else model
        groups = lr_param_groups(opt_model, self.get_decay_parameter_names(opt_model), self.args.weight_decay)
        optimizer_cls, optimizer_kwargs = self.optimizer_cls_and_kwargs or self.get_optimizer_cls_and_kwargs(
            self.args, opt_model
        )
        self.optimizer = optimizer_cls(groups, **optimizer_kwargs)
        return self.optimizer

    def _register_hyperparameters(self, engine: HDETEngine, optimizer: torch.optim.Optimizer) -> None:
        config = self.args.hdet_config
        if config.lr_groups:
            engine.split_lr_by_group(
                [str(g.get("name", f"group_{i}")) for i, g in enumerate(optimizer.param_groups)]
            )
        model = self.accelerator.unwrap_model(self.model)
        if config.weight_decay_spread > 0:
            engine.add_hyperparameter(
                weight_decay_hyperparameter(optimizer, config.weight_decay_spread, config.weight_decay_auto)
            )
        if config.dropout_spread > 0:
            engine.add_hyperparameter(
                dropout_hyperparameter(model, config.dropout_spread, config.dropout_auto, config.dropout_base)
            )
        if config.label_smoothing_spread > 0:
            engine.add_hyperparameter(
                label_smoothing_hyperparameter(
                    self, config.label_smoothing_spread, config.label_smoothing_auto
                )
            )
        if config.attention_temperature_spread > 0:
            engine.add_hyperparameter(
                attention_temperature_hyperparameter(
                    model, config.attention_temperature_spread, config.attention_temperature_auto
                )
            )
        for hyperparameter in self._extra_hyperparameters:
            engine.add_hyperparameter(hyperparameter)

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if not self.hdet_enabled:
            return super().create_scheduler(num_training_steps, optimizer)
        if isinstance(self.lr_scheduler, HDETLRScheduler):
            return self.lr_scheduler
        optimizer = optimizer if optimizer is not None else self.optimizer
        config = self.args.hdet_config
        if self.lr_scheduler is None and config.base_schedule == "one_cycle":
            warmup = self.args.get_warmup_steps(num_training_steps)
            pct_start = warmup / num_training_steps if warmup > 0 else 0.3
            # OneCycle with the Trainer's --learning_rate as peak; momentum cycling off so --adam_beta1 holds.
            self.lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(
                optimizer,
                max_lr=[g["lr"] for g in optimizer.param_groups],
                total_steps=num_training_steps,
                # OneCycleLR divides by (pct_start * total - 1): keep at least 2 warm-up steps.
                pct_start=min(max(pct_start, 2.0 / num_training_steps), 0.99),
                cycle_momentum=False,
            )
            self._created_lr_scheduler = True
        else:
            super().create_scheduler(num_training_steps, optimizer)
        # The engine's optimizer must expose the real param groups and state (Accelerate wraps it).
        raw_optimizer = getattr(optimizer, "optimizer", optimizer)
        self.hdet_engine = HDETEngine(config, self.model, raw_optimizer, num_training_steps)
        self._register_hyperparameters(self.hdet_engine, raw_optimizer)
        if config.controller_signal == "probe":
            self.hdet_engine.probe_fn = self._make_probe_fn(config.probe_size)
        self.lr_scheduler = HDETLRScheduler(self.lr_scheduler, self.hdet_engine)
        return self.lr_scheduler

    def _make_probe_fn(self, size: int):
        """Loss of this replica on one batch that is identical on every rank (held-out data if there is any)."""
        dataset = self.eval_dataset if self.eval_dataset is not None else self.train_dataset
        if isinstance(dataset, dict):
            dataset = next(iter(dataset.values()))
        if dataset is None or not hasattr(dataset, "__len__") or len(dataset) == 0:
            raise ValueError(
                "--hdet_controller_signal probe needs an eval_dataset or a sized train_dataset to draw the shared "
                "probe batch from; pass one, or use --hdet_controller_signal train_loss."
            )
        count = min(size, len(dataset))
        if hasattr(dataset, "select"):  # a datasets.Dataset: drop the columns the model does not take
            dataset = self._remove_unused_columns(dataset.select(range(count)), description="probe")
        batch = self._prepare_inputs(self.data_collator([dataset[i] for i in range(count)]))

        def probe() -> float:
            model = self.model
            was_training = model.training
            model.eval()
            # Score plain NLL: each rank's own label smoothing would bias the comparison. A copy of the
            # batch, because compute_loss pops "labels" when a label smoother is active.
            smoother, self.label_smoother = self.label_smoother, None
            try:
                with torch.no_grad(), self.compute_loss_context_manager():
                    loss = self.compute_loss(model, dict(batch))
            finally:
                self.label_smoother = smoother
                model.train(was_training)
            return float(loss)

        return probe

    def evaluate(self, *args: Any, **kwargs: Any):
        """Evaluate the ensemble mean with the base values of every explored hyperparameter (not this rank's)."""
        engine = self.hdet_engine
        if engine is None:
            return super().evaluate(*args, **kwargs)
        engine.apply_base_values()
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            if self.is_in_train:
                engine.apply_values()

    # ------------------------------------------------------------------------------- per step
    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        engine = self.hdet_engine
        if engine is not None:
            engine.add_loss(loss)
            # Synchronous warm-up: average gradients after the last micro-batch's backward, before clipping.
            if engine.in_sync_warmup and self.accelerator.gradient_state.sync_gradients:
                engine.average_gradients()
        return loss

    # ------------------------------------------------------------------------------- state
    def save_hdet_state(self, folder: str) -> None:
        """Each rank writes its HDET state and its own optimizer state (replicas differ between converges)."""
        engine = self.hdet_engine
        if engine is None:
            return
        os.makedirs(folder, exist_ok=True)
        torch.save(engine.state_dict(), os.path.join(folder, STATE_FILENAME.format(rank=engine.rank)))
        if not engine.config.average_optimizer_state:
            torch.save(
                self.optimizer.state_dict(), os.path.join(folder, OPTIMIZER_FILENAME.format(rank=engine.rank))
            )
        if self.args.should_save:
            self.save_hdet_schedule(folder)

    def save_hdet_schedule(self, folder: str) -> None:
        engine = self.hdet_engine
        if engine is None:
            return
        os.makedirs(folder, exist_ok=True)
        HDETSchedule.from_dict(engine.schedule_dict()).save_pretrained(folder)

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """The Trainer's model card, plus the ``hdet`` tag and a section with the adapted schedule and plot."""
        super().create_model_card(*args, **kwargs)
        self.add_hdet_to_model_card()

    def add_hdet_to_model_card(self, folder: str | None = None) -> None:
        """Add (or refresh) the HDET section and tag in ``folder/README.md`` (default ``output_dir``), if a card is
        there. Rank 0 only; a no-op before training (no schedule yet)."""
        folder = self.args.output_dir if folder is None else folder
        readme = os.path.join(folder, "README.md")
        if self.hdet_engine is None or not self.is_world_process_zero() or not os.path.isfile(readme):
            return
        plot = PLOT_FILENAME if os.path.isfile(os.path.join(folder, PLOT_FILENAME)) else None
        add_to_model_card(
            readme, HDETSchedule.from_dict(self.hdet_engine.schedule_dict()), plot_filename=plot
        )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        # A PEFT model's save_pretrained writes its own card into the folder, after training ended: add the
        # section to it. (Checkpoints and push_to_hub, the internal calls, get theirs from create_model_card.)
        if not _internal_call:
            self.add_hdet_to_model_card(output_dir)

    # `_load_optimizer_and_scheduler` is the one place where the Trainer restores per-run state on every
    # rank before the first step; HDET's per-rank state has to be restored at exactly that point.
    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        engine = self.hdet_engine
        if engine is None or checkpoint is None:
            return
        saved_world = _saved_world_size(checkpoint)
        if saved_world is None:
            raise FileNotFoundError(
                f"Checkpoint {checkpoint} has no HDET state (hdet_state_rank*.pt): it was not written by an HDET "
                "run. Resume it without --hdet, or resume from an HDET checkpoint."
            )
        # Same world size: every rank takes its own files. Growing: rank r continues saved rank r mod N.
        # Shrinking: rank r merges (averages) the optimizer moments of saved ranks r, r + M, r + 2M, ...
        # The shared HDET state is identical in every saved file.
        if saved_world > engine.world_size:
            sources = list(range(engine.rank, saved_world, engine.world_size))
        else:
            sources = [engine.rank % saved_world]
        state = torch.load(
            os.path.join(checkpoint, STATE_FILENAME.format(rank=sources[0])), weights_only=True
        )
        notes = engine.load_state_dict(state, elastic=saved_world != engine.world_size)
        optimizer_states = [
            torch.load(path, weights_only=True)
            for path in (os.path.join(checkpoint, OPTIMIZER_FILENAME.format(rank=s)) for s in sources)
            if os.path.isfile(path)
        ]
        if optimizer_states:
            self.optimizer.load_state_dict(_merge_optimizer_states(optimizer_states))
        if notes and self.is_world_process_zero():
            mapping = {
                r: list(range(r, saved_world, engine.world_size))
                if saved_world > engine.world_size
                else [r % saved_world]
                for r in range(engine.world_size)
            }
            logger.warning(
                "HDET elastic resume from %s: %s; per-rank optimizer state taken from saved ranks %s "
                "(several: their moments averaged).",
                checkpoint,
                "; ".join(notes),
                mapping,
            )
        self.lr_scheduler.reapply()


class HDETTrainer(HDETTrainerMixin, Trainer):
    """`transformers.Trainer` with HDET (see `HDETTrainerMixin`). Without ``--hdet`` it is exactly `Trainer`.

    Example:
        >>> from hdet_hf import HDETTrainer, HDETTrainingArguments
        >>> args = HDETTrainingArguments(output_dir="out", hdet=True, hdet_lr_spread=0.5, hdet_sync_interval=20)
        >>> trainer = HDETTrainer(model=model, args=args, train_dataset=train)  # doctest: +SKIP
        >>> trainer.train()  # launch with `accelerate launch --num_processes 4 train.py`  # doctest: +SKIP
    """


def _adding_hdet_section(create_model_card):
    """``create_model_card`` followed by `HDETTrainerMixin.add_hdet_to_model_card` (idempotent, so an override
    that does call super() still gets one section)."""

    @functools.wraps(create_model_card)
    def create_model_card_with_hdet(self, *args: Any, **kwargs: Any) -> Any:
        result = create_model_card(self, *args, **kwargs)
        self.add_hdet_to_model_card()
        return result

    create_model_card_with_hdet._adds_hdet_section = True
    return create_model_card_with_hdet


def _merge_optimizer_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The first state, with every floating-point tensor (moments) averaged over all given states."""
    merged = states[0]
    for index, param_state in merged["state"].items():
        for key, value in param_state.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and torch.is_floating_point(value):
                param_state[key] = torch.stack([s["state"][index][key] for s in states]).mean(0)
    return merged


def _saved_world_size(checkpoint: str) -> int | None:
    path = os.path.join(checkpoint, STATE_FILENAME.format(rank=0))
    if not os.path.isfile(path):
        return None
    return int(torch.load(path, weights_only=True)["world_size"])


def _prepare_model_without_ddp(prepare_model):
    """Accelerate's ``prepare_model`` with ``evaluation_mode=True``: device placement and mixed-precision
    autocast as usual, but no DistributedDataParallel wrapper. HDET's ``local`` mode must not all-reduce
    gradients, and Accelerate has no switch for "distributed, but do not wrap"."""

    @functools.wraps(prepare_model)
    def prepare(model, device_placement=None, evaluation_mode=False):
        return prepare_model(model, device_placement=device_placement, evaluation_mode=True)

    return prepare
