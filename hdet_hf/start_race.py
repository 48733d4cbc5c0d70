"""The start race: before the first step, the replicas train copies of the initial weights at a few constant LRs.

There are always `RACE_CANDIDATES` (4) candidate LRs, ``start x max_factor ** (c / 3)`` (the start LR up to the
controller's bound), whatever the number of replicas: replica ``r`` of ``N`` races candidates ``r, r + N, ...``
(with 2 replicas each races two, one after the other; the copy below the start, point (4), is one more; a replica
with no copy of its own in a round races one that is thrown away, as a Trainer's compute_loss may run collectives),
all from the initial weights on the same batches, and scores each copy on the same probe examples. HDETTrainer's
race runs in groups of ranks that train each copy together, each on its share of the copy's batch (`race_groups`),
so a candidate trains on ``--hdet_start_race_batch_share`` of the run's global batch (by default half) and the start
and the copy below it, which decide a lowering and confirm a raise, on ``--hdet_start_race_lower_batch_share`` (by
default a quarter; below one process's batch a process races alone on part of its batch). A copy's batch sets how
noisy its steps are, and a smaller batch favours a smaller LR: on half the batch at 4 processes the race raised two
from-scratch language models 10x below their best LR that a quarter left there, and the pretrained classifiers'
copies 3x above their best LR learned where on a quarter they stalled (BENCHMARKS.md item 56; at 2 processes the
same, item 57). So each decision is taken on the share where it helped: a raise on half, a lowering on a quarter
(item 58). The copies then see the same examples whatever the process count; a copy with dropout still draws other
masks when its batch is split over ranks, which can decide a copy at the edge of stability (item 50). The run keeps its initial
weights and raises the base LR's start when (1) every larger LR beat the start (the start came last), (2) the probe loss fell with each step up in LR from the start to the
winner, (3) the winner beat the start by ``significance`` paired standard errors over the probe's examples, and (4)
a fifth copy one step below the start (``start / max_factor ** (1 / 3)``; raced with the candidates by default, only
when (1)-(3) hold with ``--hdet_start_race_lowers false``) did worse than the start: to the largest candidate that
beat the start by ``significance`` standard errors (``--hdet_start_race_raise_to largest``, the default since
session 44) or to the winner's multiplier (``winner``). Otherwise one step lower when `decide_lower` says so, else
at 1 (the race changed nothing).

Why the start must come last: the standard error over the probe's examples measures the probe's noise, not the
race's. At or above the right LR a from-scratch language model's candidates sit on a noisy plateau where one of
them beats the start by 4 standard errors by chance (task f at its best LR, reading 45), while another does worse;
far below the right LR every larger candidate does better.

Why a falling trend over two steps raises too (``--hdet_start_race_raise_on two_steps``, the default since session
46, reading 51): "the start came last" reads a larger candidate that stalled past the edge of stability as evidence
against any raise. On the pretrained classifiers from 3-5x below their best LR the 10x copy collapsed while the loss
fell from the start through 2.15x and 4.64x (task i from a third of its best LR: 1.887, 1.612, 1.158, 2.162), and
without a raise the controller's own climb took two such runs to the collapsed LR (3.3x the sweep's best loss). A
plateau winner one step up, the false raise the start-last gate was built against, still does not raise.

Why the copy below the start must lose to it (reading 46): when the start is already too high every candidate is,
and on the pretrained classifier from 3x above its best LR the start's copy collapsed to the uniform loss (2.079 over
8 classes) while larger ones collapsed less (probe 2.079, 1.993, 1.651, 1.554 for LR x 1, 2.15, 4.64, 10; task c
seed 2): every gate above passed and the run would have started at 30x its best LR. A start that is too low beats
anything lower; one that is too high loses to a step below it.

Why the loss must fall all the way to the winner: on the pretrained classifier from 3x above its best LR (task g,
reading 45) the three lower copies collapsed to the class prior (probe 1.652, 1.647, 1.652) and the largest, at 30x
the best LR, reached 1.004. A start that is too low improves with each step up in LR; a dip, a rise and a drop is
something else (a collapse, an instability), and raising there would have started the run at 30x its best LR.

Why the largest candidate that beat the start, not the winner (reading 49): with the start last of all, every
candidate learned faster than the start, and the race's ranking among them is the short-horizon bias's: from 10x
below, its winner on the from-scratch language models is 0.2-0.5x the sweep's best LR, while the 10x copy (the
sweep's best) still beat the start by 2+ standard errors on 11 of the 13 races at 4 processes that raised to a
winner below it. A candidate past the edge of stability does not beat the start (task c seed 2 at its best LR: the
2.15x copy ends at 1.994, near the uniform 2.079, against the start's 0.960), and then the start did not come last
and nothing is raised at all.

It raises on the evidence above and lowers only one step, on a start that stalled against the copy below it
(`decide_lower`, the default since session 43: readings 47-48). A race of constant LRs from the initial weights favours small steps (the short-horizon bias,
arXiv 1803.02021): on the from-scratch language models of BENCHMARKS.md it picks 0.1-0.3x the sweep's best LR
(reading 43), so its pick is a lower bound on the right LR. A race that says "higher than the start" is evidence
the start is too low; one that says "lower" is what the race says at any LR. Measured in reading 45.

Pure math, no torch.distributed: `trainer_race.py` runs the race in HDETTrainer and gathers the probe losses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .config import (
    DEFAULT_START_RACE_BATCH_SHARE,
    DEFAULT_START_RACE_STEPS,
    START_RACE_RAISE_ON,
    START_RACE_RAISES,
)

__all__ = [
    "RACE_CANDIDATES",
    "race_steps_for_run",
    "race_multipliers",
    "below_multiplier",
    "race_assignment",
    "RaceGroups",
    "race_groups",
    "RaceDecision",
    "decide_race",
    "confirm_with_below",
    "decide_lower",
    "LOWER_PROGRESS_RATIO",
    "STALL_PROGRESS_RATIO",
    "LOWER_MIN_PROGRESS",
    "stall_ceiling",
]

# Four candidates a third of a decade apart (with the default bound of 10): the grid every race of BENCHMARKS.md
# reading 45 ran on (then one per replica at 4 processes). Fixed, so 2 and 8 processes take the same decision.
RACE_CANDIDATES = 4


def race_steps_for_run(
    requested: int | None, *, auto_lr: bool, hsdp: bool, replicas: int, max_steps: int, sized_train_set: bool
) -> tuple[int, str]:
    """How many steps this run's start race trains, and why none when 0.

    ``requested`` set (a number): that number; the Trainer raises where a set race cannot run. Unset (None, the
    default): `DEFAULT_START_RACE_STEPS` where the race can run and was measured (the auto-LR controller on whole
    replicas, two or more of them, a sized train set) and the run is at least twice as long as the race (a race
    as long as the run would cost more than it could save: the shortest measured run was 120 steps); elsewhere
    0, quietly: a default must not turn a valid run into an error.
    """
    if requested is not None:
        return requested, "" if requested else "--hdet_start_race_steps 0"
    reasons = [
        (not auto_lr, "--hdet_auto_lr is off"),
        (hsdp, "replicas are sharded (--hdet_hsdp_shard_size)"),
        (replicas < 2, "one replica"),
        (not sized_train_set, "the train set has no length (a streaming dataset)"),
        (
            max_steps < 2 * DEFAULT_START_RACE_STEPS,
            f"the run has fewer than {2 * DEFAULT_START_RACE_STEPS} steps",
        ),
    ]
    why = [reason for applies, reason in reasons if applies]
    return (0, "; ".join(why)) if why else (DEFAULT_START_RACE_STEPS, "")


def race_multipliers(max_factor: float, candidates: int = RACE_CANDIDATES) -> list[float]:
    """Each candidate's LR multiplier: geometric from 1 (candidate 0, the start) to ``max_factor`` (the last)."""
    if candidates < 2:
        raise ValueError(f"The start race needs at least 2 candidates, got {candidates}.")
    return [max_factor ** (c / (candidates - 1)) for c in range(candidates)]


def below_multiplier(max_factor: float, candidates: int = RACE_CANDIDATES) -> float:
    """The check below the start: one grid step under it (``1 / 2.15`` with the default bound of 10)."""
    return 1.0 / race_multipliers(max_factor, candidates)[1]


def race_assignment(rank: int, world_size: int, candidates: int = RACE_CANDIDATES) -> list[int]:
    """The candidates replica ``rank`` races, in order: ``rank, rank + world_size, ...`` (round ``i`` is the
    ``i``-th). Every candidate is raced by exactly one replica."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size}.")
    return list(range(rank, candidates, world_size))


@dataclass(frozen=True)
class RaceGroups:
    """How the ranks share the race's copies: ``size`` ranks train each copy together, each on its share of the
    copy's batch, with their gradients averaged (1: each rank races its copies alone); ``count`` such groups race
    copies side by side. ``group`` is this rank's (None for a rank left over when the process count is not a multiple
    of ``size``: it races copies that are thrown away, so every rank trains as often as the others) and ``member`` its
    place in the group (which share of each batch it takes). ``fraction``: the share of one process's batch each rank
    takes a step (1 but where a copy trains on less than one process's batch: a quarter of the global batch at 2
    processes is half of one process's batch)."""

    size: int
    count: int
    group: int | None
    member: int
    fraction: float = 1.0

    def ranks(self, group: int) -> list[int]:
        """The ranks of group ``group`` (member order)."""
        return list(range(group * self.size, (group + 1) * self.size))

    def scoring_rank(self, candidate: int) -> tuple[int, int]:
        """The rank whose scores stand for candidate ``candidate``, and the round it is raced in."""
        return (candidate % self.count) * self.size, candidate // self.count

    def rank_examples(self, per_process: int) -> int:
        """Examples of each race step this rank trains on, of a process's ``per_process`` (whole examples, at least
        one: rounding can give a copy more than its share on a tiny batch)."""
        return max(1, round(per_process * self.fraction))

    def share(self, world_size: int, per_process: int | None = None) -> float:
        """The share of the run's global batch a copy trains on (with ``per_process``: in whole examples)."""
        if per_process is None:
            return self.size * self.fraction / world_size
        return self.size * self.rank_examples(per_process) / (per_process * world_size)


def race_groups(
    rank: int, world_size: int, data_parallel: bool = True, batch_share: float = DEFAULT_START_RACE_BATCH_SHARE
) -> RaceGroups:
    """The race's groups on ``world_size`` processes for copies on ``batch_share`` of the run's global batch:
    ``floor(world_size x batch_share)`` ranks per copy, each on its replica's batch; where that is less than one
    process, each rank races alone on that share of its batch (``fraction``: a quarter at 2 processes is half of one
    process's batch, at 3 three quarters). Half: one process at 2 and 3, two at 4 and 5, four at 8; a quarter: half a
    process at 2, one at 4 to 7, two at 8. Without ``data_parallel`` (a hand-written loop's race on the user's own
    batches, the same on every rank) every rank races alone on the batches it is given.

    Why a share of the global batch and not one replica's batch: a copy's batch sets how noisy its steps are, and a
    smaller batch favours a smaller LR. On 8 processes (a copy on an eighth of the batch) the 4.64x copy stalled from
    a third of the classifiers' best LR where at 4 processes it learned fastest (BENCHMARKS.md item 50): the decision
    depended on the process count. Which share decides best is items 56-58.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size}.")
    if not data_parallel:
        return RaceGroups(size=1, count=world_size, group=rank, member=0)
    # The small epsilon keeps exact products (8 x 0.25) from flooring one below through float rounding.
    wanted = world_size * batch_share
    if wanted < 1 - 1e-9:
        return RaceGroups(size=1, count=world_size, group=rank, member=0, fraction=wanted)
    size = math.floor(wanted + 1e-9)
    count = world_size // size
    group = rank // size if rank < count * size else None
    return RaceGroups(size=size, count=count, group=group, member=rank % size if group is not None else 0)


def share_note(
    world_size: int, batch_share: float, flag: str = "--hdet_start_race_batch_share", per_process: int | None = None
) -> str | None:
    """What a user should know where a copy cannot train on ``batch_share`` of the global batch (``flag`` sets it):
    from one process's batch up, a copy takes whole processes' batches (at 3 processes half is one process's, a
    third); below it, whole examples of a process's ``per_process`` (a quarter at 2 processes of a batch of 1 is one
    example, half the global batch). None where the share is exact."""
    groups = race_groups(0, world_size, batch_share=batch_share)
    share = groups.share(world_size, per_process)
    if abs(share - batch_share) < 1e-9:
        return None
    what = (
        f"{groups.size} of {world_size} processes' batches"
        if groups.fraction == 1.0
        else f"{groups.rank_examples(per_process or 1)} of each process's {per_process} examples a step"
    )
    return (
        f"each copy trains on {what} ({share:.3g} of the global batch) where {flag} asks for {batch_share:.3g}: a copy "
        "takes whole processes' batches from one process's batch up, whole examples below it, and a copy's batch "
        "changes the race's decisions (BENCHMARKS.md items 56-58)."
    )


@dataclass(frozen=True)
class RaceDecision:
    """The race's outcome: the base LR's starting scale and what it was decided on (JSON-ready)."""

    scale: float
    multipliers: list[float]
    probe_losses: list[float]  # each candidate's mean probe loss (inf where its copy diverged)
    winner: int
    gap: float  # the start replica's mean probe loss minus the winner's
    standard_error: float  # of that gap, paired over the probe's examples
    start_came_last: bool  # every larger LR beat the start
    falls_to_winner: bool  # the probe loss fell with each step up in LR from the start to the winner
    # The copy one step below the start (raced only when the rest would raise): its multiplier and mean probe loss.
    below_multiplier: float | None = None
    below_probe_loss: float | None = None
    # The initial weights' mean probe loss (what every copy started from), and whether the run starts one step below
    # the start because the start's copy made no real progress from there (`decide_lower`).
    initial_probe_loss: float | None = None
    lowered: bool = False
    # Where a raise went: the winner's multiplier, or the largest that beat the start clearly (`decide_race`).
    raise_to: str = "winner"
    # The largest candidate multiplier below the first whose copy stalled (`stall_ceiling`; None: none stalled).
    stall_ceiling: float | None = None
    # Where the copy below the start raced on a share of its own (--hdet_start_race_lower_batch_share): the start's
    # copy on that share, which the copy below is compared with (None: the candidates' start, row 0).
    lower_start_probe_loss: float | None = None

    @property
    def wants_below(self) -> bool:
        """Whether the rest of the rule would raise, so the copy below the start must be raced to confirm it."""
        return self.scale > 1.0 and self.below_probe_loss is None

    def to_dict(self) -> dict[str, object]:
        return {
            "scale": self.scale,
            "multipliers": self.multipliers,
            "probe_losses": self.probe_losses,
            "winner": self.winner,
            "gap": self.gap,
            "standard_error": self.standard_error,
            "start_came_last": self.start_came_last,
            "falls_to_winner": self.falls_to_winner,
            "below_multiplier": self.below_multiplier,
            "below_probe_loss": self.below_probe_loss,
            "initial_probe_loss": self.initial_probe_loss,
            "lowered": self.lowered,
            "raise_to": self.raise_to,
            "stall_ceiling": self.stall_ceiling,
            "lower_start_probe_loss": self.lower_start_probe_loss,
        }


def paired_gap(start: torch.Tensor, other: torch.Tensor) -> tuple[float, float]:
    """The mean of ``start - other`` over the probe's examples and its standard error (float64 rows, 2+ examples)."""
    differences = start - other
    return float(differences.mean()), float(differences.std(unbiased=True)) / math.sqrt(start.numel())


def decide_race(
    per_example: torch.Tensor,
    multipliers: list[float],
    significance: float,
    raise_to: str = "winner",
    raise_on: str = "start_last",
) -> RaceDecision:
    """The starting scale from ``per_example`` (``[candidates, examples]`` probe losses; row 0 raced the start).

    The winner is the candidate with the lowest mean probe loss (a non-finite row cannot win). The race raises when
    candidate 0 (the start) has the highest mean of all, the means fall strictly from the start to the winner, and
    the winner's gap to the start is at least ``significance`` standard errors of the paired differences over the
    examples; else the scale is 1. With a single example, or a start whose copy diverged, there is no standard error
    to test against and the scale stays 1. A raise goes to the winner's multiplier (``raise_to`` "winner") or to the
    largest candidate's that beat the start by ``significance`` standard errors ("largest"; at least the winner's):
    the race's pick is a lower bound on the right LR (short-horizon bias, BENCHMARKS.md reading 43), and where every
    candidate beat the start the larger ones that still beat it clearly are no evidence against a larger LR.
    (``raise_to`` defaults to the rule as first built; HDETConfig's default is "largest".) With ``raise_on``
    "two_steps" a start that did not come last raises too when the means fell strictly from it through at least
    two steps up (the winner is candidate 2 or later): a larger candidate past the edge of stability then stalls
    or collapses, while the two steps show the start is too low (a plateau winner one step up, the false raise
    the start-last gate is for, does not pass).
    """
    if raise_to not in START_RACE_RAISES:
        raise ValueError(f"raise_to must be one of {START_RACE_RAISES}, got {raise_to!r}.")
    if raise_on not in START_RACE_RAISE_ON:
        raise ValueError(f"raise_on must be one of {START_RACE_RAISE_ON}, got {raise_on!r}.")
    losses = per_example.detach().to(torch.float64)
    if losses.dim() != 2 or losses.shape[0] != len(multipliers):
        raise ValueError(
            f"Expected [{len(multipliers)}, examples] probe losses, got shape {tuple(losses.shape)}."
        )
    finite = torch.isfinite(losses).all(dim=1)
    means = torch.where(finite, losses.mean(dim=1), torch.full_like(losses[:, 0], math.inf))
    winner = int(torch.argmin(means))
    gap, se = 0.0, math.inf
    if winner != 0 and bool(finite[0]) and losses.shape[1] >= 2:
        gap, se = paired_gap(losses[0], losses[winner])
    start_came_last = bool(finite[0]) and bool((means[1:] < means[0]).all())
    falls_to_winner = bool((means[1 : winner + 1] < means[:winner]).all())
    trend = raise_on == "two_steps" and winner >= 2 and bool(finite[0])
    raised = winner != 0 and (start_came_last or trend) and falls_to_winner and gap > 0 and gap >= significance * se
    scale = multipliers[winner] if raised else 1.0
    if raised and raise_to == "largest":
        for candidate in range(len(multipliers) - 1, winner, -1):
            if not bool(finite[candidate]):  # a copy that diverged beat nothing (only where the start was not last)
                continue
            above_gap, above_se = paired_gap(losses[0], losses[candidate])
            if above_gap > 0 and above_gap >= significance * above_se:
                scale = multipliers[candidate]
                break
    return RaceDecision(
        scale=float(scale),
        multipliers=[float(m) for m in multipliers],
        probe_losses=[float(m) for m in means],
        winner=winner,
        gap=gap,
        standard_error=se if math.isfinite(se) else 0.0,
        start_came_last=start_came_last,
        falls_to_winner=falls_to_winner,
        raise_to=raise_to,
    )


def confirm_with_below(
    decision: RaceDecision,
    below_per_example: torch.Tensor,
    multiplier: float,
    start_per_example: torch.Tensor | None = None,
) -> RaceDecision:
    """The final decision once the copy one step below the start (``multiplier`` < 1) has been scored: a raise
    stands only if that copy's mean probe loss is above the start's (non-finite counts as above). ``start_per_example``:
    the start's copy on the copy below's own share, where the two raced on another share than the candidates (None:
    the candidates' start)."""
    if not decision.wants_below:
        raise ValueError("Only a race that would raise is confirmed against the copy below the start.")
    losses = below_per_example.detach().to(torch.float64).flatten()
    below = float(losses.mean()) if bool(torch.isfinite(losses).all()) else math.inf
    start = decision.probe_losses[0]
    lower_start = None
    if start_per_example is not None:
        row = start_per_example.detach().to(torch.float64).flatten()
        start = lower_start = float(row.mean()) if bool(torch.isfinite(row).all()) else math.inf
    stands = below > start
    return replace(
        decision,
        scale=decision.scale if stands else 1.0,
        below_multiplier=float(multiplier),
        below_probe_loss=below,
        lower_start_probe_loss=lower_start,
    )


# How much more progress (probe loss removed from the initial weights' in the race's K steps) the copy below the
# start must make than the start's own before the run starts there. Below the edge of stability a smaller LR makes
# a little more short-horizon progress at most (the bias: the race's pick on the from-scratch language models is
# 0.1-0.3x the best LR, with probe losses within a few percent of each other); past it the larger LR stalls or
# collapses (the classifier from 3x above its best LR: the start's copy at the uniform loss). With the probe spread
# over the data (session 50, reading 55) a pretrained language model at its best LR shows the bias at its largest:
# the copy below made 1.86x, 1.93x and 2.03x the start's progress (task j, seeds 0-2; 2.03x lowered it under the
# ratio 2 of sessions 42-49, and the run ended 4 % worse than DDP), while every lowering that helped made 5x or more
# (j at 2 processes from 3x above, 5.0-9.0x; the classifiers from 3x above, 44-53x).
LOWER_PROGRESS_RATIO = 3.0
# A race candidate "stalled" (past the edge of stability: `stall_ceiling`) when it removed less than half the probe
# loss the start's copy removed (session 47).
STALL_PROGRESS_RATIO = 2.0
# The least share of the initial weights' probe loss the copy below the start must remove before the race lowers: a
# start that stalls against a copy that learned little is a pretrained model's short-horizon bias, not a start past
# the edge of stability. Every lowering measured to help (the classifiers from 3x above, a new head from the uniform
# loss) removed 25-80 %; on a pretrained language model at its best LR (held-out task j) every copy at a constant LR
# first loses ground, and the race lowered it on 3 of 6 runs where the copy below removed 0.7 %, 5.5 % and 5.1 %
# (reading 54). That was on the probe of the data's first examples (one source file); on a probe spread over the
# data no task's start lost ground at its best LR (it removed 6-37 % of the loss), only from 3x above (task j at 4
# processes and task k, 3 seeds each), so a start that lost ground needs no proof from the copy below (session 51).
LOWER_MIN_PROGRESS = 0.1


def decide_lower(
    decision: RaceDecision,
    start_per_example: torch.Tensor,
    below_per_example: torch.Tensor,
    initial_per_example: torch.Tensor,
    multiplier: float,
    significance: float,
    progress_ratio: float = LOWER_PROGRESS_RATIO,
    min_progress: float = LOWER_MIN_PROGRESS,
) -> RaceDecision:
    """Whether a race that did not raise lowers the start one step (to ``multiplier`` < 1): when the copy below
    the start beat the start's copy by ``significance`` paired standard errors over the probe's examples *and*
    removed at least ``progress_ratio`` times as much probe loss from the initial weights' as the start did (a
    start that made no progress, or lost ground, against a copy below that made some). The short-horizon bias
    alone makes a smaller LR win by a little; a start past the edge of stability loses by a lot.

    Where the start's copy made progress, the copy below must also have learned: beaten the initial weights by
    ``significance`` paired standard errors and removed at least ``min_progress`` of their probe loss
    (`LOWER_MIN_PROGRESS`); a start that learned a little against a copy below that learned a little more is the
    short-horizon bias (held-out task j at its best LR on the probe of the data's first examples: lowered on 3 of 6
    runs, which ended 2.4-3.4 % worse than DDP; BENCHMARKS.md, reading 54). Where the start's copy ended above the
    initial weights' probe loss, beating it is enough: on a pretrained model each example's loss moves its own way,
    so the copy below's progress from the initial weights may not be significant even when it beats the start by
    ten standard errors (task j from 3x above: 0.125 +- 0.197 from the initial weights, 0.28 +- 0.029 under the
    start; lowered, the run ended level with DDP at the best LR instead of 2.3 % above it; reading 56).
    """
    if decision.scale != 1.0:
        raise ValueError("Only a race that did not raise can lower the start.")
    rows = [
        t.detach().to(torch.float64).flatten()
        for t in (start_per_example, below_per_example, initial_per_example)
    ]
    start, below, initial = rows
    if not (start.shape == below.shape == initial.shape):
        raise ValueError(f"Expected probe losses of one shape, got {[tuple(r.shape) for r in rows]}.")
    below_mean = float(below.mean()) if bool(torch.isfinite(below).all()) else math.inf
    initial_mean = float(initial.mean())
    lowered = False
    if math.isfinite(below_mean) and below.numel() >= 2:
        start_mean = float(start.mean()) if bool(torch.isfinite(start).all()) else math.inf
        start_progress = initial_mean - start_mean  # -inf when the start's copy diverged
        beats = True  # a start whose copy diverged is beaten by any finite copy below
        if math.isfinite(start_mean):
            gap, gap_se = paired_gap(start, below)
            beats = gap > 0 and gap >= significance * gap_se
        below_progress, below_se = paired_gap(initial, below)
        # A start whose copy ended above the initial weights' probe loss (on a probe spread over the data: only ever
        # seen from 3x above) needs no proof that the copy below learned; beating the start is enough.
        below_learned = below_progress >= significance * below_se and below_progress >= min_progress * initial_mean
        lowered = (
            below_progress > 0
            and (below_learned or start_progress <= 0)
            and beats
            and below_progress >= progress_ratio * max(start_progress, 0.0)
        )
    return replace(
        decision,
        scale=float(multiplier) if lowered else 1.0,
        below_multiplier=float(multiplier),
        below_probe_loss=below_mean,
        initial_probe_loss=initial_mean,
        lowered=lowered,
    )


def stall_ceiling(
    probe_losses: list[float], initial_probe_loss: float, multipliers: list[float], ratio: float = STALL_PROGRESS_RATIO
) -> float | None:
    """The largest candidate multiplier below the first candidate whose copy stalled: removed less than ``1 / ratio``
    of the probe loss the start's copy removed from the initial weights' (or diverged). None when no candidate
    stalled, or the start's copy itself made no progress (then nothing is measured against it).

    The mirror of `decide_lower`'s test: there a start that stalled against the copy below it is too high; here a
    candidate that stalled against the start is past the edge of stability (a pretrained classifier's copy at the
    uniform loss while the start's learned: task i from a third of its best LR, probe 1.887, 1.612, 1.158, 2.162 from
    2.071, reading 51). A from-scratch language model's candidates all remove most of the loss (6.9 -> 5.8-6.1 at
    the best LR and from 10x below), so none stalls there.
    """
    start_progress = initial_probe_loss - probe_losses[0]
    if not (math.isfinite(start_progress) and start_progress > 0):
        return None
    for candidate in range(1, len(probe_losses)):
        progress = initial_probe_loss - probe_losses[candidate]
        if not (math.isfinite(progress) and progress * ratio >= start_progress):
            return float(multipliers[candidate - 1])
    return None
