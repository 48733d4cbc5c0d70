"""`HDETTrainer`: `transformers.Trainer` with HDET. Thin glue: the engine does the work.

Where it hooks into the Trainer loop (optimizer.step -> on_optimizer_step -> scheduler.step -> zero_grad
-> global_step += 1 -> on_step_end -> log/save/evaluate):
- ``training_step``: adds each micro-batch's loss to the engine (no communication);
- ``on_optimizer_step``: counts the optimizer step; every T steps the engine converges and, with auto-LR,
  moves the base LR and draws new multipliers;
- ``lr_scheduler.step``: `HDETLRScheduler` sets base x multiplier for the next step;
- ``on_step_end``/``on_epoch_end``: if the Trainer is about to evaluate or save, replicas are averaged first,
  so every evaluated or saved model is the ensemble mean (and every checkpoint is consistent);
- ``_save_checkpoint``: each rank writes its own HDET state and optimizer state (the Trainer saves only rank
  0's), atomically, and all ranks have written theirs before the Trainer saves and rotates old checkpoints out;
- ``_load_from_checkpoint``/``_load_optimizer_and_scheduler``: resume checks the checkpoint is complete and
  intact and was written by the same HDET configuration, then restores them (refused on every rank otherwise).

In ``local`` gradient mode Accelerate is asked not to wrap the model in DDP (see
`_prepare_model_without_ddp`), so no gradient collective runs between converges.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from transformers import Trainer, TrainerCallback
from transformers.trainer import SCHEDULER_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging as transformers_logging

from .engine import HDETEngine
from .engine_state import merge_optimizer_states
from .hsdp import (
    HSDPEngine,
    HSDPLayout,
    build_layout,
    check_no_accelerate_sharding,
    full_model_state_dict,
    resume_from_files,
    saved_files,
    shard_model,
    sharded_state,
)
from .hyperparameters import (
    Hyperparameter,
    attention_temperature_hyperparameter,
    dropout_hyperparameter,
    label_smoothing_hyperparameter,
    lr_param_groups,
    weight_decay_hyperparameter,
)
from .loss_signal import count_label_items, loss_divides_by_items, per_item_mean_loss
from .probe_sample import indices_without, probe_indices, race_probe_size
from .process import check_launch_seen, remember_backend
from .schedule_metadata import (
    MODEL_CARD_TAG,
    PLOT_FILENAME,
    SCHEDULE_FILENAME,
    add_to_model_card,
)
from .schedulers import HDETLRScheduler, one_cycle_base_schedule
from .score_window import COOLDOWN_SIGNALS
from .trainer_race import race_steps, run_start_race

__all__ = ["HDETTrainer", "HDETTrainerMixin", "HDETCallback", "STATE_FILENAME", "OPTIMIZER_FILENAME"]

logger = logging.getLogger(__name__)

STATE_FILENAME = "hdet_state_rank{rank}.pt"
OPTIMIZER_FILENAME = "hdet_optimizer_rank{rank}.pt"
# HSDP: this rank's parameter and optimizer shards (the state file is then named by global rank too).
SHARDS_FILENAME = "hdet_hsdp_rank{rank}.pt"
_PER_RANK_FILE = re.compile(r"hdet_(state|optimizer|hsdp)_rank(\d+)\.pt")
# The Trainer writes it last in a checkpoint (after weights, optimizer and scheduler), before rotation.
TRAINER_STATE_FILENAME = "trainer_state.json"


class HDETCallback(TrainerCallback):
    """Drives the engine from Trainer events. Added by `HDETTrainer`; not meant to be used alone."""

    def __init__(self, trainer: HDETTrainer) -> None:
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is not None and engine.step == 0 and (
            args.hdet_config.gradient_sync == "local" or isinstance(engine, HSDPEngine)
        ):
            # No DDP wrapper (local mode, HSDP) to make the replicas start equal: replica 0's weights.
            engine.broadcast_from_rank0()
        race = race_steps(self.trainer, state.max_steps) if engine is not None and engine.step == 0 else 0
        if race:
            decision = run_start_race(self.trainer, race)
            self.trainer.lr_scheduler.reapply()
            if decision is not None:  # the race's outcome in the logs (and report_to backends), at step 0
                self.trainer.log(
                    {
                        "hdet/start_race_scale": decision.scale,
                        **{
                            f"hdet/start_race_probe_loss_candidate{c}": x
                            for c, x in enumerate(decision.probe_losses)
                        },
                        **(
                            {}
                            if decision.below_probe_loss is None
                            else {"hdet/start_race_probe_loss_below": decision.below_probe_loss}
                        ),
                        # The start's copy on the lowering pair's share, where that is not the candidates'.
                        **(
                            {}
                            if decision.lower_start_probe_loss is None
                            else {"hdet/start_race_probe_loss_lower_start": decision.lower_start_probe_loss}
                        ),
                        "hdet/start_race_probe_loss_initial": decision.initial_probe_loss,
                    }
                )
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
        if engine is not None and (control.should_save or control.should_evaluate):
            if engine.force_converge() is not None:
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

    def on_train_end(self, args, state, control, **kwargs):
        engine = self.trainer.hdet_engine
        if engine is not None:
            # The trained model is the ensemble mean: give it the base values, not this rank's multiplied ones.
            engine.apply_base_values()
            found = engine.schedule().final_scale("lr") if state.is_world_process_zero else None
            if found is not None:
                logger.info(
                    "HDET: the controller ended at %.3gx --learning_rate (%.3g): a plain run at that LR trains at "
                    "the peak it settled on (BENCHMARKS.md, 'The controller', reading 43, says how close to a "
                    "sweep's best LR that was per task).",
                    found,
                    args.learning_rate * found,
                )
            if args.should_save:
                self.trainer.save_hdet_schedule(args.output_dir, plot=True)
                # A card written during training (TRL writes one at every checkpoint) gets the final schedule.
                self.trainer.add_hdet_to_model_card()


# The level `_follow_trainer_verbosity` last gave the "hdet_hf" logger (None: never): a level found there that is
# neither unset nor this one was set by the user, and is theirs to keep.
_level_we_set: int | None = None


def _follow_trainer_verbosity() -> None:
    """Our INFO lines (the start race's decision, why no race ran) follow the Trainer's own verbosity, which it set from
    --log_level / --log_level_replica (info on the main process in HF's example scripts). They still go through the
    script's logging handlers; a script that configures none sees warnings only. A level the user gave the "hdet_hf"
    logger is left alone."""
    global _level_we_set
    hdet_logger = logging.getLogger("hdet_hf")
    if hdet_logger.level in (logging.NOTSET, _level_we_set):
        _level_we_set = transformers_logging.get_verbosity()
        hdet_logger.setLevel(_level_we_set)


class HDETTrainerMixin:
    """HDET behaviour for any `transformers.Trainer` subclass (``class MyTrainer(HDETTrainerMixin, Seq2SeqTrainer)``).

    Runs HDET when ``args.hdet`` is set (an `HDETTrainingArguments`).

    Without ``--hdet`` nothing changes: same losses, same checkpoints as `Trainer`.

    """

    # Every instance registers here so `hdet_hf.launch` can tell whether a stock script built a Trainer.
    instances_created: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.hdet_engine: HDETEngine | None = None
        self.hdet_layout: HSDPLayout | None = None
        self._extra_hyperparameters: list[Hyperparameter] = []
        HDETTrainerMixin.instances_created += 1
        super().__init__(*args, **kwargs)
        _follow_trainer_verbosity()
        remember_backend()  # for `hdet_hf.launch`'s exit, should the script destroy the group itself
        if self.hdet_enabled:
            check_launch_seen(
                self.args.world_size,
                "the Trainer",
                "On a machine without GPUs pass --use_cpu (HDETTrainingArguments sets it by itself when it is "
                "created after the launch), or set ACCELERATE_USE_CPU=1.",
            )
            if self.args.hdet_config.hsdp_shard_size:
                # HSDP: HDET shards the model with FSDP2 on its own 2-D mesh (see `hdet_hf.hsdp`), before the
                # optimizer exists, so the optimizer is built on the sharded parameters.
                self.hdet_layout = build_layout(self.args.hdet_config, self.accelerator.device.type)
                shard_model(self.model, self.hdet_layout)
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
        if not self.hdet_enabled:
            return
        config = self.args.hdet_config
        check_no_accelerate_sharding(self.accelerator, hsdp=bool(config.hsdp_shard_size))
        if config.gradient_sync == "local" or config.hsdp_shard_size:
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
            # OneCycle with the Trainer's --learning_rate as peak.
            self.lr_scheduler = one_cycle_base_schedule(
                optimizer, num_training_steps, self.args.get_warmup_steps(num_training_steps)
            )
            self._created_lr_scheduler = True
        else:
            super().create_scheduler(num_training_steps, optimizer)
        # The engine's optimizer must expose the real param groups and state (Accelerate wraps it).
        raw_optimizer = getattr(optimizer, "optimizer", optimizer)
        if self.hdet_layout is not None:
            self.hdet_engine = HSDPEngine(
                config, self.model, raw_optimizer, num_training_steps, layout=self.hdet_layout
            )
        else:
            self.hdet_engine = HDETEngine(config, self.model, raw_optimizer, num_training_steps)
        self._register_hyperparameters(self.hdet_engine, raw_optimizer)
        # The probe batch is only needed when a controller compares replicas on it.
        if config.controller_signal != "train_loss" and any(h.auto for h in self.hdet_engine.hparams.values()):
            self.hdet_engine.probe_fn = self._make_probe_fn(config.probe_size)
            if config.controller_signal in COOLDOWN_SIGNALS:
                if self.hdet_layout is not None:
                    # A cool-down on a sharded model would run FSDP's collectives inside the score: not built.
                    raise ValueError(
                        f"--hdet_controller_signal {config.controller_signal} is not supported with "
                        "--hdet_hsdp_shard_size; use train_and_averaged_probe."
                    )
                self.hdet_engine.cooldown_loss_fn = self._make_cooldown_loss_fn(
                    config.cooldown_batch_size or config.probe_size, config.seed
                )
                self.hdet_engine.cooldown_max_grad_norm = self.args.max_grad_norm or None
        self.lr_scheduler = HDETLRScheduler(self.lr_scheduler, self.hdet_engine)
        return self.lr_scheduler

    def _make_probe_fn(self, size: int):
        """Loss of this replica on one batch that is identical on every rank (held-out data if there is any)."""
        batch = self._prepare_inputs(self.data_collator(self._probe_examples(size)))

        def probe() -> float:
            return float(self._plain_loss(batch))

        return probe

    def _plain_loss(self, batch: dict[str, Any]) -> torch.Tensor:
        """The model's loss on ``batch`` in eval mode, without gradients and without label smoothing."""
        model = self.model
        was_training = model.training
        model.eval()
        # Score plain NLL: each rank's own label smoothing would bias the comparison. A copy of the
        # batch, because compute_loss pops "labels" when a label smoother is active.
        smoother, self.label_smoother = self.label_smoother, None
        try:
            with torch.no_grad(), self.compute_loss_context_manager():
                return self.compute_loss(model, dict(batch)).detach()
        finally:
            self.label_smoother = smoother
            model.train(was_training)

    def _probe_dataset(self) -> tuple[str | None, Any, list[str]]:
        """Where the shared probe comes from: the eval set if it can give a batch, else the train set (the help text
        of --hdet_probe_size says so). Returns (name, dataset, problems); name and dataset are None when neither can
        give one, and problems says why in words."""
        problems = []
        for name, candidate in (("eval_dataset", self.eval_dataset), ("train_dataset", self.train_dataset)):
            if isinstance(candidate, dict):
                candidate = next(iter(candidate.values()), None)
            if candidate is None:
                problems.append(f"there is no {name}")
            elif not hasattr(candidate, "__len__"):
                problems.append(f"the {name} has no length (a streaming dataset)")
            elif len(candidate) == 0:
                problems.append(f"the {name} is empty")
            else:
                return name, candidate, problems
        return None, None, problems

    def _probe_examples(self, size: int, needed_by: str | None = None) -> list[Any]:
        """The shared probe's examples: ``size`` of the eval set, else of the train set, chosen by
        --hdet_probe_sampling (`probe_sample.probe_indices`). ``needed_by`` names the flag that needs them in the
        error (default: the controller signal)."""
        _, dataset, problems = self._probe_dataset()
        if dataset is None:
            if needed_by is not None:
                raise ValueError(
                    f"{needed_by} scores the replicas on a shared probe batch from the eval_dataset, else the "
                    f"train_dataset, but {' and '.join(problems)}. Pass a non-empty sized eval_dataset, or drop "
                    f"{needed_by}."
                )
            raise ValueError(
                f"--hdet_controller_signal {self.args.hdet_config.controller_signal} draws its shared probe batch "
                f"from the eval_dataset, else the train_dataset, but {' and '.join(problems)}. Pass a non-empty "
                "sized eval_dataset, or use --hdet_controller_signal train_loss."
            )
        indices = probe_indices(len(dataset), size, self.args.hdet_config.probe_sampling)
        if hasattr(dataset, "select"):  # a datasets.Dataset: drop the columns the model does not take
            dataset = self._remove_unused_columns(dataset.select(indices), description="probe")
            return [dataset[i] for i in range(len(indices))]
        return [dataset[i] for i in indices]

    def _race_probe_size(self) -> int:
        """The start race's probe size (`probe_sample.race_probe_size`): unset, capped where it comes from the train
        set."""
        config = self.args.hdet_config
        source, dataset, _ = self._probe_dataset()
        train_set_size = len(dataset) if source == "train_dataset" else None
        return race_probe_size(config.start_race_probe_size, config.probe_size, train_set_size)

    def _train_indices_without_probe(self, dataset_size: int) -> list[int]:
        """The train set's indices that the start race and the cool-downs may train on: all but the probes' (the
        controller's and the race's) when the probes come from the train set (no usable eval set: none, an empty one
        or a streaming one)."""
        config = self.args.hdet_config
        source, _, _ = self._probe_dataset()
        if source != "train_dataset":
            return list(range(dataset_size))
        probes = {
            i
            for size in (config.probe_size, self._race_probe_size())
            for i in probe_indices(dataset_size, size, config.probe_sampling)
        }
        return indices_without(dataset_size, sorted(probes))

    def _make_cooldown_loss_fn(self, batch_size: int, seed: int) -> Callable[[int], torch.Tensor]:
        """Training loss of the unwrapped model on cool-down batch ``i`` of the current converge.

        Batches of ``batch_size`` train examples, drawn afresh at every converge from a
        generator seeded by (seed, step, i): the same on every rank, so the cool-downs are paired. When the
        probe batch also comes from the train set (no eval set), its examples are left out.
        """
        dataset = self.train_dataset
        if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise ValueError(
                f"--hdet_controller_signal {self.args.hdet_config.controller_signal} draws its cool-down batches "
                "from the train_dataset, which must be sized and indexable (not a streaming dataset). Use "
                "--hdet_controller_signal train_and_averaged_probe."
            )
        if hasattr(dataset, "column_names"):  # a datasets.Dataset: drop the columns the model does not take
            dataset = self._remove_unused_columns(dataset, description="cool-down")
        kept = self._train_indices_without_probe(len(dataset))
        size = min(batch_size, len(kept))
        engine = self.hdet_engine

        def cooldown_loss(i: int) -> torch.Tensor:
            generator = torch.Generator().manual_seed((seed * 1_000_003 + engine.step) * 101 + i)
            rows = [kept[j] for j in torch.randperm(len(kept), generator=generator)[:size].tolist()]
            batch = self._prepare_inputs(self.data_collator([dataset[j] for j in rows]))
            model = self.accelerator.unwrap_model(self.model)
            model.train()
            with self.compute_loss_context_manager():
                return self.compute_loss(model, dict(batch))

        return cooldown_loss

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
        engine = self.hdet_engine
        # Counted before compute_loss, which may pop "labels" from the inputs.
        local_items = (
            count_label_items(inputs, bool(getattr(self, "_loss_shifts_labels", False)))
            if engine is not None
            else None
        )
        if engine is not None and not getattr(self, "_hdet_checked_loss_kwargs", False):
            self._check_loss_takes_items(model, inputs, num_items_in_batch)
        loss = super().training_step(model, inputs, num_items_in_batch)
        if engine is not None:
            engine.add_loss(*self._per_item_loss(loss, local_items, num_items_in_batch))
            # Synchronous warm-up: average gradients after the last micro-batch's backward, before clipping.
            if engine.in_sync_warmup and self.accelerator.gradient_state.sync_gradients:
                engine.average_gradients()
        return loss

    def _check_loss_takes_items(self, model, inputs, num_items_in_batch) -> None:
        """At the first micro-batch: stop the Trainer from scaling a loss that ignores ``num_items_in_batch``.

        The Trainer decides from the ``forward`` signature alone (see `hdet_hf.loss_signal.loss_divides_by_items`);
        for a model whose loss is a plain mean it multiplies losses and gradients by the process count and the
        replicas would be compared on token shares. We test the model instead (two no-grad forwards, once) and
        set the Trainer's own switch, as transformers does per model (`accepts_loss_kwargs = False`).
        """
        attempts = getattr(self, "_hdet_loss_kwargs_attempts", 0) + 1
        self._hdet_loss_kwargs_attempts = attempts
        if not self.model_accepts_loss_kwargs or self.compute_loss_func is not None or num_items_in_batch is None:
            self._hdet_checked_loss_kwargs = True
            return
        # On the unwrapped model: DDP's forward would broadcast buffers, an extra collective. No collective is
        # needed to agree: the answer is a property of the model's code, the same on every rank. A rank whose
        # micro-batch cannot tell (zero loss, e.g. nothing labelled) asks again at its next one, a few times.
        uses = loss_divides_by_items(
            self.compute_loss, self.accelerator.unwrap_model(model), self._prepare_inputs(inputs), num_items_in_batch
        )
        if uses is None and attempts < 8:
            return
        self._hdet_checked_loss_kwargs = True
        if uses is False:
            self.model_accepts_loss_kwargs = False
            logger.warning(
                "HDET: %s takes **kwargs but its loss does not divide by num_items_in_batch, so the Trainer would "
                "multiply the mean loss (and the gradients) by the number of processes. Treating it as a mean loss; "
                "set `model.accepts_loss_kwargs = False` to make this explicit.",
                type(self.accelerator.unwrap_model(model)).__name__,
            )

    def _per_item_loss(self, loss, local_items, num_items_in_batch):
        """This rank's per-token mean loss of the micro-batch and its token count (see `hdet_hf.loss_signal`).

        The flags mirror `Trainer.compute_loss`/`training_step` (transformers 5.x): whether the loss was divided
        by ``num_items_in_batch``, multiplied by the process count, and scaled for gradient accumulation.
        """
        takes_items = bool(self.model_accepts_loss_kwargs or self.compute_loss_func is not None)
        normalised = takes_items and num_items_in_batch is not None
        scale = 1.0
        if normalised and self.args.average_tokens_across_devices:
            scale = float(max(self.accelerator.num_processes // max(self.get_tp_size(), 1), 1))
        scaled_for_accumulation = getattr(self, "loss_is_scaled_for_ga", None)
        if scaled_for_accumulation is None:
            scaled_for_accumulation = normalised or self.compute_loss_func is not None
        return per_item_mean_loss(
            loss,
            local_items=local_items,
            num_items_in_batch=num_items_in_batch,
            normalised_by_items=normalised,
            loss_scale=scale,
            scaled_for_accumulation=bool(scaled_for_accumulation),
            accumulation_steps=int(getattr(self, "current_gradient_accumulation_steps", 1) or 1),
        )

    # ------------------------------------------------------------------------------- state
    def save_hdet_state(self, folder: str) -> None:
        """Each rank writes its HDET state and its own optimizer state (replicas differ between converges)."""
        engine = self.hdet_engine
        if engine is None:
            return
        os.makedirs(folder, exist_ok=True)
        if isinstance(engine, HSDPEngine):
            # Named by global rank: the ranks of a replica group share the engine's (replica) rank.
            rank = dist.get_rank()
            _atomic_save(engine.state_dict(), os.path.join(folder, STATE_FILENAME.format(rank=rank)))
            shards = sharded_state(self.accelerator.unwrap_model(self.model), self.optimizer, engine.layout)
            _atomic_save(shards, os.path.join(folder, SHARDS_FILENAME.format(rank=rank)))
        else:
            _atomic_save(engine.state_dict(), os.path.join(folder, STATE_FILENAME.format(rank=engine.rank)))
        if not engine.config.average_optimizer_state and not isinstance(engine, HSDPEngine):
            _atomic_save(
                self.optimizer.state_dict(), os.path.join(folder, OPTIMIZER_FILENAME.format(rank=engine.rank))
            )
        if self.args.should_save:
            self.save_hdet_schedule(folder)

    def _save_checkpoint(self, model, trial) -> None:
        # HDET's per-rank files go first, and every rank has written them before rank 0 saves the Trainer's
        # files and rotates old checkpoints out (--save_total_limit): a process killed while saving leaves
        # the previous checkpoint in place and this one without trainer_state.json (refused on resume).
        engine = self.hdet_engine
        if engine is not None:
            run_dir = self._get_output_dir(trial=trial)
            self.save_hdet_state(os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"))
            if engine.world_size > 1 or isinstance(engine, HSDPEngine):
                dist.barrier(group=None if isinstance(engine, HSDPEngine) else engine.group)
        super()._save_checkpoint(model, trial)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if self.hdet_layout is None:
            return super()._save_optimizer_and_scheduler(output_dir)
        # HSDP: the optimizer's shards are in each rank's hdet_hsdp_rank*.pt; the scheduler is the same everywhere.
        if self.args.should_save:
            torch.save(self.lr_scheduler.state_dict(), os.path.join(output_dir, SCHEDULER_NAME))

    def save_hdet_schedule(self, folder: str, plot: bool = False) -> None:
        """Write ``hdet_schedule.json`` into ``folder`` (and, with ``plot``, draw ``hdet_schedule.png``)."""
        engine = self.hdet_engine
        if engine is None:
            return
        schedule = engine.schedule()
        schedule.save_pretrained(folder)
        if plot:
            # Imported here: matplotlib is slow to import, and only the end of training draws.
            from .plotting import plot_schedule

            plot_schedule(schedule, os.path.join(folder, PLOT_FILENAME))

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
        add_to_model_card(readme, self.hdet_engine.schedule(), plot_filename=plot)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        if self.hdet_layout is not None:
            # HSDP: every rank joins the gather of the full weights (the groups hold one model after a converge);
            # rank 0 writes it as a plain checkpoint that loads with from_pretrained.
            state_dict = full_model_state_dict(self.model)
            self._save(output_dir if output_dir is not None else self.args.output_dir, state_dict=state_dict)
            if self.args.push_to_hub and not _internal_call:
                self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)
        else:
            super().save_model(output_dir, _internal_call)
        # A PEFT model's save_pretrained writes its own card into the folder, after training ended: add the
        # section to it. (Checkpoints and push_to_hub, the internal calls, get theirs from create_model_card.)
        if not _internal_call:
            self.add_hdet_to_model_card(output_dir)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        # The first thing a resume reads: refuse an incomplete, damaged or foreign checkpoint before the weights.
        _check_checkpoint_files(resume_from_checkpoint, hdet=self.hdet_enabled)
        if self.hdet_layout is not None:
            return  # HSDP: each rank loads its own shards with the optimizer (`_load_hsdp_checkpoint`)
        super()._load_from_checkpoint(resume_from_checkpoint, model)

    # `_load_optimizer_and_scheduler` is the one place where the Trainer restores per-run state on every
    # rank before the first step; HDET's per-rank state has to be restored at exactly that point.
    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        engine = self.hdet_engine
        if engine is None or checkpoint is None:
            return super()._load_optimizer_and_scheduler(checkpoint)
        # Problems are found per rank (each reads its own files) but raised on every rank, so none hangs.
        error: Exception | None = None
        try:
            _check_checkpoint_files(checkpoint, hdet=True)
            saved_world, shared = _read_saved_state(checkpoint)
            self._check_run_length(checkpoint, shared)
            _check_sharding_matches(checkpoint, shared, hsdp=isinstance(engine, HSDPEngine))
        except (ValueError, FileNotFoundError) as exc:
            error = exc
        _raise_on_every_rank(error, engine)
        if isinstance(engine, HSDPEngine):
            return self._load_hsdp_checkpoint(checkpoint, engine, saved_world, shared)
        super()._load_optimizer_and_scheduler(checkpoint)
        # Same world size: every rank takes its own files. Growing: rank r continues saved rank r mod N.
        # Shrinking: rank r merges (averages) the optimizer moments of saved ranks r, r + M, r + 2M, ...
        # The shared HDET state is identical in every saved file.
        if saved_world > engine.world_size:
            sources = list(range(engine.rank, saved_world, engine.world_size))
        else:
            sources = [engine.rank % saved_world]
        notes: list[str] = []
        try:
            path = os.path.join(checkpoint, STATE_FILENAME.format(rank=sources[0]))
            state = _load_checkpoint_file(path, checkpoint)
            notes = engine.load_state_dict(state, elastic=saved_world != engine.world_size, source=path)
            paths = [os.path.join(checkpoint, OPTIMIZER_FILENAME.format(rank=s)) for s in sources]
            if os.path.isfile(paths[0]):  # absent when the run averaged optimizer state (optimizer.pt holds it)
                optimizer_states = [_load_checkpoint_file(p, checkpoint) for p in paths]
                try:
                    self.optimizer.load_state_dict(merge_optimizer_states(optimizer_states))
                except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as exc:
                    raise ValueError(
                        f"{paths[0]} does not fit this run's optimizer ({type(exc).__name__}: {exc}). Resume with "
                        "the model, optimizer and param groups (--hdet_lr_groups) of the run that saved it."
                    ) from exc
        except (ValueError, FileNotFoundError) as exc:
            error = exc
        _raise_on_every_rank(error, engine)
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

    def _load_hsdp_checkpoint(
        self, checkpoint: str, engine: HSDPEngine, saved_replicas: int, shared: dict[str, Any]
    ) -> None:
        """HSDP resume: scheduler, then this rank's parameter and optimizer shards and HDET state.

        The number of replica groups may change (as the Trainer's elastic resume), and so may the shard size
        (the saved group's shards are re-cut for this layout: `hdet_hf.hsdp.resume_from_files`)."""
        layout = engine.layout
        error: Exception | None = None
        notes: list[str] = []
        try:
            saved_shard = shared["hsdp"]["shard_size"]  # an HSDP checkpoint (`_check_sharding_matches`)
            self.lr_scheduler.load_state_dict(
                _load_checkpoint_file(os.path.join(checkpoint, SCHEDULER_NAME), checkpoint)
            )
            first = saved_files(layout, saved_replicas, saved_shard)[0][0]  # the file errors name
            notes = resume_from_files(
                lambda rank, mmap: _load_checkpoint_file(
                    os.path.join(checkpoint, SHARDS_FILENAME.format(rank=rank)), checkpoint, mmap=mmap
                ),
                self.accelerator.unwrap_model(self.model),
                self.optimizer,
                engine,
                saved_replicas=saved_replicas,
                saved_shard_size=saved_shard,
                read_engine_state=lambda rank: _load_checkpoint_file(
                    os.path.join(checkpoint, STATE_FILENAME.format(rank=rank)), checkpoint
                ),
                source=os.path.join(checkpoint, STATE_FILENAME.format(rank=first)),
            )
        except (ValueError, FileNotFoundError, KeyError) as exc:
            error = exc if not isinstance(exc, KeyError) else ValueError(f"{checkpoint}: {exc}")
        _raise_on_every_rank(error, engine)
        if notes and self.is_world_process_zero():
            logger.warning("HDET elastic resume from %s: %s", checkpoint, "; ".join(notes))
        self.lr_scheduler.reapply()

    def _check_run_length(self, checkpoint: str, shared: dict[str, Any]) -> None:
        """A resumed run must have the saved length: OneCycle's shape, the controller warm-up and the end of
        exploration are fractions of it (OneCycle's restored total_steps would stop a longer run mid-way)."""
        engine = self.hdet_engine
        assert engine is not None
        saved = shared.get("total_steps")
        if saved is None:  # written before the state recorded it: OneCycle's scheduler.pt has it
            scheduler_path = os.path.join(checkpoint, "scheduler.pt")
            if engine.config.base_schedule == "one_cycle" and os.path.isfile(scheduler_path):
                saved = _load_checkpoint_file(scheduler_path, checkpoint).get("total_steps")
        if saved is not None and saved != engine.total_steps:
            raise ValueError(
                f"Checkpoint {checkpoint} was saved by a run of {saved} optimizer steps, but this run has "
                f"{engine.total_steps} (from --max_steps, or --num_train_epochs and the batch size). HDET's "
                "schedule (OneCycle's shape with --hdet_base_schedule one_cycle), the controller warm-up and the end "
                f"of exploration are fixed by the run length, so it cannot continue with another one. Resume with "
                f"--max_steps {saved}, or start a new run from the checkpoint's weights "
                "(e.g. --model_name_or_path <checkpoint>)."
            )


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


def _atomic_save(obj: Any, path: str) -> None:
    """torch.save to a temporary file, then rename: a reader never sees a half-written file."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _load_checkpoint_file(path: str, checkpoint: str, mmap: bool = False) -> Any:
    """``torch.load(weights_only=True)`` with errors that name the file and what to do (``mmap``: tensors are
    read from disk when used)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Checkpoint {checkpoint} has no {os.path.basename(path)}. {_resume_hint(checkpoint)}"
        )
    try:
        return torch.load(path, weights_only=True, map_location="cpu", mmap=mmap)
    except Exception as exc:  # truncated zip, wrong pickle, ...: all mean the same to the user
        raise ValueError(
            f"Checkpoint file {path} could not be read ({type(exc).__name__}: {str(exc)[:200]}): it is damaged or "
            f"truncated. {_resume_hint(checkpoint)}"
        ) from exc


def _missing_checkpoint_files(checkpoint: str) -> tuple[bool, list[str]]:
    """(whether ``checkpoint`` was written by an HDET run, the files an HDET resume needs that are absent)."""
    names = set(os.listdir(checkpoint)) if os.path.isdir(checkpoint) else set()
    per_rank = {(m.group(1), int(m.group(2))) for m in map(_PER_RANK_FILE.fullmatch, names) if m}
    if not per_rank and SCHEDULE_FILENAME not in names:
        return False, []
    state_ranks = sorted(r for kind, r in per_rank if kind == "state")
    world, averaged, hsdp = None, None, None
    if state_ranks:
        shared = _load_checkpoint_file(os.path.join(checkpoint, STATE_FILENAME.format(rank=state_ranks[0])), checkpoint)
        world = shared.get("world_size") if isinstance(shared, dict) else None
        hsdp = shared.get("hsdp") if isinstance(shared, dict) else None
        config = shared.get("config") if isinstance(shared, dict) else None
        if isinstance(config, dict):
            averaged = bool(config.get("average_optimizer_state"))
    if not isinstance(world, int) or world < 1:
        world = max([r for _, r in per_rank], default=0) + 1
    if averaged is None:  # a state without its config: optimizer files are expected if any was written
        averaged = not any(kind == "optimizer" for kind, _ in per_rank)
    if isinstance(hsdp, dict) and isinstance(hsdp.get("shard_size"), int):
        # HSDP: one state file and one shards file per process (replica groups x shard size).
        ranks = range(world * hsdp["shard_size"])
        expected = [STATE_FILENAME.format(rank=r) for r in ranks] + [SHARDS_FILENAME.format(rank=r) for r in ranks]
        return True, [name for name in [*expected, TRAINER_STATE_FILENAME] if name not in names]
    expected = [STATE_FILENAME.format(rank=r) for r in range(world)]
    if not averaged:
        expected += [OPTIMIZER_FILENAME.format(rank=r) for r in range(world)]
    expected.append(TRAINER_STATE_FILENAME)
    return True, [name for name in expected if name not in names]


def _check_checkpoint_files(checkpoint: str, hdet: bool) -> None:
    """Refuse a checkpoint that cannot be resumed as asked, naming the files and the fix."""
    is_hdet, missing = _missing_checkpoint_files(checkpoint)
    if not hdet:
        if is_hdet:
            raise ValueError(
                f"Checkpoint {checkpoint} was written by an HDET run (it holds hdet_state_rank*.pt): resuming it "
                "without --hdet would load an HDET scheduler and rank 0's optimizer state into a plain run. Resume "
                "it with --hdet and the same --hdet_* flags, or start a new run from its weights "
                "(e.g. --model_name_or_path <checkpoint>)."
            )
        return
    if not is_hdet:
        raise FileNotFoundError(
            f"Checkpoint {checkpoint} has no HDET state (hdet_state_rank*.pt): it was not written by an HDET "
            "run. Resume it without --hdet, or resume from an HDET checkpoint."
        )
    if missing:
        raise FileNotFoundError(
            f"Checkpoint {checkpoint} is incomplete: {', '.join(missing)} missing (a process stopped while "
            f"saving it). {_resume_hint(checkpoint)}"
        )


def _resume_hint(checkpoint: str) -> str:
    """Point at the newest earlier checkpoint that is complete, if there is one."""
    parent, name = os.path.split(os.path.normpath(checkpoint))
    match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
    if match and os.path.isdir(parent):
        steps = sorted(
            (int(m.group(1)) for m in (re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", n) for n in os.listdir(parent)) if m),
            reverse=True,
        )
        for step in steps:
            if step >= int(match.group(1)):
                continue
            earlier = os.path.join(parent, f"{PREFIX_CHECKPOINT_DIR}-{step}")
            try:
                is_hdet, missing = _missing_checkpoint_files(earlier)
            except (ValueError, FileNotFoundError):
                continue
            if is_hdet and not missing:
                return f"Resume from {earlier} (the newest complete checkpoint before it) instead."
    return "Resume from another checkpoint."


def _read_saved_state(checkpoint: str) -> tuple[int, dict[str, Any]]:
    """The saved world size and the shared part of the saved state (rank 0's file)."""
    path = os.path.join(checkpoint, STATE_FILENAME.format(rank=0))
    state = _load_checkpoint_file(path, checkpoint)
    world = state.get("world_size") if isinstance(state, dict) else None
    if not (isinstance(world, int) and not isinstance(world, bool) and world >= 1):
        raise ValueError(
            f"{path}: field 'world_size' must be an integer >= 1, but got {world!r}. The checkpoint is damaged or "
            "was edited; resume from another checkpoint."
        )
    return world, state


def _check_sharding_matches(checkpoint: str, shared: dict[str, Any], hsdp: bool) -> None:
    """An HSDP checkpoint resumes with HSDP (any layout) and a whole-replica one without: the saved optimizer and
    HDET tensors are shards in one and whole in the other."""
    saved = shared.get("hsdp")
    if isinstance(saved, dict) and not hsdp:
        raise ValueError(
            f"Checkpoint {checkpoint} was saved with --hdet_hsdp_shard_size {saved.get('shard_size')} "
            f"({saved.get('num_replicas')} replica groups), but this run has no --hdet_hsdp_shard_size: its "
            "optimizer and HDET state are sharded and do not load into whole replicas. Resume with "
            "--hdet_hsdp_shard_size N (any N that leaves at least 2 replica groups; the shards are re-cut), or start "
            "a new run from the checkpoint's weights (e.g. --model_name_or_path <checkpoint>: model.safetensors is "
            "the ensemble's mean)."
        )
    if hsdp and not (isinstance(saved, dict) and isinstance(saved.get("shard_size"), int) and saved["shard_size"] >= 1):
        raise ValueError(
            f"Checkpoint {checkpoint} was saved without HSDP (every process a whole replica), but this run has "
            "--hdet_hsdp_shard_size: HDET resumes a whole-replica checkpoint without sharding only. Resume without "
            "--hdet_hsdp_shard_size, or start a new run from the checkpoint's weights (e.g. "
            "--model_name_or_path <checkpoint>)."
        )


def _raise_on_every_rank(error: Exception | None, engine: HDETEngine) -> None:
    """Raise ``error`` here, and on every other rank too (one small collective), so no rank trains on alone."""
    # HSDP: the engine's group is one column of the mesh; a problem must stop every process, not only that column.
    hsdp = isinstance(engine, HSDPEngine)
    group = None if hsdp else engine.group
    if engine.world_size > 1 or hsdp:
        gathered: list[Any] = [None] * dist.get_world_size(group)
        mine = None if error is None else (type(error).__name__, str(error))
        dist.all_gather_object(gathered, mine, group=group)
        if error is None:
            failed = [(rank, item) for rank, item in enumerate(gathered) if item is not None]
            if failed:
                rank, (kind, message) = failed[0]
                cls = FileNotFoundError if kind == "FileNotFoundError" else ValueError
                raise cls(f"rank {rank}: {message}")
    if error is not None:
        raise error


def _prepare_model_without_ddp(prepare_model):
    """Accelerate's ``prepare_model`` with ``evaluation_mode=True``: device placement and mixed-precision
    autocast as usual, but no DistributedDataParallel wrapper. HDET's ``local`` mode must not all-reduce
    gradients, and Accelerate has no switch for "distributed, but do not wrap"."""

    @functools.wraps(prepare_model)
    def prepare(model, device_placement=None, evaluation_mode=False):
        return prepare_model(model, device_placement=device_placement, evaluation_mode=True)

    return prepare
