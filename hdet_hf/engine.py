"""`HDETEngine`: the one protocol object behind the Trainer, the Accelerate API and the drop-in scheduler.

It decides *when* to converge (every ``sync_interval`` optimizer steps, plus forced converges before
evaluation, saving and at the end) and runs a converge as four named steps: score (this replica, no
communication), exchange (the one collective), decide (divergence, controller, outer step, permutations) and
record. What each step works with lives in its own module (README, "Design: the layers"): `registry`,
`learning_rates`, `score_window`, `replica`, `health`, `converge_stats`, `controller_step`, `run_record`,
`engine_state`.

The shells call, per optimizer step:

    engine.add_loss(loss, weight)  # every micro-batch: its mean loss over `weight` items (labelled tokens)
    optimizer.step()
    report = engine.end_step()     # counts the step; converges (and runs the controller) on the grid
    engine.apply_lr(schedule_lrs)  # base LR x controller scale x this rank's multiplier, per param group

and ``engine.force_converge()`` before evaluating or saving. Between converges nothing is communicated. A
converge is one fused all-reduce that averages the replica's tensors and gathers every rank's statistics.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from .centre_point import centre_after_offsets, centre_after_step_size, uses_centre_point
from .collectives import NoContributorError, fused_average_, gather_rows
from .config import HDETConfig
from .controller import ControllerSettings, ControllerState
from .controller_step import ControllerStep
from .converge_stats import GatheredStats, StatsLayout
from .cooldown import cooldown_score
from .engine_state import STATE_VERSION, EngineCheckpoint, check_settings_agree
from .fitness import FitnessWeights
from .health import HDETDivergenceError, ReplicaHealth
from .horizon import HorizonOffsets, PairedVotes, compares_by_offsets, horizon_decay
from .learning_rates import LearningRates
from .line_search import LineSearchRaise
from .noise_floor import uses_noise_floor
from .outer import OuterStep
from .peak_floor import PeakFloor
from .process import rank_and_world_size
from .registry import LR, ExploredValues, HyperparameterRegistry
from .replica import ReplicaTensors
from .run_record import ConvergeReport, RunRecorder, RunRecordViews, SyncReport
from .score_window import AVERAGED_SIGNALS, COOLDOWN_SIGNALS, PROBE_ONLY_SIGNALS, ScoreWindow, probe_at
from .shared_gradients import HORIZON_NEEDS_SHARED_GRADIENTS, gradients_shared

__all__ = ["HDETEngine", "ConvergeReport", "SyncReport", "HDETDivergenceError", "STATE_VERSION"]


SHORT_INTERVAL = (
    "HDET: --hdet_sync_interval (OneCycleAutoLR: model_sync_interval) {t} is shorter than this {n}-step run's default "
    "interval ({d} steps, 3 %% of the run). Over {t}-step windows the LR's effect on the loss is small against its "
    "noise; {how}. In a 2,000-step run with T 10 (the drop-in, 2 processes, 3 seeds) a start 10-30x below the "
    "sweep's best LR ended 1.02-1.06x the sweep's best loss with 'vote' (the default), 1.09-1.15x with 'run' and "
    "1.38-1.53x with 'converge', against 1.02-1.05x at T 60 (BENCHMARKS.md, readings 38 and 39). Leave the interval "
    "at its default (0.03) unless you need the converges."
).replace("%%", "%")
# What the controller does about the short window, per --hdet_controller_time_scale.
SHORT_INTERVAL_HOW = {
    "vote": "the auto-LR controller votes once per {v} steps, on the windows of {k} converges summed "
    "(--hdet_controller_time_scale vote)",
    "run": "with --hdet_controller_time_scale run the controller votes at every converge, each move scaled by "
    "T / {d}",
    "converge": "with --hdet_controller_time_scale converge the controller moves a full step at every converge, on "
    "votes that are mostly noise",
}


class HDETEngine(ExploredValues, RunRecordViews, EngineCheckpoint, ControllerStep):
    """HDET state and protocol for one process (views of its registry and run record, and its checkpoint
    methods, and the controller's move at a converge are mixed in: `ExploredValues`, `RunRecordViews`,
    `EngineCheckpoint`, `ControllerStep`).

    Args:
        config: the validated `HDETConfig`.
        model: the (unwrapped) model whose trainable parameters are averaged.
        optimizer: the optimizer whose param groups get per-rank LRs.
        total_steps: planned optimizer steps (for the controller warm-up and the final converge).
        rank, world_size, group: the process group; by default the global one (or a single process).
        horizon_if_shared: for shells that do not wrap the model (`OneCycleAutoLR`): with no comparison horizon
            configured, take HDETConfig's default one if the first step shows shared gradients (`shared_gradients`).

    Example:
        >>> import torch
        >>> from hdet_hf import HDETConfig
        >>> from hdet_hf.engine import HDETEngine
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> engine = HDETEngine(HDETConfig(sync_interval=2), model, opt, total_steps=4)
        >>> engine.apply_lr([0.1])
        [0.1]
    """

    def __init__(
        self,
        config: HDETConfig,
        model: nn.Module | None,
        optimizer: torch.optim.Optimizer,
        total_steps: int,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        group: dist.ProcessGroup | None = None,
        horizon_if_shared: bool = False,
    ) -> None:
        config.check_run_length(total_steps)
        config = config.for_run(total_steps)  # a fractional sync_interval becomes the steps it means here
        self.config, self.optimizer, self.total_steps, self.group = config, optimizer, total_steps, group
        self.rank, self.world_size = rank_and_world_size(rank, world_size, group)
        if self.world_size == 1 and config.lr_spread > 0:
            warnings.warn(
                "HDET runs on a single process: there is nothing to spread or average, so it trains like "
                "the base schedule. Launch with `accelerate launch`/`torchrun` on 2+ processes.",
                stacklevel=2,
            )
        self.warmup_steps = config.resolve_warmup_steps(total_steps)
        # After this step the controller stops and every spread is 0 (`explore_until`); exploring to the end
        # never zeroes the spread (not even for values set after the last step, e.g. for evaluation).
        until = config.resolve_explore_until(total_steps)
        self.explore_until_step = until if until < total_steps else sys.maxsize
        self.sync_warmup_steps = (
            config.resolve_warmup_steps(total_steps, "sync_warmup_steps") if config.gradient_sync == "local" else 0
        )
        # Scores this replica on the shared probe batch (``controller_signal="probe"``); set by the shell.
        self.probe_fn: Callable[[], float] | None = None
        # Cool-down signals: the training loss of the unwrapped model on cool-down batch i (same on every rank).
        self.cooldown_loss_fn: Callable[[int], torch.Tensor] | None = None
        self.cooldown_max_grad_norm: float | None = None  # the training loop's clipping, applied in cool-downs
        # 2 replicas: cuts at half a step; a vote shorter than the default interval: smaller, smoother moves.
        interval_share = config.controller_interval_share(total_steps)
        self.settings = ControllerSettings.from_config(config, self.world_size, interval_share)
        # With controller_time_scale="vote" and a T shorter than the default interval, the controller votes at
        # every k-th regular converge only; the ones between keep the window and average (or keep the fan-out: `converge`).
        self.vote_interval = config.sync_interval * config.converges_per_vote(total_steps)
        default_interval = config.default_sync_interval(total_steps)
        if config.auto_lr and config.sync_interval < default_interval and self.world_size > 1:
            numbers = dict(
                t=config.sync_interval, n=total_steps, d=default_interval, v=self.vote_interval,
                k=self.vote_interval // config.sync_interval,
            )  # fmt: skip
            how = SHORT_INTERVAL_HOW[config.controller_time_scale].format(**numbers)
            warnings.warn(SHORT_INTERVAL.format(how=how, **numbers), stacklevel=2)
        self.bucket_cap_bytes = int(config.bucket_size_mb * 2**20)
        self.replica = ReplicaTensors(model, optimizer, config.average_optimizer_state)
        self.registry = HyperparameterRegistry(
            self.world_size, config.seed, config.lr_spread, config.auto_lr, len(optimizer.param_groups),
            self.explore_until_step,
        )
        self.recorder = RunRecorder(config, self.world_size, total_steps, optimizer)
        # With a comparison horizon (only ever set with the LR controller: `HDETConfig` checks it), from the
        # first regular converge at or after this step the LR multipliers act through offsets along the run's
        # direction, not through the step size (`horizon`).
        self.horizon_start_step = config.resolve_warmup_steps(total_steps, "comparison_horizon_start")
        self.paired_votes = PairedVotes()  # before that step, with early_comparison="lower_of_both"
        self.peak_floor = PeakFloor()  # --hdet_controller_floor_after_peak: no net cut once the schedule decays
        self.centre_intact = False
        # With two replicas the train-loss vote's temperature is floored at that loss's noise (`noise_floor`).
        self.uses_noise_floor = uses_noise_floor(config, self.world_size)
        self.lrs = LearningRates(optimizer, self.registry, self.recorder.record.lr_per_step)
        # Read at a fresh run's first step with a horizon (which needs shared gradients) or with horizon_if_shared:
        # are the gradients all-reduced? (`shared_gradients`)
        self.horizon_if_shared = horizon_if_shared
        self.gradients_shared: bool | None = None
        # Pending, the line search does not yet say what it lacks without a horizon: the first step may switch it on.
        self._build_comparison(warn=not horizon_if_shared)
        self.window = ScoreWindow(track_noise=self.uses_noise_floor)  # no per-step noise sums otherwise
        self.outer = OuterStep(config.outer_lr, config.outer_momentum)
        self.step = 0
        self.steps_in_interval = 0  # since the last vote (regular converge with k = 1); identical on every rank
        # Since the last converge of any kind: 0 means the replicas are identical (see `force_converge`).
        self.steps_since_converge = 0
        self.fan_out_kept = False  # the last converge left the replicas apart (`keeps_fan_out`)
        self.last_report: ConvergeReport | None = None
        self.health = ReplicaHealth(config.divergence_factor)
        self.fitness = FitnessWeights(config.controller_temperature, config.controller_temperature_mode)
        if self.world_size > 1:
            self._check_settings_agree()

    def _build_comparison(self, warn: bool = True) -> None:
        """The parts that follow ``config.comparison_horizon``: the horizon's offsets, the line search and its
        centre point, and the early fan-out's width (``warn``: the line search's warnings)."""
        config = self.config
        self.horizon = HorizonOffsets(
            horizon_decay(config.sync_interval, config.resolve_comparison_horizon(self.total_steps)),
            config.converge_share(self.total_steps),
        )
        # --hdet_controller_line_search_threshold: far below the right LR, the probe's line search sizes a raise.
        self.line_search = LineSearchRaise.for_run(config, self.world_size, warn=warn)
        # With two replicas each rebuilds the line's centre as its third point (`centre_point`); intact while the
        # interval's start is known (set at a regular converge, cleared by a forced one).
        self.uses_centre = uses_centre_point(config, self.world_size)
        # --hdet_lr_fan_out_scale: step-size intervals (only ever alternating with a horizon) fan out narrower.
        self.lrs.fan_out_scale = config.lr_fan_out_scale if self.horizon.enabled else 1.0

    def adopt_default_horizon(self) -> None:
        """Take HDETConfig's default comparison horizon (10 % of the run with auto-LR in shared mode) in place of
        none, before the first converge: `OneCycleAutoLR` does once the first step showed shared gradients."""
        if self.trajectory or self.step > 1:
            raise RuntimeError("The comparison horizon can only be switched on before the first converge")
        self.config = dataclasses.replace(self.config, comparison_horizon=None)
        self.recorder.record.config = self.config.to_dict()
        self._build_comparison()

    def _check_settings_agree(self) -> None:
        """Refuse settings that differ between the processes of ``self.group`` (see `engine_state`)."""
        check_settings_agree(self.config, self.total_steps, self.group)

    # ------------------------------------------------------------------------------------- learning rates
    def compares_over_horizon(self) -> bool:
        """Whether this interval compares replicas by offsets along the run's direction (`horizon`) rather than
        by step size: decided by the step of its regular converge, so a resume mid-interval decides alike."""
        return self._compares_over_horizon_from(self.step - self.steps_in_interval)

    def _compares_over_horizon_from(self, interval_start: int) -> bool:
        return self.horizon.enabled and compares_by_offsets(
            interval_start, self.vote_interval, self.horizon_start_step, self.config.early_comparison
        )

    def lr_values(self, schedule_lrs: list[float]) -> list[float]:
        """This rank's LR per param group for the next step, and record the base LRs (for metadata/replay)."""
        self.lrs.step_spread = not self.compares_over_horizon()
        return self.lrs.values(schedule_lrs, self.step + 1, self.rank)

    def apply_lr(self, schedule_lrs: list[float] | None = None) -> list[float]:
        """Set every param group's LR for the next step; with no argument, re-apply the last schedule values."""
        self.lrs.step_spread = not self.compares_over_horizon()
        return self.lrs.apply(schedule_lrs, self.step + 1, self.rank)

    # ------------------------------------------------------------------------------------------- per step
    def add_loss(self, loss: torch.Tensor | float, weight: torch.Tensor | float = 1.0) -> None:
        """Add one micro-batch's mean loss over ``weight`` items (labelled tokens, examples) to the window.

        The converge compares ranks on the item-weighted mean over the window. A micro-batch with weight 0
        (nothing labelled) is skipped, whatever its loss (0/0 gives NaN). No host sync on accelerators.
        """
        self.window.add_loss(loss, weight)

    def end_step(self) -> ConvergeReport | None:
        """Count one optimizer step; converge when it lands on the grid (or is the run's last step).

        The one way every shell counts a step: call it once per optimizer step that was taken, after it.
        """
        self.step += 1
        self.steps_in_interval += 1
        self.steps_since_converge += 1
        self.window.end_step()
        # Only with the LR alone explored: e.g. a weight decay per rank enters Adam's moments in its L2 form.
        if self.step == 1 and self.world_size > 1:
            if (self.horizon.enabled or self.horizon_if_shared) and self.registry.names == [LR]:
                self.gradients_shared = gradients_shared(self.replica, self.world_size, self.group)
                if self.horizon.enabled and self.gradients_shared is False:
                    raise ValueError(HORIZON_NEEDS_SHARED_GRADIENTS)
            if self.horizon_if_shared and not self.horizon.enabled:
                if self.gradients_shared:
                    self.adopt_default_horizon()
                else:
                    self._build_comparison()  # no horizon after all: now the line search's warnings are true
        if (
            self.config.controller_signal in AVERAGED_SIGNALS
            and self.step <= self.explore_until_step
            and self.registry.any_auto
            and self._in_averaged_share()
        ):
            self.window.update_average(self.replica.param_data())
        self.recorder.record_values(self.registry.base_values())
        if self.step % self.config.sync_interval == 0:
            return self.converge(regular=True)
        if self.step >= self.total_steps:
            return self.converge(regular=False)
        return None

    def _in_averaged_share(self) -> bool:
        """Whether this step's weights enter the averaged probe's mean: the last ``averaged_probe_share`` of the
        vote's window (votes fall on multiples of the vote interval), at least one step."""
        steps = max(1, round(self.config.averaged_probe_share * self.vote_interval))
        return (self.step - 1) % self.vote_interval >= self.vote_interval - steps

    def force_converge(self) -> ConvergeReport | None:
        """Average now (before evaluating or saving), without a controller update; None when nothing moved
        since the last converge (the replicas are identical, so there is nothing to average)."""
        # Offsets set at the last converge (`horizon`), or a converge that averaged nothing (`keeps_fan_out`), also
        # leave the replicas apart, before any step.
        moved = self.steps_since_converge > 0 or self.horizon.offsets_in_place or self.fan_out_kept
        return self.converge(regular=False) if moved else None

    @property
    def in_sync_warmup(self) -> bool:
        """True while gradients are still all-reduced every step (``sync_warmup_steps`` in local mode)."""
        return self.step < self.sync_warmup_steps

    def average_gradients(self) -> None:
        """DDP's gradient sync in one flat all-reduce; used during the synchronous warm-up only."""
        if self.world_size > 1:
            self.replica.average_gradients(self.rank, self.world_size, self.bucket_cap_bytes, self.group)

    def broadcast_from_rank0(self) -> None:
        """Make every replica start from rank 0's weights (what DDP does at wrap time; ``local`` mode has no DDP)."""
        if self.world_size > 1:
            self.replica.broadcast_from_rank0(self.bucket_cap_bytes, self.group)

    def start_at_scale(self, scale: float, race: dict | None = None) -> None:
        """Start every auto-moved LR at ``scale`` x its schedule (the start race's outcome), before the first
        step; ``race`` is recorded in the schedule (``extra["start_race"]``)."""
        if self.step != 0:
            raise RuntimeError(f"The start scale is set before the first step, but this run is at step {self.step}.")
        bound = self.config.controller_max_factor
        if not (math.isfinite(scale) and 1.0 / bound <= scale <= bound):
            raise ValueError(f"The start scale must lie within the controller's bound [1/{bound}, {bound}], got {scale}.")
        for name, hparam in self.registry.hparams.items():
            if hparam.is_lr and hparam.auto:
                self.registry.controllers[name] = ControllerState(scale=float(scale))
        if race is not None:
            self.recorder.record.extra["start_race"] = race

    # ------------------------------------------------------------------------------------------- converge
    @torch.no_grad()
    def converge(self, regular: bool = True) -> ConvergeReport:
        """Average replicas now. ``regular`` converges also run the controller and draw new permutations (at
        votes: every regular converge, or every k-th with ``controller_time_scale="vote"``); forced ones (before
        evaluation/saving, at the end) only average, so every saved or evaluated model is the ensemble mean
        without changing the exploration schedule."""
        layout = StatsLayout(self.registry.names)
        vote = regular and self.step % self.vote_interval == 0
        mine, probed = self._score(layout, vote)
        if vote or not regular:
            # The averaged probe scores each replica at its mean weights over the vote's whole window, as at the
            # default interval: restarting the mean at a converge between votes scored the last T steps only and
            # turned its bias from long steps to short ones (BENCHMARKS.md, reading 40). A forced converge restarts
            # it (the replicas hold the average now).
            self.window.average_count = 0
        kept = regular and not vote and self.keeps_fan_out()
        if kept:
            gathered = layout.read(
                gather_rows(mine, self.rank, self.world_size, device=self.replica.param_data()[0].device, group=self.group)
            )
            # A diverged replica is still reset to the healthy ones' average, as at any converge.
            kept = not gathered.excluded_ranks()
        self.fan_out_kept = kept
        if not kept:
            gathered = self._exchange(layout, mine, self._average_weight(layout, mine, vote))
            self.horizon.offsets_in_place = False  # every replica holds the average now
        if not regular:
            self.centre_intact = False  # the interval no longer runs from one start (`centre_point`)
        report = self._decide(
            gathered, healthy=bool(mine[layout.HEALTHY] > 0.5), regular=regular, vote=vote, probed=probed, kept=kept
        )
        self._record(report)
        return report

    def keeps_fan_out(self) -> bool:
        """Whether this regular converge between votes leaves every replica where it is instead of averaging
        (``keep_fan_out_between_votes``): in a step-size interval with shared gradients the replicas differ only
        by their step sizes along one path, so an average would only restart the fan-out the next vote compares."""
        return (
            self.config.keep_fan_out_between_votes
            and self.vote_interval > self.config.sync_interval
            # A horizon runs only on shared gradients (checked at a fresh run's first step, so also after a resume).
            and self.horizon.enabled
            and self.registry.names == [LR]
            and not self.outer.enabled
            and self.controller_active()
            and self.step < self.explore_until_step
            and not self.compares_over_horizon()
        )

    def _score(self, layout: StatsLayout, vote: bool) -> tuple[torch.Tensor, bool]:
        """This replica's row (no communication): its window loss, the controller's signal, whether it is
        healthy (enters the average) and scored (counts for the controller). Also returns whether it probed."""
        signal = self.config.controller_signal
        mean_loss, recent_loss, loss_variance = self._window_stats()
        probed = vote and signal != "train_loss" and self.controller_active()
        if probed and (self.probe_fn is None or (signal in COOLDOWN_SIGNALS and self.cooldown_loss_fn is None)):
            raise RuntimeError(
                f"controller_signal={signal!r} needs engine.probe_fn (and cooldown_loss_fn for the cool-down "
                "signals); HDETTrainer sets them"
            )
        # Scored before averaging: the probe compares the replicas that the interval produced, at their
        # current weights or (averaged signals) at their mean weights over the interval.
        probe_loss = centre_loss = None
        if probed:
            probe_loss = self._probe_loss(at_average=signal in AVERAGED_SIGNALS)
            if self.uses_centre and self._only_lr_differs():
                centre_loss = self._centre_probe_loss(at_average=signal in AVERAGED_SIGNALS)
        self.steps_since_converge = 0
        # The guard judges the steps since the last converge: a window spanning several (votes every k-th) would
        # dilute a blow-up in its last part.
        healthy = self._is_healthy(recent_loss, probe_loss)
        loss = math.nan if mean_loss is None else mean_loss
        value = loss if probe_loss is None else probe_loss
        # The controller also drops a replica reset earlier in this interval, and one with nothing to compare.
        scored = (
            healthy
            and not self.window.diverged
            and math.isfinite(value)
            and (mean_loss is not None or signal in PROBE_ONLY_SIGNALS)
        )
        multipliers = {name: self.multiplier(name, step=self.step) for name in layout.names}
        row = layout.row(
            loss=loss, signal=value, healthy=healthy, scored=scored, multipliers=multipliers,
            centre=math.nan if centre_loss is None else centre_loss, loss_variance=loss_variance,
            recent_loss=math.nan if recent_loss is None else recent_loss,
        )  # fmt: skip
        return row, probed

    def _window_stats(self) -> tuple[float | None, float | None, float]:
        """This replica's item-weighted window loss (None: nothing to score), the same since the last converge
        (the window's whole with a vote at every converge), and the window mean's variance (NaN: no estimate;
        `noise_floor`)."""
        return self.window.mean_loss(), self.window.recent_mean_loss(), self.window.mean_variance()

    def _probe_loss(self, at_average: bool) -> float:
        """The probe's loss for this replica, at its current or (``at_average``) its interval-mean weights."""
        assert self.probe_fn is not None
        if self.config.controller_signal in COOLDOWN_SIGNALS:
            assert self.cooldown_loss_fn is not None
            # From the shared base LR (``cooldown_lr="base"``): this rank's LR divided by the factor it stepped at
            # (none in a horizon interval, where every rank steps at the base LR).
            stepped = 1.0 if self.compares_over_horizon() else self.lrs.step_multiplier(LR, self.step, self.rank)
            start = 1.0 / stepped if self.config.cooldown_lr == "base" else 1.0
            return cooldown_score(
                self.replica.params, self.optimizer, self.cooldown_loss_fn, self.probe_fn,
                self.config.cooldown_steps, self.cooldown_max_grad_norm, lr_scale=start,
            )
        return self.window.score(self.replica.params, self.probe_fn, at_average=at_average)

    def _only_lr_differs(self) -> bool:
        """Whether the replicas differ only in LR: another spread hyperparameter (e.g. weight decay, whose decoupled
        step depends on each replica's value) moves them off the line whose centre `centre_point` rebuilds."""
        return all(h.is_lr or h.spread == 0 for h in self.registry.hparams.values())

    def _centre_probe_loss(self, at_average: bool) -> float | None:
        """The probe's loss at the line's centre as this replica rebuilds it from its current or (``at_average``)
        interval-mean weights (`centre_point`); None when this interval has no known start."""
        if not self.centre_intact:
            return None
        window = self.window
        averaged = at_average and window.average_count and window.average is not None
        own = window.average if averaged else self.replica.param_data()
        if self.compares_over_horizon():
            assert self.horizon.directions is not None  # offsets were applied along it
            # With votes every k-th converge the interval's mean spans k offsets along successive Z's (each converge
            # between votes averages and offsets again); the centre is rebuilt along the latest, an approximation
            # to within Z's change over the window.
            amount = self.horizon.offset_scale * (self.multiplier(step=self.step) - 1.0)
            weights = centre_after_offsets(own, self.horizon.directions, amount)
        else:
            assert self.horizon.anchors is not None  # the start of this step-size interval
            weights = centre_after_step_size(own, self.horizon.anchors, self.lrs.step_multiplier(LR, self.step, self.rank))
        return self._probe_at(weights)

    def _probe_at(self, weights: list[torch.Tensor]) -> float:
        """The probe's loss with the trainable parameters swapped to ``weights``."""
        assert self.probe_fn is not None
        return probe_at(self.replica.params, weights, self.probe_fn)

    def _is_healthy(self, window_loss: float | None, probe_loss: float | None) -> bool:
        """Whether this replica enters the average (`ReplicaHealth.healthy`; HSDP judges a group as one)."""
        return self.health.healthy(window_loss, probe_loss, self.replica.all_finite)

    def _average_weight(self, layout: StatsLayout, mine: torch.Tensor, vote: bool) -> float:
        """This replica's weight in the average: 1, or with ``converge_weights="fitness"`` at a vote while a
        controller explores, ``exp(-z)`` of its scores (`fitness`)."""
        if not (
            self.config.converge_weights == "fitness"
            and vote
            and self.controller_active()
            and bool(mine[layout.SCORED] > 0.5)
        ):
            return 1.0
        both = self.config.controller_signal.startswith("train_and_")
        scores = [float(mine[layout.LOSS]), float(mine[layout.SIGNAL])] if both else [float(mine[layout.SIGNAL])]
        return self.fitness.weight(scores)

    def _exchange(self, layout: StatsLayout, mine: torch.Tensor, weight: float = 1.0) -> GatheredStats:
        """The one collective: average the healthy replicas' tensors (``weight``: this one's weight) and
        gather every rank's row."""
        try:
            table, _ = fused_average_(
                self.replica.to_average(), mine, self.rank, self.world_size,
                contribute=bool(mine[layout.HEALTHY] > 0.5), weight=weight, bucket_cap_bytes=self.bucket_cap_bytes,
                group=self.group, workspace=self.replica.workspace,
            )
        except NoContributorError as error:
            # Every rank sees the same (zero) count, so every rank stops here, before anything is saved.
            raise self.health.all_diverged(self.step) from error
        return layout.read(table)

    def _decide(
        self, gathered: GatheredStats, *, healthy: bool, regular: bool, vote: bool, probed: bool, kept: bool = False
    ) -> ConvergeReport:
        """Act on what was gathered: reset a diverged replica, move the divergence reference, and (regular
        converges) take the outer step and (votes) run the controller and draw the next interval's permutations.
        ``kept``: nothing was averaged (`keeps_fan_out`)."""
        losses, excluded = gathered.losses.tolist(), gathered.excluded_ranks()
        recent = gathered.recent_losses.tolist()
        if excluded:
            self.recorder.record_divergence(self.step, excluded, recent, gathered.multipliers, self.rank)
        if not healthy:
            # This replica now holds the average: its diverged loss must not be counted again, nor its moments.
            self.replica.reset_optimizer_moments()
            self.window.reset_loss()
            self.window.average_count = 0
            self.window.diverged = True
        self.health.observe(recent, gathered.scored.tolist())
        # The values of the interval just ended: taken before the controller moves them.
        bases = {**self.lrs.bases_at(self.step), **self.registry.base_values()}
        report = ConvergeReport(
            step=self.step, regular=regular, base=bases, multipliers=gathered.multipliers, losses=losses,
            probe_losses=gathered.signals.tolist() if probed else [], excluded_ranks=excluded,
            scale={n: self.controllers[n].scale for n in self.registry.names},
        )
        if not regular:
            return report
        if self.outer.enabled:
            self.outer.step_(self.replica.param_data())
        if vote and self.controller_active() and bool(gathered.scored.any()):
            self._move_controllers(gathered, report, bases)
        if vote:
            self.registry.redraw()
        self.apply_values()
        # The next steps' interval: a new one after a vote; between votes the same one goes on (its multipliers
        # and offsets are held, its window keeps summing).
        next_start = self.step if vote else self.step - self.steps_in_interval
        if kept:
            # The anchor stays where the replicas' step-size fan-out started (the centre is still rebuilt from it);
            # Z is discounted as at any converge and takes this stretch's update at the next average.
            self.horizon.discount_()
        elif self.horizon.enabled:
            if self.step < self.explore_until_step:
                # Each replica starts the next interval at the average + (1 - decay)(m_r - 1) x the run's
                # recent direction (`horizon`).
                self.horizon.update_(self.replica.param_data())
                if (
                    self.controller_active()
                    and self.step < self.total_steps
                    and self._compares_over_horizon_from(next_start)
                ):
                    amount = self.horizon.offset_scale * (self.multiplier(step=self.step + 1) - 1.0)
                    self.horizon.offset_(self.replica.param_data(), amount)
            else:
                self.horizon.release()  # exploration is over: the two parameter copies are not needed again
        # The next interval's centre is known if it starts at the anchor (step size) or at offsets along Z; a kept
        # converge leaves it as it was.
        if not kept:
            self.centre_intact = self.uses_centre and (
                self.horizon.offsets_in_place
                if self._compares_over_horizon_from(next_start)
                else self.horizon.anchors is not None
            )
        if not vote:
            self.window.mark()
            return report
        self.window.reset_loss()
        self.window.diverged = False
        self.steps_in_interval = 0
        return report

    def _record(self, report: ConvergeReport) -> None:
        """Regular converges enter the run record's trajectory; every converge is the shells' `last_report`."""
        if report.regular:
            self.recorder.record_converge(report, self.rank)
        self.last_report = report
