"""LR-scheduler shells over `HDETEngine`.

- `HDETLRScheduler` wraps any scheduler (the Trainer's, or a user's in a ``no_trainer`` loop): the wrapped
  schedule gives the base LR, the engine multiplies in the controller's correction and this rank's
  multiplier.
- `OneCycleAutoLR` is a drop-in replacement for the paper's reference scheduler of the same name: same
  constructor arguments, same ``step(loss)``, built on the same engine.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LRScheduler, OneCycleLR

from .config import DEFAULT_START_RACE_STEPS, HDETConfig
from .engine import ConvergeReport, HDETEngine
from .learning_rates import set_group_lr
from .race_runner import race_user_batches
from .start_race import RaceDecision

__all__ = ["HDETLRScheduler", "OneCycleAutoLR", "one_cycle_base_schedule"]

NO_PROBE = (
    "OneCycleAutoLR: auto-LR without probe_fn compares the replicas on their train losses alone. In a hand-written "
    "loop (300-step task, 4 processes, 3 seeds) that raised a correct LR 1.4-2.5x and ended 1.013x the sweep's best "
    "at the best LR and 1.042x from 3x above, against 0.998x and 1.029x with a probe (BENCHMARKS.md, reading 36). "
    "Pass probe_fn=<the model's loss on a few held-out examples, the same batch on every rank>."
)


def one_cycle_base_schedule(
    optimizer: torch.optim.Optimizer, num_training_steps: int, warmup_steps: int = 0
) -> OneCycleLR:
    """HDETTrainer's default base schedule (``--hdet_base_schedule one_cycle``), also the DDP baseline's in the
    benchmarks so that the two cannot drift apart.

    OneCycle with each param group's current LR as its peak, warm-up ``warmup_steps`` (30 % when 0), no
    momentum cycling (so ``--adam_beta1`` holds).

    Example:
        >>> import torch
        >>> opt = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=1e-3)
        >>> sched = one_cycle_base_schedule(opt, num_training_steps=10)
        >>> round(sched.get_last_lr()[0], 6)   # OneCycle starts at peak / 25
        4e-05
    """
    pct_start = warmup_steps / num_training_steps if warmup_steps > 0 else 0.3
    return OneCycleLR(
        optimizer,
        max_lr=[g["lr"] for g in optimizer.param_groups],
        total_steps=num_training_steps,
        # OneCycleLR divides by (pct_start * total - 1): keep at least 2 warm-up steps.
        pct_start=min(max(pct_start, 2.0 / num_training_steps), 0.99),
        cycle_momentum=False,
    )


class HDETLRScheduler(LRScheduler):
    """Applies HDET's per-rank LRs on top of an existing scheduler.

    ``get_last_lr()`` returns the LRs this rank actually runs; ``state_dict()`` is the wrapped scheduler's
    (identical on every rank), so the Trainer's rank-0 ``scheduler.pt`` stays valid. HDET's own state is
    saved by the engine.

    Example:
        >>> import torch
        >>> from hdet_hf import HDETConfig
        >>> from hdet_hf.engine import HDETEngine
        >>> model = torch.nn.Linear(2, 1)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> inner = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (step + 1))
        >>> sched = HDETLRScheduler(inner, HDETEngine(HDETConfig(sync_interval=2), model, opt, total_steps=4))
        >>> sched.step(); sched.get_last_lr()
        [0.05]
    """

    # LRScheduler.__init__ is not called on purpose: it would take an extra step of the wrapped schedule.
    def __init__(self, inner: LRScheduler, engine: HDETEngine) -> None:  # noqa: D107
        self.inner = inner
        self.engine = engine
        self.optimizer = inner.optimizer
        self.base_lrs = list(getattr(inner, "base_lrs", [g["lr"] for g in self.optimizer.param_groups]))
        self.last_epoch = inner.last_epoch
        self._schedule_lrs = [float(x) for x in inner.get_last_lr()]
        self._last_lr = engine.apply_lr(self._schedule_lrs)

    def step(self, epoch: Any = None) -> None:  # noqa: ARG002 - signature of LRScheduler.step
        # Put the unscaled values back first so schedules that read group["lr"] (chainable ones) do not
        # compound our factors.
        for group, lr in zip(self.optimizer.param_groups, self._schedule_lrs):
            set_group_lr(group, lr)
        self.inner.step()
        self.last_epoch = self.inner.last_epoch
        self._schedule_lrs = [float(x) for x in self.inner.get_last_lr()]
        self._last_lr = self.engine.apply_lr(self._schedule_lrs)

    def reapply(self) -> None:
        """Re-apply the current schedule values (after a converge changed multipliers or a resume)."""
        self._last_lr = self.engine.apply_lr(self._schedule_lrs)

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def get_lr(self) -> list[float]:
        return self.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.inner.load_state_dict(state_dict)
        self.last_epoch = self.inner.last_epoch
        self._schedule_lrs = [float(x) for x in self.inner.get_last_lr()]
        self.reapply()


class OneCycleAutoLR(OneCycleLR):
    """Drop-in for the paper's ``OneCycleAutoLR``: OneCycleLR plus HDET spread, converge and auto-LR.

    Accepts the reference's arguments; switching is a one-line import change. Differences, all deliberate:
    ``rank``/``world_size`` are read from torch.distributed at run time (the reference applied the spread only
    when they differed from the constructor's, so usually never); the spread applies from the first step;
    replicas are averaged every ``model_sync_interval`` steps whenever there is more than one process (also
    with auto-LR off), in one fused all-reduce; permutations come from a private generator (the reference
    re-seeded the global RNG); ``total_steps`` may come from ``epochs * steps_per_epoch``; the
    controller is a bounded correction on top of the OneCycle shape, which is kept after warm-up; and
    exploration ends halfway by default (``explore_until``, below), where the reference explores to the end.
    ``model_sync_interval`` may also be a fraction of the run in (0, 1), as ``--hdet_sync_interval`` (e.g.
    0.03, the library's default; never below 10 steps); the reference's default, 1000 steps, is kept.

    ``step(loss)`` is called once per optimizer step with that step's loss. Our additions are keyword-only:
    ``model`` (average buffers too), ``controller_update``/``controller_temperature_mode``, ``probe_fn``: a
    callable returning the model's loss on one fixed batch, identical on every rank (e.g. a few held-out
    examples). With it the controller compares replicas on the train loss *and* on that batch at each
    replica's mean weights over the interval (``train_and_averaged_probe``, the de-biased signal measured in
    BENCHMARKS.md), and moves only when the two ask for the same direction (``HDETConfig``'s default
    ``controller_signal_combination="agree_mean"``); without it on the train loss alone, as the reference
    does. And ``explore_until``
    (``HDETConfig.explore_until``, default 0.5): where exploration ends, a fraction of the run in (0, 1] or
    an integer step >= 1. After it the controller stops and the spread is 0, so the rest of the run is
    plain data-parallel training on the OneCycle schedule as corrected so far; 1.0 explores to the last
    step, as the reference does. ``comparison_horizon``: with auto-LR and gradients all-reduced every step
    (`shared` mode), e.g. 0.1 compares replicas along the run's direction over 10 % of the run, as ``HDETConfig``'s
    default does in shared mode (``--hdet_comparison_horizon``); 0 is the reference's one-interval comparison. The
    default, None, is HDETConfig's default (0.1 with auto-LR) when ``model`` is the DistributedDataParallel-wrapped
    model (the engine averages its ``.module``). Otherwise the first step decides (one gather of a float,
    `shared_gradients`): shared gradients switch that horizon on from the second step (the first step's fan-out
    ran at full width), local ones keep the reference's comparison, which is right for them. A horizon with
    gradients that are not shared is refused at the first step.
    ``comparison_horizon_start`` (``--hdet_comparison_horizon_start``, default 0.3):
    where the horizon takes over; before it the lower of two alternating comparisons moves the LR.
    ``raise_gain`` (``--hdet_controller_raise_gain``, default 2): with ``controller_update="multiplicative"``,
    moves that raise the LR are this many times ``lr_of_lr``; the paper's additive update ignores it.
    ``floor_after_peak`` (``--hdet_controller_floor_after_peak``, default True): once OneCycle's LR falls and
    ``comparison_horizon_start`` is passed, the controller no longer lowers the LR below the factor it had then.
    ``line_search_threshold`` (``--hdet_controller_line_search_threshold``): with ``probe_fn`` and >= 3 processes
    (2 with a ``comparison_horizon``: each rebuilds the line's centre, `hdet_hf.centre_point`), far below the right
    LR the probe's line search sizes a raise (`hdet_hf.line_search`); 0 turns it off.
    ``line_search_max_raise`` (``--hdet_controller_line_search_max_raise``, default 4): the largest factor one
    such raise may take.
    ``line_search_breaks_ties`` (``--hdet_controller_line_search_breaks_ties``): the line search may also raise
    when the two scores disagree (the controller would hold).
    ``fan_out_scale`` (``--hdet_lr_fan_out_scale``, default 0.4): with a ``comparison_horizon``, the step-size
    intervals before ``comparison_horizon_start`` fan out at this fraction of the spread; 1 = the full spread.
    ``noise_floor`` (``--hdet_controller_noise_floor``) and ``abstain_within_noise``
    (``--hdet_controller_abstain_within_noise``): the train-loss vote's floor at its noise, and what a gap within it
    votes. ``controller_time_scale`` (``--hdet_controller_time_scale``, default "vote"): with a ``model_sync_interval``
    shorter than 3 % of the run the controller still votes once per 3 % of the run, on the windows of every converge
    since its last vote summed (the converges between do not vote); "run": a vote at every converge, each moving
    lambda x T / T_default with momentum beta ^ (T / T_default); "converge": full moves at every converge, as the
    reference. ``keep_fan_out_between_votes`` (``--hdet_keep_fan_out_between_votes``, default True): with "vote", the
    converges between votes of a step-size interval leave each replica where it is (shared gradients: they differ
    only by their step sizes), so the vote compares step sizes over its whole window. ``averaged_probe_share``
    (``--hdet_averaged_probe_share``, default 1): with a ``probe_fn``, the share of each vote's window, counted back
    from the vote, over which the probe averages each replica's weights. ``stall_ceiling``
    (``--hdet_start_race_stall_ceiling``, default True): after `start_race`, the controller never raises the LR to a
    raced candidate whose copy stalled, nor above it.

    Example:
        >>> import torch
        >>> from hdet_hf import OneCycleAutoLR
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> sched = OneCycleAutoLR(opt, max_lr=0.1, total_steps=100, ensemble_lr_spread_ratio=0.0)
        >>> loss = model(torch.randn(8, 4)).pow(2).mean(); loss.backward(); opt.step()
        >>> sched.step(loss)
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: Literal["cos", "linear"] = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
        auto_lr_warmup_steps: float = 100000,
        ensemble_lr_spread_ratio: float = 0.0,
        model_sync_interval: float = 1000,
        rank: int | None = None,
        world_size: int | None = None,
        enable_auto_lr: bool = False,
        loss_scale: float = 0.002,
        lr_of_lr: float = 0.5,
        momentum_of_lr: float = 0.9,
        *,
        model: nn.Module | None = None,
        controller_update: str = "additive",
        controller_temperature_mode: str = "fixed",
        seed: int = 0,
        probe_fn: Callable[[], float] | None = None,
        explore_until: float = HDETConfig.explore_until,
        comparison_horizon: float | None = None,
        comparison_horizon_start: float = HDETConfig.comparison_horizon_start,
        raise_gain: float = HDETConfig.controller_raise_gain,
        floor_after_peak: bool = HDETConfig.controller_floor_after_peak,
        line_search_threshold: float = HDETConfig.controller_line_search_threshold,
        line_search_max_raise: float = HDETConfig.controller_line_search_max_raise,
        fan_out_scale: float = HDETConfig.lr_fan_out_scale,
        line_search_breaks_ties: bool = HDETConfig.controller_line_search_breaks_ties,
        noise_floor: str = HDETConfig.controller_noise_floor,
        abstain_within_noise: str = HDETConfig.controller_abstain_within_noise,
        controller_time_scale: str = HDETConfig.controller_time_scale,
        keep_fan_out_between_votes: bool = HDETConfig.keep_fan_out_between_votes,
        averaged_probe_share: float = HDETConfig.averaged_probe_share,
        stall_ceiling: bool = True,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            total_steps = epochs * steps_per_epoch
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        # Checked under the reference's argument names (HDETConfig would name CLI flags the caller never used).
        if not (isinstance(ensemble_lr_spread_ratio, (int, float)) and 0.0 <= ensemble_lr_spread_ratio < 1.0):
            raise ValueError(
                f"ensemble_lr_spread_ratio must be in [0, 1), but got {ensemble_lr_spread_ratio!r}: rank "
                "multipliers are 1 - ratio .. 1 + ratio and must stay positive. Use e.g. 0.5."
            )
        fraction = isinstance(model_sync_interval, float) and 0 < model_sync_interval < 1
        if not fraction and (
            not isinstance(model_sync_interval, int)
            or isinstance(model_sync_interval, bool)
            or model_sync_interval < 1
        ):
            raise ValueError(
                "model_sync_interval must be a positive integer number of steps or a fraction of the run in "
                f"(0, 1) (e.g. 0.03, HDETConfig's default), but got {model_sync_interval!r}"
            )
        if not (isinstance(loss_scale, (int, float)) and loss_scale > 0):
            raise ValueError(
                f"Expected positive loss_scale (the softmax temperature), but got {loss_scale!r}"
            )
        if not (isinstance(lr_of_lr, (int, float)) and lr_of_lr >= 0):
            raise ValueError(f"Expected non-negative lr_of_lr, but got {lr_of_lr!r}")
        if not (isinstance(momentum_of_lr, (int, float)) and 0.0 <= momentum_of_lr < 1.0):
            raise ValueError(f"Expected momentum_of_lr in [0, 1), but got {momentum_of_lr!r}")
        if rank is not None or world_size is not None:
            warnings.warn(
                "OneCycleAutoLR reads rank and world_size from torch.distributed at run time; the rank/world_size "
                "arguments are accepted for compatibility and ignored.",
                stacklevel=2,
            )
        if enable_auto_lr and auto_lr_warmup_steps >= total_steps:
            raise ValueError(
                f"auto_lr_warmup_steps={auto_lr_warmup_steps} is not before the end of the run "
                f"(total_steps={total_steps}), so auto-LR would never start (the reference's default is 100000). "
                "Pass e.g. auto_lr_warmup_steps=0.1 (a fraction of the run) or a step count < total_steps."
            )
        if not (
            isinstance(explore_until, (int, float))
            and not isinstance(explore_until, bool)
            and math.isfinite(explore_until)
            and explore_until > 0
        ) or (explore_until > 1 and explore_until != int(explore_until)):
            raise ValueError(
                f"explore_until must be a fraction of the run in (0, 1] or an integer step >= 1, but got "
                f"{explore_until!r}. Use e.g. 0.5, or 1.0 to explore to the last step."
            )
        # The gradients are visible as shared only through the wrapper (the engine itself averages the module).
        wrapped = isinstance(model, DistributedDataParallel)
        if wrapped:
            model = model.module
        # None: HDETConfig's own default (10 % of the run with auto-LR) where we see DDP; else none until the first
        # step shows whether the gradients are shared (the engine then switches it on: `shared_gradients`).
        horizon_unknown = comparison_horizon is None and not wrapped
        if enable_auto_lr and ensemble_lr_spread_ratio == 0:
            raise ValueError(
                "enable_auto_lr=True needs ensemble_lr_spread_ratio > 0: with no spread every rank runs the same "
                "LR and there is no hypergradient to measure"
            )
        self.hdet_config = HDETConfig(
            lr_spread=ensemble_lr_spread_ratio,
            sync_interval=model_sync_interval if fraction else min(model_sync_interval, total_steps),
            auto_lr=enable_auto_lr,
            auto_lr_warmup_steps=auto_lr_warmup_steps if enable_auto_lr else 0.0,
            controller_temperature=loss_scale,
            controller_temperature_mode=controller_temperature_mode,
            controller_lr=lr_of_lr,
            controller_momentum=momentum_of_lr,
            controller_update=controller_update,
            seed=seed,
            explore_until=explore_until,
            comparison_horizon=0.0 if horizon_unknown else comparison_horizon,
            comparison_horizon_start=comparison_horizon_start,
            controller_raise_gain=raise_gain,
            controller_floor_after_peak=floor_after_peak,
            controller_line_search_threshold=line_search_threshold,
            controller_line_search_max_raise=line_search_max_raise,
            lr_fan_out_scale=fan_out_scale,
            controller_line_search_breaks_ties=line_search_breaks_ties,
            controller_noise_floor=noise_floor,
            controller_abstain_within_noise=abstain_within_noise,
            controller_time_scale=controller_time_scale,
            keep_fan_out_between_votes=keep_fan_out_between_votes,
            averaged_probe_share=averaged_probe_share,
            # Unset caps wherever a race ran (`start_race` below); a loop that never calls it has nothing to cap.
            start_race_stall_ceiling=None if stall_ceiling else False,
            # Without a probe the reference's signal; with one the de-biased one (see HDETConfig).
            controller_signal="train_and_averaged_probe" if probe_fn is not None else "train_loss",
        )
        sync = self.hdet_config.resolve_sync_interval(total_steps)
        until = self.hdet_config.resolve_explore_until(total_steps)
        warmup = self.hdet_config.resolve_warmup_steps(total_steps)
        if enable_auto_lr and until < total_steps and until // sync * sync < max(warmup, 1):
            raise ValueError(
                f"No converge falls between the end of auto_lr_warmup_steps={auto_lr_warmup_steps} (step {warmup}) "
                f"and the end of exploration, explore_until={explore_until} (step {until} of {total_steps}), with "
                f"model_sync_interval={model_sync_interval}: auto-LR would never run. Pass a shorter "
                "auto_lr_warmup_steps or model_sync_interval, or explore_until=1.0 to explore to the last step."
            )
        # The engine exists before OneCycleLR.__init__, whose initial step already goes through get_lr().
        self.engine = HDETEngine(
            self.hdet_config,
            model,
            optimizer,
            total_steps,
            horizon_if_shared=horizon_unknown and enable_auto_lr,
        )
        self.engine.probe_fn = probe_fn
        if enable_auto_lr and probe_fn is None and self.engine.world_size > 1:
            warnings.warn(NO_PROBE, stacklevel=2)
        super().__init__(
            optimizer,
            max_lr,
            total_steps=total_steps,
            pct_start=pct_start,
            anneal_strategy=anneal_strategy,
            cycle_momentum=cycle_momentum,
            base_momentum=base_momentum,
            max_momentum=max_momentum,
            div_factor=div_factor,
            final_div_factor=final_div_factor,
            three_phase=three_phase,
            last_epoch=last_epoch,
        )
        if self.engine.world_size > 1:
            self.engine.broadcast_from_rank0()

    def get_lr(self) -> list[float]:
        return self.engine.lr_values([float(x) for x in super().get_lr()])

    def step(self, loss: torch.Tensor | float | None = None, epoch: Any = None) -> None:  # type: ignore[override]
        """Count one optimizer step (with its loss) and set the next LRs. Call after ``optimizer.step()``."""
        engine = getattr(self, "engine", None)
        if engine is not None and getattr(self, "_hdet_started", False):
            if loss is not None:
                engine.add_loss(loss)
            self.last_report: ConvergeReport | None = engine.end_step()
            if engine.step == 1:  # the one step at which the engine may switch its horizon on
                self._follow_engine_horizon()
        self._hdet_started = True
        super().step()

    def start_race(
        self,
        model: nn.Module,
        train_batches: Sequence[Any],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        probe_batches: Sequence[Any],
        *,
        steps: int = DEFAULT_START_RACE_STEPS,
        max_grad_norm: float | None = None,
        lowers: bool = True,
        grad_scaler: torch.amp.GradScaler | None = None,
        lower_train_batches: Sequence[Any] | None = None,
        accumulation_steps: int = 1,
    ) -> RaceDecision | None:
        """The start race before the first step (HDETTrainer's default with auto-LR, ``--hdet_start_race_steps``).

        The replicas train copies of the initial weights for ``steps`` steps each at 4 constant LRs (``max_lr`` x
        1, 2.15, 4.64, 10) and one step below (x 0.464), all on the first ``steps`` of ``train_batches``, and score
        each copy on ``probe_batches``: one loss per batch (e.g. 32 batches of one held-out example each), paired
        over the copies. With ``lower_train_batches`` the start and the copy below it race again on those batches
        (they decide a lowering and confirm a raise): HDETTrainer's split race, ``train_batches`` of half the global
        batch a step and ``lower_train_batches`` of a quarter (BENCHMARKS.md items 56-58); without it every copy
        trains on ``train_batches``. The run keeps its initial weights, optimizer state and random streams; the
        controller starts at the scale the rule of `hdet_hf.start_race` decides (a start far below the right LR is raised, one
        that stalls is lowered one step, otherwise nothing changes), recorded in the schedule's record
        (``engine.recorder.record.extra["start_race"]``, hdet_schedule.json).

        ``model``: the model being trained (the DistributedDataParallel wrapper or its module: the race trains the
        module, so no gradients are all-reduced while each replica races its own LR). ``loss_fn(model, batch)``
        returns the mean loss of ``batch`` under ``model`` (the loop's own forward: autocast inside it if the loop
        uses it). ``train_batches`` (one race step's batch each: half the global batch with ``lower_train_batches``, as
        HDETTrainer's candidates take; alone, one rank's batch, and on 8 or more processes a quarter of the global
        batch), ``lower_train_batches`` and ``probe_batches`` must be the same on every rank (e.g. drawn with a
        seeded generator): they are checked, and refused where they differ. ``accumulation_steps``: each race step
        accumulates that many consecutive batches of each list (pass batches no larger than the loop's own, and
        ``steps`` x ``accumulation_steps`` of them: a copy's step may be larger than one device fits). ``max_grad_norm``:
        clip as the loop does. ``grad_scaler``: the loop's ``torch.amp.GradScaler`` under fp16 (each copy steps
        through a fresh one with its state, so small gradients do not underflow and an overflow skips the step, as
        in the loop; the loop's own scaler is not changed). Costs ceil(5 / N) x ``steps`` extra steps per replica (N
        processes; with ``lower_train_batches`` ceil(4 / N) + ceil(2 / N); ``lowers=False``: ceil(4 / N), and the
        pair's round more when it would raise). Call it after building the scheduler and before the first
        ``optimizer.step()``; with one process it races nothing and returns None.
        """
        decision = race_user_batches(
            self.engine, model, self.optimizer, train_batches, loss_fn, probe_batches,
            steps=steps, max_grad_norm=max_grad_norm, lowers=lowers, switch="enable_auto_lr=True to OneCycleAutoLR",
            grad_scaler=grad_scaler, lower_train_batches=lower_train_batches, accumulation_steps=accumulation_steps,
        )  # fmt: skip
        if decision is not None:
            # The first step's LRs were set when the scheduler was built, at scale 1.
            self._last_lr = self.engine.apply_lr()
        return decision

    def _follow_engine_horizon(self) -> None:
        """``hdet_config`` says what runs: the default horizon once the engine switched it on (`shared_gradients`)."""
        if self.engine.horizon.enabled and self.hdet_config.comparison_horizon == 0:
            self.hdet_config = dataclasses.replace(self.hdet_config, comparison_horizon=None)

    @property
    def last_sync(self) -> ConvergeReport | None:
        """Deprecated name of ``last_report`` (the last converge's report, or None)."""
        return getattr(self, "last_report", None)

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        return self.engine.trajectory

    def state_dict(self) -> dict[str, Any]:
        state = {
            k: v for k, v in super().state_dict().items() if k not in ("engine", "hdet_config", "last_report")
        }
        state["hdet"] = self.engine.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        hdet = state.pop("hdet", None)
        super().load_state_dict(state)
        if hdet is not None:
            # A run whose first step switched the horizon on (shared gradients) continues with it.
            saved = (hdet.get("config") or {}).get("comparison_horizon", 0)
            if self.engine.horizon_if_shared and saved != 0 and not self.engine.horizon.enabled:
                self.engine.adopt_default_horizon()
                self._follow_engine_horizon()
            self.engine.load_state_dict(hdet)
