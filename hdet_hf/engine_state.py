"""The engine's checkpoint state: its version, migration, validation, and the checks a resume must pass.

`HDETEngine.state_dict()` is plain data with a ``"version"`` key (loadable with
``torch.load(weights_only=True)``), saved per rank. Everything here runs before a loaded value is used, so a
damaged, edited or foreign state is refused with the field's name instead of surfacing steps later, and a
state of an older version is migrated first (`read_state`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from .collectives import local_data
from .config import HDETConfig
from .score_window import AVERAGED_SIGNALS

if TYPE_CHECKING:
    from .engine import HDETEngine

__all__ = [
    "STATE_VERSION",
    "EngineCheckpoint",
    "state_dict",
    "load_state_dict",
    "RESUMABLE_CHANGES",
    "read_state",
    "validate_state",
    "migrate_state_v1",
    "check_tensors_fit",
    "check_resumed_settings",
    "check_settings_agree",
    "merge_optimizer_states",
]

# 2: the window loss became an item-weighted mean ("loss_weight" added); version 1 states are migrated.
STATE_VERSION = 2
# Settings a resume may change: they decide how the average is computed (memory), not what it is.
RESUMABLE_CHANGES = ("bucket_size_mb",)
# Settings added after checkpoints were first written, with the behaviour such a checkpoint ran with.
# Session-7 horizon checkpoints used the horizon from the first converge; the first early phase (before
# early_comparison existed) was the one-interval fan-out.
# Session-10 controller_raise_gain: earlier checkpoints moved both ways alike. Session-13
# controller_signal_combination: earlier checkpoints took the mean of the two signals. Session-16
# controller_floor_after_peak: earlier checkpoints had no floor. Session-17 controller_line_search_*:
# earlier checkpoints had no line-search raise. Session-18 lr_fan_out_scale: earlier checkpoints stepped at
# the full --hdet_lr_spread in every interval. Session-19 controller_line_search_breaks_ties: earlier checkpoints
# let the line search act on passed raises only. (controller_line_search_max_raise's default became 4 in session 20;
# checkpoints from before session 17 had no line search, so their value is ignored: see check_resumed_settings.)
# Session-26 controller_line_search_centre has no legacy value: it acts only with two replicas, and refusing every
# older checkpoint of three or more for it would refuse runs it never touches; a two-replica checkpoint from before
# it takes the centre up from its next regular converge (centre_intact is saved from session 26 on).
# Session-27 controller_noise_floor and controller_line_search_until_bend likewise (two replicas only by default): a two-replica checkpoint from before it
# floors its votes from the first window that starts after the resume (the window's noise sums, "loss_noise", are
# saved from session 27 on; without them the resumed window has no estimate and votes as before).
# Session-30 controller_two_replica_cut_gain likewise: it acts only with two replicas; a two-replica checkpoint from
# before it cuts at the new gain from the resume on.
# Session-32 controller_time_scale: earlier checkpoints moved lambda per converge; it changes nothing where T is the
# default interval or longer, so there it is ignored (see check_resumed_settings) and elsewhere the resume is refused
# (also a session-32 checkpoint, "run", under session 33's default "vote"). Session-34 keep_fan_out_between_votes:
# session-33 checkpoints averaged at every converge; it matters only with "vote" and k > 1 (ignored elsewhere).
# Session-36 averaged_probe_share: earlier checkpoints averaged the whole window; it matters only with an averaged
# probe signal (ignored elsewhere).
LEGACY_VALUES = {
    "comparison_horizon": 0.0,
    "comparison_horizon_start": 0.0,
    "early_comparison": "one_interval",
    "controller_raise_gain": 1.0,
    "controller_signal_combination": "mean",
    "controller_floor_after_peak": False,
    "controller_line_search_threshold": 0.0,
    "controller_line_search_max_raise": 2.0,
    "lr_fan_out_scale": 1.0,
    "controller_line_search_breaks_ties": False,
    "controller_time_scale": "converge",
    "keep_fan_out_between_votes": False,
    "averaged_probe_share": 1.0,
}
# Settings measured, not adopted and removed, with the value today's engine behaves as. A checkpoint saved with
# another value ran a protocol this version cannot continue: refused, never silently continued without it.
REMOVED_SETTINGS = {
    "controller_line_search_in_warmup": False,  # session 21 (BENCHMARKS.md, reading 26)
    "fan_out_until_direction": False,  # session 21 (reading 26); last at commit c69169c
    "controller_wide_probe_threshold": 0.0,  # session 22 (reading 27); last at commit c69169c
    "early_comparison_abstained": "bounds",  # session 29 (reading 34); last at commit d228c84
}
# Saved per-parameter tensor lists (one tensor per trainable parameter, in order).
PARAMETER_SHAPED_FIELDS = ("outer_anchors", "outer_momenta", "window_average", "horizon_anchors", "horizon_directions")


class EngineCheckpoint:
    """`HDETEngine`'s checkpoint methods (mixed in); the work is done by this module's functions."""

    def state_dict(self: HDETEngine) -> dict[str, Any]:
        """Plain, versioned state (loadable with ``torch.load(weights_only=True)``), saved per rank."""
        return state_dict(self)

    def load_state_dict(
        self: HDETEngine, state: dict[str, Any], elastic: bool = False, *, source: str = "This HDET state"
    ) -> list[str]:
        """Restore state saved by `state_dict` (validated first; ``source`` names it in errors). Returns notes on
        what an elastic resume (``elastic=True``: saved with another number of processes) changed (the module
        function `load_state_dict` says how)."""
        return load_state_dict(self, state, elastic=elastic, source=source)


def read_state(state: Any, source: str) -> dict[str, Any]:
    """``state`` migrated to `STATE_VERSION` and validated; ValueError (naming ``source``) otherwise."""
    if not isinstance(state, dict):
        raise ValueError(
            f"{source} must be a dict saved by HDETEngine.state_dict(), but got {type(state).__name__}."
        )
    version = state.get("version")
    if version == 1:
        state = migrate_state_v1(state)
        version = state["version"]
    if version != STATE_VERSION:
        raise ValueError(f"{source}: expected HDET state version {STATE_VERSION}, but got {version!r}")
    validate_state(state, source)
    return state


def state_dict(engine: HDETEngine) -> dict[str, Any]:
    """The engine's state: its step counters and each part's own state, plus what a resume checks."""
    return {
        "version": STATE_VERSION,
        "world_size": engine.world_size,
        "rank": engine.rank,
        "step": engine.step,
        "steps_since_sync": engine.steps_in_interval,  # the on-disk name predates "converge"
        **engine.window.state_dict(),
        **engine.registry.state_dict(),
        **engine.recorder.state_dict(),
        "schedule_lrs": list(engine.lrs.schedule_lrs) if engine.lrs.schedule_lrs is not None else None,
        **engine.health.state_dict(),
        **engine.outer.state_dict(),
        **engine.horizon.state_dict(),
        **engine.fitness.state_dict(),
        **engine.paired_votes.state_dict(),
        **engine.peak_floor.state_dict(),
        **engine.line_search.state_dict(),
        "centre_intact": engine.centre_intact,
        # Whether the replicas may differ now (steps since the last converge, or a converge that kept them apart):
        # a forced converge right after a resume must average them as it would have before saving.
        "steps_since_converge": engine.steps_since_converge,
        "fan_out_kept": engine.fan_out_kept,
        # Checked on load: a resume must continue the same configuration (`check_resumed_settings`).
        "config": engine.config.to_dict(),
        "total_steps": engine.total_steps,
    }


def load_state_dict(engine: HDETEngine, state: Any, *, elastic: bool, source: str) -> list[str]:
    """Restore ``engine`` from a state saved by `state_dict`. Returns notes on what an elastic resume changed.

    ``elastic=True`` accepts a state saved with a different number of processes: the shared state
    (step, base values, velocity, permutation generator, trajectory) carries over, multipliers are
    recomputed for this world size with fresh permutations, and the current interval's loss
    accumulator restarts (its replicas no longer map one to one).

    The state is validated first (``source``, e.g. the file name, is named in every error): a damaged or
    edited value, or settings that differ from this run's (except `RESUMABLE_CHANGES`), raise ValueError
    before anything is changed.
    """
    state = read_state(state, source)
    check_tensors_fit(state, engine.replica.params, source)
    resized = state["world_size"] != engine.world_size
    if resized and not elastic:
        raise ValueError(
            f"{source} was saved with {state['world_size']} processes but this run has "
            f"{engine.world_size}; resume on the same number of processes, or load it with elastic=True."
        )
    check_resumed_settings(state, engine.config, engine.total_steps, engine.registry.names, source)
    device = engine.replica.params[0].device
    engine.step = int(state["step"])
    engine.steps_in_interval = 0 if resized else int(state["steps_since_sync"])
    engine.window.load_state_dict(state, device, restart=resized)
    engine.registry.load_state_dict(state, redraw=resized)
    engine.recorder.load_state_dict(state)
    if state.get("schedule_lrs") is not None:
        engine.lrs.schedule_lrs = list(state["schedule_lrs"])
    engine.health.load_state_dict(state)
    engine.outer.load_state_dict(state, device)
    engine.horizon.load_state_dict(state, device)
    engine.fitness.load_state_dict(state)
    engine.paired_votes.load_state_dict(state)
    engine.peak_floor.load_state_dict(state)
    engine.line_search.load_state_dict(state)
    # Saved before the centre point existed, or a resize (replicas no longer map one to one): no centre this time.
    engine.centre_intact = bool(state.get("centre_intact", False)) and not resized
    # Saved before session 35: the steps since the last converge on the grid, and no kept fan-out (not recorded then).
    engine.steps_since_converge = int(state.get("steps_since_converge", engine.step % engine.config.sync_interval))
    engine.fan_out_kept = bool(state.get("fan_out_kept", False))
    engine.apply_values()
    if not resized:
        return []
    return [
        f"world size {state['world_size']} -> {engine.world_size}: multipliers recomputed "
        f"({engine.multipliers()}), base values and velocity kept, interval loss accumulator restarted"
    ]


def check_tensors_fit(state: dict[str, Any], params: Sequence[torch.Tensor], source: str) -> None:
    """Saved tensors must match this model's trainable parameters (same count and shapes)."""
    shapes = [tuple(local_data(p).shape) for p in params]
    for key in PARAMETER_SHAPED_FIELDS:
        tensors = state.get(key)
        if tensors is None:
            continue
        if (
            not isinstance(tensors, list)
            or [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in tensors] != shapes
        ):
            raise ValueError(
                f"{source}: field {key!r} does not match this model's {len(shapes)} trainable parameters "
                "(count or shapes differ). Resume with the model that wrote the checkpoint."
            )


def check_resumed_settings(
    state: dict[str, Any], config: HDETConfig, total_steps: int, names: Sequence[str], source: str
) -> None:
    """Refuse to mix two configurations in one run (the state, the LRs and hdet_schedule.json would disagree).

    ``names`` are the hyperparameters this run explores, in registration order.
    """
    saved = state.get("config")
    if isinstance(saved, dict):
        current = config.to_dict()
        # A checkpoint written before a setting existed ran with its LEGACY_VALUES value.
        saved = {**{k: v for k, v in LEGACY_VALUES.items() if k not in saved}, **saved}
        removed = {k: saved[k] for k, v in REMOVED_SETTINGS.items() if saved.get(k, v) != v}
        if removed:
            was = " ".join(f"--hdet_{k} {v}" for k, v in removed.items())
            raise ValueError(
                f"{source} was saved with {was}: a setting this version of hdet_hf no longer has (measured, not "
                "adopted and removed; BENCHMARKS.md says why), so it cannot continue that run. Resume with the "
                "hdet_hf version that wrote the checkpoint, or start a new run from the checkpoint's weights."
            )
        # None means "the default for this mode"; the mode itself must match, so resolve both with this config.
        for values in (saved, current):
            if "comparison_horizon" in values and values["comparison_horizon"] is None:
                values["comparison_horizon"] = config.effective_comparison_horizon
            if values.get("comparison_horizon") == 0:
                values.pop("comparison_horizon_start", None)  # ignored without a horizon
                values.pop("lr_fan_out_scale", None)
            if values.get("comparison_horizon") == 0 or values.get("comparison_horizon_start", 0) == 0:
                values.pop("early_comparison", None)  # ignored without an early phase
            if replace(config, controller_time_scale="run").controller_interval_share(total_steps) == 1:
                values.pop("controller_time_scale", None)  # the same moves either way: T is the default's or longer
            if values.get("controller_time_scale", config.controller_time_scale) != "vote" or (
                config.converges_per_vote(total_steps) == 1
            ):
                values.pop("keep_fan_out_between_votes", None)  # a vote at every converge: nothing between to keep
            if values.get("controller_signal", config.controller_signal) not in AVERAGED_SIGNALS:
                values.pop("averaged_probe_share", None)  # no averaged probe: nothing is averaged
            if values.get("controller_line_search_threshold") == 0:
                values.pop("controller_line_search_breaks_ties", None)  # ignored without the line search
                values.pop("controller_line_search_max_raise", None)
                values.pop("controller_line_search_centre", None)
                values.pop("controller_line_search_until_bend", None)
        changed = [
            key
            for key in current
            if key in saved and key not in RESUMABLE_CHANGES and saved[key] != current[key]
        ]
        if changed:
            was = " ".join(f"--hdet_{k} {saved[k]}" for k in changed)
            now = " ".join(f"--hdet_{k} {current[k]}" for k in changed)
            raise ValueError(
                f"{source} was saved with {was}, but this run has {now}. HDET cannot change these settings in "
                "the middle of a run (the multipliers, the controller state and hdet_schedule.json describe one "
                "configuration). Resume with the saved values, or start a new run from the checkpoint's weights."
            )
    saved_steps = state.get("total_steps")
    if saved_steps is not None and saved_steps != total_steps:
        raise ValueError(
            f"{source} was saved by a run of {saved_steps} optimizer steps, but this run has {total_steps}: "
            "the schedule, the controller warm-up and the end of exploration depend on the run length. Resume "
            f"with the same length ({saved_steps} steps), or start a new run from the checkpoint's weights."
        )
    saved_names, names = list(state["controllers"]), list(names)
    if sorted(saved_names) != sorted(names):
        added = [n for n in names if n not in saved_names]
        dropped = [n for n in saved_names if n not in names]
        raise ValueError(
            f"{source} explores {saved_names}, but this run explores {names}"
            + (f" (new: {added})" if added else "")
            + (f" (missing: {dropped})" if dropped else "")
            + ". Register the same hyperparameters (the same --hdet_*_spread flags, --hdet_lr_groups and "
            "add_hyperparameter calls) as the run that saved it."
        )


def check_settings_agree(config: HDETConfig, total_steps: int, group: dist.ProcessGroup | None) -> None:
    """Refuse settings that differ between ranks (one small collective, at start).

    A different converge interval on one rank would hang at the first converge; a different spread or seed
    would train silently with multipliers that do not average to 1.
    """
    mine = {**config.to_dict(), "total_steps": total_steps}
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, mine, group=group)
    differing = [key for key in mine if any(other.get(key) != mine[key] for other in gathered)]
    if differing:
        parts = []
        for key in differing:
            by_value: dict[str, list[int]] = {}
            for rank, other in enumerate(gathered):
                by_value.setdefault(repr(other.get(key)), []).append(rank)
            name = "total optimizer steps (--max_steps)" if key == "total_steps" else f"--hdet_{key}"
            values = ", ".join(f"{value} on ranks {ranks}" for value, ranks in by_value.items())
            parts.append(f"{name}: {values}")
        raise ValueError(
            "HDET settings differ between processes: "
            + "; ".join(parts)
            + ". Every process must get the "
            "same --hdet_* flags and run length; launch them all with the same command line."
        )


def validate_state(state: dict[str, Any], source: str) -> None:
    """Refuse a damaged or edited state with the field's name, before any value is used.

    A world size of 0 or a negative controller scale would otherwise surface as ZeroDivisionError or a
    negative learning rate steps later.
    """

    def fail(key: str, expected: str, value: Any) -> None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"{source}: field {key!r} must be {expected}, but got {shown}. The checkpoint is damaged or was "
            "edited; resume from another checkpoint."
        )

    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def is_number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    required = (
        "world_size",
        "rank",
        "step",
        "steps_since_sync",
        "loss_sum",
        "loss_weight",
        "generator_state",
        "permutations",
        "controllers",
        "lr_per_step",
        "trajectory",
    )
    missing = [key for key in required if key not in state]
    if missing:
        raise ValueError(
            f"{source} is missing field(s) {', '.join(missing)}. The checkpoint is damaged or was not written by "
            "HDETEngine.state_dict(); resume from another checkpoint."
        )
    world = state["world_size"]
    if not (is_int(world) and world >= 1):
        fail("world_size", "an integer >= 1", world)
    if not (is_int(state["rank"]) and 0 <= state["rank"] < world):
        fail("rank", f"an integer in [0, {world})", state["rank"])
    step = state["step"]
    if not (is_int(step) and step >= 0):
        fail("step", "an integer >= 0", step)
    for key in ("steps_since_sync", "loss_steps"):
        if key in state and not (is_int(state[key]) and 0 <= state[key] <= step):
            fail(key, f"an integer in [0, step={step}]", state[key])
    if not is_number(state["loss_sum"]):
        fail("loss_sum", "a number", state["loss_sum"])
    if not (
        is_number(state["loss_weight"]) and math.isfinite(state["loss_weight"]) and state["loss_weight"] >= 0
    ):
        fail("loss_weight", "a finite number >= 0", state["loss_weight"])
    noise = state.get("loss_noise")
    if noise is not None and not (
        isinstance(noise, (list, tuple)) and len(noise) == 4 and all(is_number(v) for v in noise)
    ):
        fail("loss_noise", "a list of 4 numbers (the window loss's noise sums)", noise)
    mark = state.get("loss_mark")
    if mark is not None and not (
        isinstance(mark, (list, tuple)) and len(mark) == 2 and all(is_number(v) and math.isfinite(v) for v in mark)
    ):
        fail("loss_mark", "a list of 2 finite numbers (the window's sums at its last converge)", mark)
    generator = state["generator_state"]
    if not (isinstance(generator, torch.Tensor) and generator.dtype == torch.uint8):
        fail("generator_state", "a uint8 tensor (torch.Generator.get_state())", generator)
    permutations = state["permutations"]
    if not isinstance(permutations, dict):
        fail("permutations", "a dict", permutations)
    for name, perm in permutations.items():
        if not (isinstance(perm, (list, tuple)) and sorted(perm) == list(range(world))):
            fail(f"permutations[{name!r}]", f"a permutation of 0..{world - 1}", perm)
    controllers = state["controllers"]
    if not isinstance(controllers, dict) or set(controllers) != set(permutations):
        fail(
            "controllers", f"a dict with the same names as permutations ({sorted(permutations)})", controllers
        )
    for name, controller in controllers.items():
        if not (isinstance(controller, dict) and set(controller) == {"scale", "velocity"}):
            fail(f"controllers[{name!r}]", "a dict with scale and velocity", controller)
        scale, velocity = controller["scale"], controller["velocity"]
        if not (is_number(scale) and math.isfinite(scale) and scale > 0):
            fail(f"controllers[{name!r}].scale", "a finite number > 0 (a factor on the schedule)", scale)
        if not (is_number(velocity) and math.isfinite(velocity)):
            fail(f"controllers[{name!r}].velocity", "a finite number", velocity)
    rows = state["lr_per_step"]
    if not isinstance(rows, list):
        fail("lr_per_step", "a list of rows", rows)
    for i, row in enumerate(rows):
        if not (
            isinstance(row, (list, tuple)) and all(is_number(v) and math.isfinite(v) and v >= 0 for v in row)
        ):
            fail(f"lr_per_step[{i}]", "a list of finite learning rates >= 0", row)
    schedule_lrs = state.get("schedule_lrs")
    if schedule_lrs is not None and not (
        isinstance(schedule_lrs, list)
        and all(is_number(v) and math.isfinite(v) and v >= 0 for v in schedule_lrs)
    ):
        fail("schedule_lrs", "None or a list of finite learning rates >= 0", schedule_lrs)
    for key in ("last_mean_loss", "first_mean_loss"):
        value = state.get(key)
        if value is not None and not (is_number(value) and math.isfinite(value)):
            fail(key, "None or a finite number", value)
    votes = state.get("paired_votes")
    if votes is not None and not (
        isinstance(votes, dict)
        and all(v is None or (is_number(v) and math.isfinite(v)) for v in votes.values())
    ):
        fail("paired_votes", "None or a dict of None or finite numbers", votes)
    peak_floor = state.get("peak_floor")
    if peak_floor is not None and not (
        isinstance(peak_floor, dict)
        and (peak_floor.get("peak") is None or (is_number(peak_floor["peak"]) and math.isfinite(peak_floor["peak"])))
        and isinstance(peak_floor.get("floors", {}), dict)
        and all(is_number(v) and math.isfinite(v) and v > 0 for v in peak_floor.get("floors", {}).values())
    ):
        fail("peak_floor", "None or a dict with a finite peak (or None) and floors > 0", peak_floor)
    line_search = state.get("line_search")
    if line_search is not None and not (
        isinstance(line_search, dict)
        and (
            line_search.get("last_optimum") is None
            or (is_number(line_search["last_optimum"]) and line_search["last_optimum"] >= 0)
        )
        and isinstance(line_search.get("bent", False), bool)
    ):
        fail(
            "line_search", "None or a dict with last_optimum None or a number >= 0 (inf allowed) and a bool bent",
            line_search,
        )
    for flag in ("centre_intact", "fan_out_kept", "horizon_offsets_in_place"):
        if not isinstance(state.get(flag, False), bool):
            fail(flag, "a bool", state[flag])
    since = state.get("steps_since_converge", 0)
    if not (isinstance(since, int) and not isinstance(since, bool) and since >= 0):
        fail("steps_since_converge", "an integer >= 0", since)
    updates = state.get("horizon_updates")
    if updates is not None and not (isinstance(updates, int) and not isinstance(updates, bool) and updates >= 0):
        fail("horizon_updates", "None or an integer >= 0", updates)
    if not (isinstance(state["trajectory"], list) and all(isinstance(t, dict) for t in state["trajectory"])):
        fail("trajectory", "a list of dicts", state["trajectory"])
    values = state.get("values_per_step", {})
    if not (isinstance(values, dict) and all(isinstance(v, list) for v in values.values())):
        fail("values_per_step", "a dict of lists", values)
    if not isinstance(state.get("divergence_events", []), list):
        fail("divergence_events", "a list", state["divergence_events"])
    count = state.get("window_average_count", 0)
    if not (is_int(count) and count >= 0):
        fail("window_average_count", "an integer >= 0", count)
    saved_steps = state.get("total_steps")
    if saved_steps is not None and not (is_int(saved_steps) and saved_steps >= 1):
        fail("total_steps", "an integer >= 1", saved_steps)
    if state.get("config") is not None and not isinstance(state["config"], dict):
        fail("config", "a dict of HDET settings", state["config"])



def migrate_state_v1(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 summed one unweighted mean loss per step: the same mean with weight 1 per step."""
    migrated = dict(state)
    steps = int(state.get("loss_steps", state.get("steps_since_sync", 0)))
    migrated["loss_steps"] = steps
    migrated["loss_weight"] = float(steps)
    # Version 1 predates explore_until: those runs explored to the last step, so a resume must too.
    if isinstance(state.get("config"), dict):
        migrated["config"] = {"explore_until": 1.0, **state["config"]}
    migrated["version"] = 2
    return migrated


def merge_optimizer_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The first state, with every floating-point tensor (moments) averaged over all given states."""
    merged = states[0]
    for index, param_state in merged["state"].items():
        for key, value in param_state.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and torch.is_floating_point(value):
                param_state[key] = torch.stack([s["state"][index][key] for s in states]).mean(0)
    return merged
