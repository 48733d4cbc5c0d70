"""HDETTrainer's start race: the replicas race copies of the initial weights (the rule: `start_race.py`).

Goes around the Trainer's loop on purpose: the race trains for ``--hdet_start_race_steps`` steps that are not
the run's (no gradient sync, no schedule, no callbacks, no logging of train loss; each step one replica's batch of
the run, gradient accumulation included) and then puts the initial
weights, optimizer state and random number generators back, so a race that decides "no raise" leaves the run
exactly as it would have been without it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from tqdm.auto import tqdm

from .config import DEFAULT_START_RACE_STEPS
from .probe_sample import DEFAULT_RACE_PROBE_SIZE
from .race_runner import RaceSteps, race_and_decide
from .start_race import RaceDecision, RaceGroups, race_groups, race_steps_for_run, share_note

if TYPE_CHECKING:
    from .trainer import HDETTrainerMixin

logger = logging.getLogger(__name__)

# Trainer attributes that a compute_loss may add to at every call (TRL's SFT, DPO and GRPO trainers keep their logged
# metrics in `_metrics`, SFT its token count in `_total_train_tokens`): the race puts them back as it found them.
LOSS_BOOKKEEPING = ("_metrics", "_total_train_tokens")

__all__ = ["race_steps", "run_start_race"]


def _race_examples(trainer: HDETTrainerMixin, steps: int, batch_size: int, warn: bool = True) -> list[list[Any]]:
    """``steps`` batches of train examples, the same on every rank (a generator seeded by ``--seed``), leaving out
    the probe's examples when the probe comes from the train set. ``warn``: say so where the set is too small."""
    dataset = trainer.train_dataset
    if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise ValueError(
            "--hdet_start_race_steps draws the race's batches from the train_dataset, which must be sized and "
            "indexable (not a streaming dataset). Drop --hdet_start_race_steps."
        )
    if hasattr(dataset, "column_names"):  # a datasets.Dataset: drop the columns the model does not take
        dataset = trainer._remove_unused_columns(dataset, description="start race")
    kept = trainer._train_indices_without_probe(len(dataset))
    if warn and len(kept) < steps * batch_size and trainer.is_world_process_zero():
        # Not an error: a small train set still races, but a user should know what the race's scores rest on.
        from_train = trainer._probe_dataset()[0] == "train_dataset"
        trains_on_probe = from_train and len(kept) == len(dataset)
        overlap = " (all of them, the probe's too: the set is no larger than the probe)" if trains_on_probe else ""
        taken = f" The probes take {len(dataset) - len(kept)} of the train set." if not trains_on_probe else ""
        probes = f"{taken} An eval_dataset gives the probes their own examples." if from_train else ""
        logger.warning(
            "HDET start race: %d train examples to race on%s, fewer than its %d steps x %d; its batches repeat "
            "examples.%s",
            len(kept),
            overlap,
            steps,
            batch_size,
            probes,
        )
    generator = torch.Generator().manual_seed(trainer.args.seed * 1_000_003 + 40)
    order = [kept[i] for i in torch.randperm(len(kept), generator=generator).tolist()]
    size = min(batch_size, len(order))
    return [[dataset[order[(i * size + j) % len(order)]] for j in range(size)] for i in range(steps)]


def race_steps(trainer: HDETTrainerMixin, max_steps: int) -> int:
    """How many steps this run races (`race_steps_for_run`): a set --hdet_start_race_steps as it is, the unset
    default only where the race can run. A default that cannot run is a log line, not an error."""
    config = trainer.args.hdet_config
    dataset = trainer.train_dataset
    steps, why_not = race_steps_for_run(
        config.start_race_steps,
        auto_lr=config.auto_lr,
        hsdp=bool(config.hsdp_shard_size),
        replicas=trainer.hdet_engine.world_size,
        max_steps=max_steps,
        sized_train_set=hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"),
    )
    if config.start_race_steps is None and not steps and config.start_race_lowers:
        raise ValueError(
            f"--hdet_start_race_lowers true lowers the start through the start race, but this run has none "
            f"({why_not}). Drop --hdet_start_race_lowers (unset, it lowers wherever the race runs), or set "
            "--hdet_start_race_steps to race anyway."
        )
    if config.start_race_steps is None and not steps and config.start_race_stall_ceiling:
        raise ValueError(
            f"--hdet_start_race_stall_ceiling caps the controller where the start race saw a copy stall, but this "
            f"run has no race ({why_not}). Drop it, or set --hdet_start_race_steps to race anyway."
        )
    if config.start_race_steps is None and not steps and config.auto_lr and trainer.is_world_process_zero():
        hint = _no_race_hint(
            short=max_steps < 2 * DEFAULT_START_RACE_STEPS,
            streaming=not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")),
            structural=bool(config.hsdp_shard_size) or trainer.hdet_engine.world_size < 2,
        )
        # A user who asked for auto-LR on a run the default race skips should hear it at default verbosity: from a
        # 10x-low LR the race is most of what the run recovers. Where nothing can change that (sharded or single
        # replicas, said elsewhere), INFO is enough.
        (logger.warning if hint else logger.info)(
            "HDET: no start race (unset --hdet_start_race_steps races only where it can): %s.%s", why_not, hint
        )
    return steps


def _no_race_hint(*, short: bool, streaming: bool, structural: bool) -> str:
    """What a user can do to get the start race back, or "" where nothing they set would (HSDP, one replica).

    Both causes at once need both fixes: a race length alone on a streaming set stops with the race's error for
    unsized data, so the hint says "and", not "or".
    """
    if structural:
        return ""
    fixes = []
    if streaming:
        fixes.append("give a sized train set (a datasets.Dataset, not an IterableDataset)")
    if short:
        fixes.append(
            "set --hdet_start_race_steps (at most half the run's steps) to race anyway: on 100-step runs of two tasks a "
            "30-step race recovered a 10x-low start on 6 of 6 seeds and raised a correct one on 1 of 6 (BENCHMARKS.md "
            "item 61)"
        )
    return (
        " The controller starts from the given LR alone, and from a far-off LR it recovers less (BENCHMARKS.md, items "
        "41-43): " + ", and ".join(fixes) + "."
    )


def run_start_race(trainer: HDETTrainerMixin, steps: int) -> RaceDecision | None:
    """Race ``steps`` steps, decide on every rank alike, and start the engine's controller at the decided scale.

    Returns None (and races nothing) with fewer than two replicas.
    """
    engine = trainer.hdet_engine
    args = trainer.args
    config = args.hdet_config
    if engine.world_size < 2:
        logger.warning("HDET: --hdet_start_race_steps needs two or more replicas; this run has one, no race.")
        return None
    model = trainer.accelerator.unwrap_model(trainer.model)
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    probe_size = trainer._race_probe_size()
    if config.start_race_probe_size is None and probe_size < DEFAULT_RACE_PROBE_SIZE and trainer.is_world_process_zero():
        logger.info(
            "HDET start race: scoring on %d examples of the train set (at most a quarter of it; an eval_dataset, or "
            "--hdet_start_race_probe_size, gives the race %d).",
            probe_size,
            DEFAULT_RACE_PROBE_SIZE,
        )
    probe_examples = trainer._probe_examples(probe_size, needed_by="--hdet_start_race_steps")
    # A race step takes one replica's batch of the run: per-device batch x gradient accumulation, in micro-batches of
    # the per-device size (the run's memory). A step on the micro-batch alone would race at a fraction of the batch
    # the run's LR is for, and a smaller batch favours a smaller LR.
    # Groups of ranks train each copy together, each rank on its share (`race_groups`): a copy's batch is
    # --hdet_start_race_batch_share of the run's global batch whatever the number of processes (the candidates), and
    # --hdet_start_race_lower_batch_share for the start and the copy below it; below one process's batch a rank takes
    # part of its batch.
    micro = args.per_device_train_batch_size
    accumulation = max(int(args.gradient_accumulation_steps or 1), 1)
    per_process = micro * accumulation
    shares = {
        "--hdet_start_race_batch_share": config.start_race_batch_share,
        "--hdet_start_race_lower_batch_share": config.start_race_lower_batch_share,
    }
    for flag, batch_share in shares.items():
        note = share_note(engine.world_size, batch_share, flag, per_process)
        if note is not None and trainer.is_world_process_zero():
            logger.info("HDET start race: %s", note)
    batches_of: dict[RaceGroups, list[list[Any]]] = {}

    def rank_batches(groups: RaceGroups) -> list[list[Any]]:
        """This rank's examples of each race step under ``groups``: the same steps' examples on every rank (drawn for
        the copy's whole batch), this rank's slice of them."""
        if groups not in batches_of:
            share = groups.rank_examples(per_process)
            # One warning for a small train set, on the first layout raced (the candidates': by default the larger).
            every = _race_examples(trainer, steps, share * groups.size, warn=not batches_of)
            batches_of[groups] = [examples[groups.member * share : (groups.member + 1) * share] for examples in every]
        return batches_of[groups]

    trained = [p for p in model.parameters() if p.requires_grad]
    # Under --fp16 on a GPU the Trainer steps through Accelerate's GradScaler; the race steps through a copy of it.
    run_scaler = getattr(trainer.accelerator, "scaler", None)

    def train_copy(
        multiplier: float, groups: RaceGroups, average_gradients: Callable[[list[nn.Parameter]], None] | None
    ) -> None:
        race_steps = RaceSteps(optimizer, trained, args.max_grad_norm, run_scaler, average_gradients)
        bar = tqdm(
            rank_batches(groups),
            desc=f"HDET start race (LR x {multiplier:.3g})",
            disable=not trainer.is_world_process_zero(),
            leave=False,
        )
        # The unwrapped model: its backward leaves gradients unsynchronised (each replica races its own LR).
        for examples in bar:
            chunks = [examples[i : i + micro] for i in range(0, len(examples), micro)]
            for chunk in chunks:
                batch = trainer._prepare_inputs(trainer.data_collator(chunk))
                with trainer.compute_loss_context_manager():
                    loss = trainer.compute_loss(model, batch)
                # The mean of the micro-batches' mean losses: no num_items_in_batch, whose count the Trainer gathers
                # across processes (a collective), while each replica races its own copy here.
                race_steps.backward(loss / len(chunks))
            race_steps.step()

    def score() -> torch.Tensor:
        """Each probe example's loss under the weights as they are (one at a time: the decision needs each
        example's loss for a paired standard error)."""
        return torch.stack(
            [trainer._plain_loss(trainer._prepare_inputs(trainer.data_collator([ex]))) for ex in probe_examples]
        )

    # A Trainer's compute_loss may keep running totals on the trainer (TRL's trainers: `_metrics`, logged at the next
    # log step, and `_total_train_tokens`); the race's steps are not the run's, so they are put back with the weights.
    bookkeeping = {name: copy.deepcopy(getattr(trainer, name)) for name in LOSS_BOOKKEEPING if hasattr(trainer, name)}
    try:
        lowers = config.start_race_lowers is not False
        decision = race_and_decide(model, optimizer, engine, config, train_copy, score, lowers, data_parallel=True)
    finally:
        for name, value in bookkeeping.items():
            setattr(trainer, name, value)
    # How many examples scored the copies: the standard errors behind the decision depend on it.
    # The record says what the decision was made on: the probe's examples and a copy's batch (examples a race step).
    record = {"steps": steps, "probe_size": len(probe_examples)}
    for key, batch_share in zip(("copy_batch", "lower_copy_batch"), shares.values()):
        groups = race_groups(engine.rank, engine.world_size, batch_share=batch_share)
        record[key] = groups.rank_examples(per_process) * groups.size
    engine.start_at_scale(decision.scale, race={**decision.to_dict(), **record})
    if trainer.is_world_process_zero():
        below_note = (
            ""
            if decision.below_probe_loss is None
            else f"; below the start (x {decision.below_multiplier:.3g}): {decision.below_probe_loss:.4f}"
        )
        if decision.lower_start_probe_loss is not None:  # the pair raced on its own share (a lowering's evidence)
            below_note += (
                f" against the start's {decision.lower_start_probe_loss:.4f} on "
                f"{record['lower_copy_batch']} examples a step (the candidates: {record['copy_batch']})"
            )
        logger.info(
            "HDET start race (%d steps, LR x %s): probe losses %s%s; the run starts at %.3gx --learning_rate "
            "(gap %.4f, %.1f standard errors).",
            steps,
            ", ".join(f"{m:.3g}" for m in decision.multipliers),
            ", ".join(f"{x:.4f}" for x in decision.probe_losses),
            below_note,
            decision.scale,
            decision.gap,
            decision.gap / decision.standard_error if decision.standard_error > 0 else float("inf"),
        )
    return decision
