"""The controller's move at a regular converge (mixed into `HDETEngine`): the registry's votes, and the rules the
defaults add on top of them for the LR.

- Early phase (``--hdet_early_comparison lower_of_both``): while step-size and offset intervals alternate, each
  kind's vote is capped by the other kind's latest one (`horizon.PairedVotes`).
- Line search (``--hdet_controller_line_search_threshold``): far below the right LR, a passed raise is at least
  what the probe's line search allows (`line_search`).
- Noise floor (``--hdet_controller_noise_floor``): with two replicas the train-loss vote is sized by its gap against
  the loss's noise, not standardised to full size (`noise_floor`).
- Floor after the peak (``--hdet_controller_floor_after_peak``): once the schedule decays, no net cut
  (`peak_floor`).
- Ceiling after a lowering start race (``--hdet_start_race_lowers``): never above the lowered start; it wins over
  the floor (`race_ceiling`).

The rules themselves are pure (their modules); this mixin only feeds them what the converge gathered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .centre_point import with_centre
from .converge_stats import GatheredStats
from .learning_rates import narrowed
from .line_search import line_search_optimum
from .noise_floor import score_noise
from .registry import LR
from .run_record import ConvergeReport

if TYPE_CHECKING:
    from .engine import HDETEngine

__all__ = ["ControllerStep"]


class ControllerStep:
    """`HDETEngine`'s controller step (mixed in); the engine provides every attribute used here."""

    def _move_controllers(
        self: HDETEngine, gathered: GatheredStats, report: ConvergeReport, bases: dict[str, float]
    ) -> None:
        """Move every active controller on the gathered scores, apply the rules, and record the moves in
        ``report`` (``report.scale`` holds the factors before the move on entry, after it on return)."""
        report.controller_active = True
        if self.config.controller_floor_after_peak and self.lrs.schedule_lrs:
            # The base schedule's value (largest param group, without the controller's factor) here.
            lr_scales = {n: v for n, v in report.scale.items() if self.registry.hparams[n].is_lr}
            self.peak_floor.observe(max(self.lrs.schedule_lrs), lr_scales, armed=self.step >= self.horizon_start_step)
        both = self.config.controller_signal.startswith("train_and_")
        signal = torch.stack([gathered.losses, gathered.signals]) if both else gathered.signals
        active = [name for name in self.registry.names if self.controller_active(name)]
        kind = self._paired_kind()
        caps = {LR: self.paired_votes.cap(kind)} if kind is not None else None
        noise = self._row_noise(gathered, both)
        report.loss_noise = noise[0] if noise else None  # the train-loss row comes first
        infos = self.registry.update_controllers(
            active, gathered.multipliers, signal, gathered.scored, bases, self.settings, caps, noise=noise
        )
        if kind is not None and LR in infos:
            self.paired_votes.record(kind, infos[LR]["raw_delta"])
        if LR in infos and self.line_search.enabled:
            report.line_search_optimum = self._line_search_optimum(gathered)
            factor = self.line_search.raise_for(report.line_search_optimum, infos[LR]["delta"])
            if factor > 1.0:  # a passed raise (or a tie) at least as large as the line search allows
                self.registry.clamp_controller(LR, min(report.scale[LR] * factor, self.settings.max_factor))
        ceiling = self.race_ceiling()
        for name, info in infos.items():
            floor = self.peak_floor.floor(name)
            if floor is not None:
                self.registry.clamp_controller(name, floor)
            if ceiling is not None and self.registry.hparams[name].is_lr:
                self.registry.cap_controller(name, ceiling)
            report.weights = info["weights"]  # identical for every hyperparameter
            report.delta[name] = info["delta"]
            report.velocity[name] = self.controllers[name].velocity
            report.scale[name] = self.controllers[name].scale
        if self.config.converge_weights == "fitness":
            self.fitness.observe(signal, gathered.scored)

    def race_ceiling(self: HDETEngine) -> float | None:
        """After a start race that lowered the start (``--hdet_start_race_lowers``): the LR factor the controller
        never goes above, the lowered start; unless ``--hdet_start_race_stall_ceiling false``, after any race where a
        candidate's copy stalled: the largest candidate below it (`start_race.stall_ceiling`). After a lowering the
        race saw the configured LR stall or collapse, and the largest LR it saw learn is the one it started at; without the cap the line search's raise took a lowered run (task i,
        seed 2, reading 47) from 1.4x to 6.6x its best LR in one converge, and it collapsed. Read from the run's record
        (``extra["start_race"]``), which a checkpoint keeps."""
        race = self.recorder.record.extra.get("start_race")
        if not race:
            return None
        if race.get("lowered"):
            return float(race["scale"])
        # Unset (None) caps wherever a race recorded a stalled candidate; a race record from before session 46 has no
        # "stall_ceiling" and is not capped.
        if self.config.start_race_stall_ceiling is not False and race.get("stall_ceiling") is not None:
            ceiling = max(float(race["stall_ceiling"]), float(race["scale"]))
            # Only where a copy above the first step up stalled: a ceiling at the start itself (the 2.15x copy
            # stalled) would freeze the controller, and the race's copies run without the run's warm-up, so their
            # edge of stability sits lower than the run's. At the classifiers' best LR the 2.15x copy stalled and
            # the default's raises to 1.2-1.6x did better than a cap at 1 (BENCHMARKS.md item 49).
            return ceiling if ceiling > 1.0 else None
        return None

    def _row_noise(self: HDETEngine, gathered: GatheredStats, both: bool) -> list[float | None] | None:
        """Each score row's temperature floor (`noise_floor`): the train loss's noise on its row, none on a
        probe's; None when the run has no floor."""
        if not self.uses_noise_floor:
            return None
        noise = score_noise(gathered.loss_variances, gathered.scored)
        if both:
            return [noise, None]
        return [noise if self.config.controller_signal == "train_loss" else None]

    def _paired_kind(self: HDETEngine) -> str | None:
        """At a regular converge: the kind of the interval that just ended while the two kinds alternate."""
        interval_start = self.step - self.steps_in_interval
        early = self.horizon.enabled and interval_start < self.horizon_start_step
        if not early or self.config.early_comparison != "lower_of_both":
            return None
        return "horizon" if self._compares_over_horizon_from(interval_start) else "one_interval"

    def _line_search_optimum(self: HDETEngine, gathered: GatheredStats) -> float | None:
        """The probe's line-search optimum over the interval just ended (None: no line to fit)."""
        # A horizon interval that started before Z held an update had every replica at the average: no line.
        displaced = not self.compares_over_horizon() or self.horizon.has_direction
        if self.config.controller_signal == "train_loss" or not displaced:
            return None
        # Measured where the replicas stepped: a step-size interval's narrower fan-out (`lr_fan_out_scale`).
        multipliers = torch.tensor(gathered.multipliers[LR], dtype=torch.float64)
        if not self.compares_over_horizon():
            multipliers = narrowed(multipliers, self.lrs.fan_out_scale)
        if self.uses_centre:  # two replicas: the centre each rebuilt is the third point (`centre_point`)
            return line_search_optimum(*with_centre(multipliers, gathered.signals, gathered.scored, gathered.centres))
        return line_search_optimum(multipliers, gathered.signals, gathered.scored)
