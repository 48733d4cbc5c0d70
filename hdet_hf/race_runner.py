"""Running the start race's copies and deciding on every rank alike (the rule itself: `start_race.py`).

Shared by the shells that race: HDETTrainer (`trainer_race.py`, the Trainer's data and compute_loss), and the
drop-in scheduler and the Accelerate API (`OneCycleAutoLR.start_race`, `HDETAccelerate.start_race`, through
`race_user_batches`: the user's batches and loss function). A shell says how one copy
trains (``train_copy``: the race's steps from the weights as they are, at the LRs already set) and how the weights
are scored (``score``: one loss per probe example, the same examples on every rank); this module owns the rest:
which replica races which copy, putting the initial weights, optimizer state and random streams back before every
copy and after the race (so a race that changes nothing leaves the run bit for bit as it was), the one gather of
the probe losses, and the decision.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from .collectives import fused_average_, gather_rows
from .start_race import (
    RaceDecision,
    RaceGroups,
    below_multiplier,
    confirm_with_below,
    decide_lower,
    decide_race,
    race_assignment,
    race_groups,
    race_multipliers,
    stall_ceiling,
)

if TYPE_CHECKING:
    from .config import HDETConfig
    from .engine import HDETEngine

__all__ = ["RaceSteps", "peak_lr", "race_and_decide", "race_user_batches"]


def peak_lr(group: dict) -> float:
    """A param group's peak LR under its schedule: OneCycleLR's ``max_lr``, else the schedulers' ``initial_lr``
    (the Trainer's schedules are LambdaLR factors of it that peak at 1), else its current LR."""
    return float(group.get("max_lr", group.get("initial_lr", group["lr"])))


class RaceSteps:
    """One race copy's backward passes and optimizer steps, through the run's GradScaler where it has one (fp16).

    Without it an fp16 race would step on unscaled gradients (small ones underflow to zero in half precision, so a
    copy learns less than the run would at its LR) and a step with an overflow would write non-finite weights where
    the run skips it. Each copy takes a fresh scaler with the run's state (scale, growth tracker), so every copy
    starts alike and the run's own scaler is left as it was; it skips and backs off as the run's would.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        parameters: list[nn.Parameter],
        max_grad_norm: float | None,
        run_scaler: torch.amp.GradScaler | None,
        average_gradients: Callable[[list[nn.Parameter]], None] | None = None,
    ) -> None:
        self.optimizer, self.parameters, self.max_grad_norm = optimizer, parameters, max_grad_norm
        # With several ranks training one copy (`start_race.race_groups`): averages their gradients before a step.
        self.average_gradients = average_gradients
        self.scaler: torch.amp.GradScaler | None = None
        if run_scaler is not None and run_scaler.is_enabled():
            self.scaler = torch.amp.GradScaler(run_scaler._device)
            self.scaler.load_state_dict(run_scaler.state_dict())

    def backward(self, loss: torch.Tensor) -> None:
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self) -> None:
        """Average over the copy's ranks (if several train it), unscale (before clipping, as the run does), clip,
        step (skipped by the scaler on an overflow: an overflow on one rank reaches the others' average), zero."""
        if self.average_gradients is not None:
            self.average_gradients(self.parameters)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.max_grad_norm)
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


def race_and_decide(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    engine: HDETEngine,
    config: HDETConfig,
    train_copy: Callable[[float, RaceGroups, Callable[[list[nn.Parameter]], None] | None], None],
    score: Callable[[], torch.Tensor],
    lowers: bool,
    data_parallel: bool = False,
    train_pair_copy: Callable[[float, RaceGroups, Callable[[list[nn.Parameter]], None] | None], None] | None = None,
) -> RaceDecision:
    """Race the 4 candidates (and, when ``lowers``, the copy one step below the start) and decide.

    ``model`` is the bare module (its backward must not all-reduce: each replica races its own LR).
    ``train_copy(m, groups, average_gradients)`` trains the weights as they are for the race's steps, with every param
    group's LR already at ``m`` x its peak, on this rank's share of a copy's batch under ``groups``
    (`start_race.RaceGroups`), calling ``average_gradients(parameters)`` before each step when it is not None
    (`RaceSteps`); ``score()`` returns the weights' per-example probe losses (a 1-D tensor, the same examples on every
    rank). ``data_parallel``: the shell gives each rank its share of a copy's batch, so groups of ranks train each
    candidate together on ``config.start_race_batch_share`` of the global batch, and the start and the copy below it
    on ``config.start_race_lower_batch_share`` (where the two shares differ the start races twice, once on each);
    else every rank races its copies alone on the batches it is given. ``train_pair_copy``: how the start and the
    copy below it train where a hand-written loop gives them batches of their own (``lower_train_batches``): the
    race is then split as above, every rank racing alone.
    """
    multipliers = race_multipliers(config.controller_max_factor)
    below = below_multiplier(config.controller_max_factor, len(multipliers))
    rank, world_size = engine.rank, engine.world_size
    groups = race_groups(rank, world_size, data_parallel, config.start_race_batch_share)
    lower_groups = race_groups(rank, world_size, data_parallel, config.start_race_lower_batch_share)
    # One layout for every copy (the shares alike, or a hand-written loop's race): the copy below the start is one
    # more candidate (the last), raced in an idle slot where the groups leave one (3 groups, or 5+), else in a round
    # of its own on group 0 (the other groups race a copy that is thrown away meanwhile: see the idle slots below).
    # Two layouts: the candidates on theirs, then the start and the copy below it on theirs (BENCHMARKS.md item 58).
    split = lower_groups != groups or train_pair_copy is not None
    if any(len(state) for state in optimizer.state.values()):
        raise RuntimeError("The start race runs before the optimizer's first step, but the optimizer has state.")

    # What the race can change: the trained parameters and the buffers (frozen weights, e.g. a LoRA base model, stay
    # as they are). On the CPU: the race must not hold a second copy in accelerator memory.
    changing = [p for p in model.parameters() if p.requires_grad] + list(model.buffers())
    initial = [t.detach().to("cpu", copy=True) for t in changing]
    rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    schedule_lrs = [group["lr"] for group in optimizer.param_groups]
    was_training = model.training
    averaging = {groups: _group_averaging(groups, engine)}
    if split:
        averaging[lower_groups] = _group_averaging(lower_groups, engine)

    def put_back() -> None:
        """The initial weights, no optimizer state, the random streams of the race's start."""
        with torch.no_grad():
            for tensor, saved in zip(changing, initial):
                tensor.copy_(saved)
        optimizer.state.clear()
        torch.random.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)

    def race_copy(multiplier: float, layout: RaceGroups, lowering_pair: bool) -> torch.Tensor:
        """Train a copy of the initial weights at ``multiplier`` x the peak LR (as one of the lowering pair where
        ``lowering_pair``); its per-example probe losses."""
        # Every copy from the same state (weights, random streams), whichever replica and round races it.
        put_back()
        for group in optimizer.param_groups:
            group["lr"] = peak_lr(group) * multiplier
        model.train()
        trains = train_pair_copy if lowering_pair and train_pair_copy is not None else train_copy
        trains(multiplier, layout, averaging[layout])
        return scored()

    def scored() -> torch.Tensor:
        model.eval()
        try:
            with torch.no_grad():
                return score().detach().float().cpu().flatten()
        finally:
            model.train()

    def race_rounds(copies: list[float], layout: RaceGroups, lowering_pair: bool = False) -> torch.Tensor:
        """This rank's rounds of ``copies`` under ``layout``: ``[rounds, examples]``, a thrown-away round's row zero.
        Candidate c is raced by group c % G in round c // G (G groups). ``lowering_pair``: the start and the copy below it."""
        mine = [] if layout.group is None else race_assignment(layout.group, layout.count, len(copies))
        row = torch.zeros(math.ceil(len(copies) / layout.count), examples)
        for slot in range(row.shape[0]):
            if slot < len(mine):
                row[slot] = race_copy(copies[mine[slot]], layout, lowering_pair)
            else:
                # An idle slot races a copy that is thrown away: a Trainer's compute_loss may run collectives at
                # every call (TRL's SFTTrainer gathers token counts and accuracy across processes), so every rank
                # must train and score as often as the others, or the race hangs.
                race_copy(copies[0], layout, lowering_pair)
        return row

    def scores_of(gathered: torch.Tensor, copies: list[float], layout: RaceGroups) -> torch.Tensor:
        """Each copy's per-example probe losses from the gathered rounds (its group's first rank's: the group's
        ranks hold the same weights)."""
        slots = gathered.reshape(world_size, -1, examples)
        return torch.stack([slots[layout.scoring_rank(c)] for c in range(len(copies))])

    device = next(model.parameters()).device
    # The initial weights' probe losses, before any copy trains (eval mode: no random draws; put_back() restores the
    # random streams before every copy all the same).
    initial_scores = scored()
    examples = initial_scores.numel()
    try:
        candidates = [*multipliers, below] if lowers and not split else multipliers
        pair = [1.0, below]  # the start and the copy below it, on their own share (split only)
        rows = [race_rounds(candidates, groups)]
        if split and lowers:
            rows.append(race_rounds(pair, lower_groups, lowering_pair=True))
        # One gather for every copy's scores.
        mine = torch.cat([r.flatten() for r in rows])
        gathered = gather_rows(mine, rank, world_size, device=device, group=engine.group).view(world_size, -1)
        cut = rows[0].numel()
        raced = scores_of(gathered[:, :cut], candidates, groups)
        per_candidate = raced[: len(multipliers)]
        decision = decide_race(
            per_candidate,
            multipliers,
            config.start_race_significance,
            config.start_race_raise_to,
            config.start_race_raise_on,
        )
        start_scores, below_scores = per_candidate[0], None
        if lowers:
            start_scores, below_scores = (
                scores_of(gathered[:, cut:], pair, lower_groups) if split else (per_candidate[0], raced[-1])
            )
        if decision.wants_below and below_scores is None:
            # A race that only raises pays for the copy below the start only when the rest would raise. Every
            # replica races it (compute_loss may run collectives, as above); group 0's first rank decides for all.
            copies = pair if split else [below]
            row = race_rounds(copies, lower_groups, lowering_pair=split)
            more = gather_rows(row.flatten(), rank, world_size, device=device, group=engine.group)
            scored_pair = scores_of(more, copies, lower_groups)
            below_scores = scored_pair[-1]
            start_scores = scored_pair[0] if split else start_scores
        if decision.wants_below:
            decision = confirm_with_below(decision, below_scores, below, start_scores if split else None)
        if lowers and decision.scale == 1.0:
            significance = config.start_race_significance
            decision = decide_lower(decision, start_scores, below_scores, initial_scores, below, significance)
        if split and below_scores is not None:
            decision = replace(decision, lower_start_probe_loss=_mean_or_inf(start_scores))
        initial_probe_loss = float(initial_scores.double().mean())
        ceiling = stall_ceiling([float(m) for m in decision.probe_losses], initial_probe_loss, multipliers)
        return replace(decision, initial_probe_loss=initial_probe_loss, stall_ceiling=ceiling)
    finally:
        put_back()
        for group, lr in zip(optimizer.param_groups, schedule_lrs):
            group["lr"] = lr
        model.train(was_training)


def _mean_or_inf(scores: torch.Tensor) -> float:
    rows = scores.double()
    return float(rows.mean()) if bool(torch.isfinite(rows).all()) else math.inf


def _group_averaging(groups: RaceGroups, engine: HDETEngine) -> Callable[[list[nn.Parameter]], None] | None:
    """The gradient average of this rank's race group (None where each rank races alone). Creates one process group
    per race group on every rank alike: ``new_group`` is collective over every process, which the Trainer's race
    (whole replicas, never HSDP) has in its engine's group."""
    if groups.size == 1:
        return None

    def global_rank(rank: int) -> int:
        return rank if engine.group is None else dist.get_global_rank(engine.group, rank)

    handles = [dist.new_group([global_rank(r) for r in groups.ranks(g)]) for g in range(groups.count)]
    if groups.group is None:
        return None  # a leftover rank races its thrown-away copies alone
    handle, size, member = handles[groups.group], groups.size, groups.member

    def average(parameters: list[nn.Parameter]) -> None:
        # Zeros for a parameter this rank's batch left without a gradient: every rank must send the same layout.
        for p in parameters:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        fused_average_([p.grad for p in parameters], torch.zeros(0), member, size, group=handle)

    return average


def race_user_batches(
    engine: HDETEngine,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_batches: Sequence[Any],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    probe_batches: Sequence[Any],
    *,
    steps: int,
    max_grad_norm: float | None,
    lowers: bool,
    switch: str,
    grad_scaler: torch.amp.GradScaler | None = None,
    lower_train_batches: Sequence[Any] | None = None,
    accumulation_steps: int = 1,
) -> RaceDecision | None:
    """The start race of a hand-written loop (``OneCycleAutoLR.start_race``, ``HDETAccelerate.start_race``) on the
    user's batches and loss function: checks them, races, and starts ``engine``'s controller at the decided scale
    (the shell then re-applies its LRs). None with one process. ``switch`` names what turns auto-LR on there.
    ``grad_scaler``: the loop's GradScaler (fp16), whose state each copy starts from (`RaceSteps`).
    ``lower_train_batches``: the start's and the copy below its batches, where they race on their own (HDETTrainer's
    split race: the candidates on half the global batch, the pair on a quarter); None: every copy on
    ``train_batches``. ``accumulation_steps``: each race step accumulates that many consecutive batches of each list
    (so a copy's step can be larger than one device's batch: half the global batch at 8 processes is four)."""
    if not engine.config.auto_lr:
        raise ValueError(
            f"start_race() sets where the auto-LR controller starts, but auto-LR is off. Pass {switch}, or do "
            "not call start_race()."
        )
    if engine.step != 0 or any(len(state) for state in optimizer.state.values()):
        raise RuntimeError(
            "start_race() runs before the first optimizer step, but this run has already stepped. Call it "
            "before the loop's first step."
        )
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1 (60 measured), got {steps!r}.")
    if not isinstance(accumulation_steps, int) or isinstance(accumulation_steps, bool) or accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be an integer >= 1, got {accumulation_steps!r}.")
    needed = steps * accumulation_steps
    lists = {"train_batches": train_batches}
    if lower_train_batches is not None:
        lists["lower_train_batches"] = lower_train_batches
    for name, batches in lists.items():
        if len(batches) < needed:
            each = "one batch each" if accumulation_steps == 1 else f"accumulation_steps={accumulation_steps} batches each"
            raise ValueError(
                f"start_race() trains each copy for steps={steps} steps, {each}, but {name} has "
                f"{len(batches)}. Pass at least {needed} batches, or fewer steps."
            )
    if len(probe_batches) < 2:
        raise ValueError(
            "start_race() compares the copies by paired standard errors over probe_batches, which needs at "
            f"least 2 batches (e.g. 32 of one example each), got {len(probe_batches)}."
        )
    if max_grad_norm is not None and not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0 or None (no clipping), got {max_grad_norm!r}.")
    module = model.module if isinstance(model, DistributedDataParallel) else model
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not {id(p) for p in module.parameters() if p.requires_grad} <= stepped:
        # Else the copies would train nothing the optimizer steps: every copy equal, a race that says nothing.
        raise ValueError(
            "start_race() trains the model's copies with the run's optimizer, but some of the model's trainable "
            "parameters are not in the optimizer. Pass the model the optimizer was built for."
        )
    if engine.world_size < 2:
        warnings.warn("start_race(): one process, one replica: nothing to race.", stacklevel=3)
        return None
    rank0 = engine.rank == 0
    race_batches = list(train_batches[:needed])
    pair_batches = None if lower_train_batches is None else list(lower_train_batches[:needed])
    # Batches that differ between ranks would compare the copies on different examples (the paired test over
    # the probe would be meaningless): one gather of the checksums refuses them on every rank alike.
    checked = {"train_batches": race_batches, "probe_batches": list(probe_batches)}
    if pair_batches is not None:
        checked["lower_train_batches"] = pair_batches
    mine = torch.tensor([_checksum(batches) for batches in checked.values()], dtype=torch.float64)
    device = next(module.parameters()).device
    every = gather_rows(mine, engine.rank, engine.world_size, device=device, group=engine.group)
    names = tuple(checked)
    differ = [name for c, name in enumerate(names) if not bool((every[:, c] == every[0, c]).all())]
    if differ:
        raise ValueError(
            f"start_race() needs the same {' and '.join(differ)} on every rank (each copy trains and is scored on "
            "them), but they differ between ranks. Draw them with a generator seeded alike on every rank, not "
            "from the loop's DistributedSampler."
        )

    trained = [p for p in module.parameters() if p.requires_grad]

    def copy_trainer(
        batches: list[Any], what: str
    ) -> Callable[[float, RaceGroups, Callable[[list[nn.Parameter]], None] | None], None]:
        def train_copy(
            multiplier: float, groups: RaceGroups, average_gradients: Callable[[list[nn.Parameter]], None] | None
        ) -> None:
            # Every rank holds the same user batches (checked above): each races its copies alone, never averaged.
            race_steps = RaceSteps(optimizer, trained, max_grad_norm, grad_scaler, average_gradients)
            bar = tqdm(
                range(0, len(batches), accumulation_steps),
                desc=f"HDET start race{what} (LR x {multiplier:.3g})",
                disable=not rank0,
                leave=False,
            )
            for first in bar:
                # The mean of the step's batches' mean losses, one backward each (one batch's activations at a time).
                for batch in batches[first : first + accumulation_steps]:
                    race_steps.backward(loss_fn(module, batch) / accumulation_steps)
                race_steps.step()

        return train_copy

    def score() -> torch.Tensor:
        return torch.stack([loss_fn(module, batch).detach().reshape(()) for batch in probe_batches])

    decision = race_and_decide(
        module, optimizer, engine, engine.config, copy_trainer(race_batches, ""), score, lowers,
        train_pair_copy=None if pair_batches is None else copy_trainer(pair_batches, ", the lowering pair"),
    )  # fmt: skip
    engine.start_at_scale(decision.scale, race={**decision.to_dict(), "steps": steps, "probe_size": len(probe_batches)})
    return decision


def _checksum(batches: Sequence[Any]) -> float:
    """A float64 sum over every tensor in ``batches`` (dicts, lists and tuples walked), each weighted by its position,
    to tell whether two ranks hold the same batches."""
    total, position = 0.0, 0

    def walk(item: Any) -> None:
        nonlocal total, position
        if isinstance(item, torch.Tensor):
            position += 1
            values = torch.nan_to_num(item.detach().to("cpu", torch.float64).flatten(), posinf=1.0, neginf=-1.0)
            weights = torch.arange(1, values.numel() + 1, dtype=torch.float64)
            total += position * float((values * weights).sum())
        elif isinstance(item, dict):
            for key in sorted(item, key=str):
                walk(item[key])
        elif isinstance(item, (list, tuple)):
            for element in item:
                walk(element)

    walk(list(batches))
    return total
