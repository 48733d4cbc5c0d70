"""Running the start race's copies and deciding on every rank alike (the rule itself: `start_race.py`).

Shared by the two shells that race: HDETTrainer (`trainer_race.py`, the Trainer's data and compute_loss) and the
drop-in scheduler (`OneCycleAutoLR.start_race`, the user's batches and loss function). A shell says how one copy
trains (``train_copy``: the race's steps from the weights as they are, at the LRs already set) and how the weights
are scored (``score``: one loss per probe example, the same examples on every rank); this module owns the rest:
which replica races which copy, putting the initial weights, optimizer state and random streams back before every
copy and after the race (so a race that changes nothing leaves the run bit for bit as it was), the one gather of
the probe losses, and the decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
from torch import nn

from .collectives import gather_rows
from .start_race import (
    RaceDecision,
    below_multiplier,
    confirm_with_below,
    decide_lower,
    decide_race,
    race_assignment,
    race_multipliers,
)

if TYPE_CHECKING:
    from .config import HDETConfig
    from .engine import HDETEngine

__all__ = ["peak_lr", "race_and_decide"]


def peak_lr(group: dict) -> float:
    """A param group's peak LR under its schedule: OneCycleLR's ``max_lr``, else the schedulers' ``initial_lr``
    (the Trainer's schedules are LambdaLR factors of it that peak at 1), else its current LR."""
    return float(group.get("max_lr", group.get("initial_lr", group["lr"])))


def race_and_decide(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    engine: HDETEngine,
    config: HDETConfig,
    train_copy: Callable[[float], None],
    score: Callable[[], torch.Tensor],
    lowers: bool,
) -> RaceDecision:
    """Race the 4 candidates (and, when ``lowers``, the copy one step below the start) and decide.

    ``model`` is the bare module (its backward must not all-reduce: each replica races its own LR). ``train_copy(m)``
    trains the weights as they are for the race's steps, with every param group's LR already at ``m`` x its peak;
    ``score()`` returns the weights' per-example probe losses (a 1-D tensor, the same examples on every rank).
    """
    multipliers = race_multipliers(config.controller_max_factor)
    below = below_multiplier(config.controller_max_factor, len(multipliers))
    # A race that may lower always needs the copy below the start, so it is raced as one more candidate (the last):
    # in an idle slot where the process count leaves one (3, 5-7, 8+ processes), else in a round of its own on
    # replica 0 (the other replicas race a copy that is thrown away meanwhile: see the idle slots below).
    copies = [*multipliers, below] if lowers else multipliers
    mine = race_assignment(engine.rank, engine.world_size, len(copies))
    rounds = math.ceil(len(copies) / engine.world_size)
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

    def put_back() -> None:
        """The initial weights, no optimizer state, the random streams of the race's start."""
        with torch.no_grad():
            for tensor, saved in zip(changing, initial):
                tensor.copy_(saved)
        optimizer.state.clear()
        torch.random.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)

    def race_copy(multiplier: float) -> torch.Tensor:
        """Train a copy of the initial weights at ``multiplier`` x the peak LR; its per-example probe losses."""
        # Every copy from the same state (weights, random streams), whichever replica and round races it.
        put_back()
        for group in optimizer.param_groups:
            group["lr"] = peak_lr(group) * multiplier
        model.train()
        train_copy(multiplier)
        return scored()

    def scored() -> torch.Tensor:
        model.eval()
        try:
            with torch.no_grad():
                return score().detach().float().cpu().flatten()
        finally:
            model.train()

    device = next(model.parameters()).device
    # The initial weights' probe losses, before any copy trains (eval mode: no random draws; put_back() restores the
    # random streams before every copy all the same).
    initial_scores = scored()
    try:
        # Each candidate's per-example probe losses in its round's slot; a replica with fewer candidates leaves
        # zeros. Candidate c is raced by replica c % N in round c // N.
        row = torch.zeros(rounds, initial_scores.numel())
        for slot in range(rounds):
            if slot < len(mine):
                row[slot] = race_copy(copies[mine[slot]])
            else:
                # An idle slot races a copy that is thrown away: a Trainer's compute_loss may run collectives at
                # every call (TRL's SFTTrainer gathers token counts and accuracy across processes), so every rank
                # must train and score as often as the others, or the race hangs.
                race_copy(copies[0])
        gathered = gather_rows(row.flatten(), engine.rank, engine.world_size, device=device, group=engine.group)
        slots = gathered.view(engine.world_size, rounds, initial_scores.numel())
        raced = torch.stack([slots[c % engine.world_size, c // engine.world_size] for c in range(len(copies))])
        per_candidate = raced[: len(multipliers)]
        decision = decide_race(
            per_candidate, multipliers, config.start_race_significance, config.start_race_raise_to
        )
        below_scores = raced[len(multipliers)] if lowers else None
        if decision.wants_below and below_scores is None:
            # A race that only raises pays for the copy below the start only when the rest would raise. Every
            # replica races it (compute_loss may run collectives, as above); replica 0's scores decide for all.
            mine_below = race_copy(below) if engine.rank == 0 else race_copy(below).zero_()
            gathered = gather_rows(mine_below, engine.rank, engine.world_size, device=device, group=engine.group)
            below_scores = gathered[0]
        if decision.wants_below:
            decision = confirm_with_below(decision, below_scores, below)
        if lowers and decision.scale == 1.0:
            start_scores = per_candidate[0]
            significance = config.start_race_significance
            decision = decide_lower(decision, start_scores, below_scores, initial_scores, below, significance)
        return replace(decision, initial_probe_loss=float(initial_scores.double().mean()))
    finally:
        put_back()
        for group, lr in zip(optimizer.param_groups, schedule_lrs):
            group["lr"] = lr
        model.train(was_training)
