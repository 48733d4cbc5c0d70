"""The record of an HDET run (``hdet_schedule.json``): save, load from a folder or the Hub, replay.

The engine fills one :class:`HDETSchedule` as it trains (`HDETEngine.schedule()`); the shells write it at the
end of training and in every checkpoint. It holds the base learning rate of every param group at every
optimizer step, and one entry per converge (per-rank multipliers, losses, weights and the controller's
move). From it you can

- publish it next to the model (:meth:`HDETSchedule.save_pretrained`, :func:`model_card_section`),
- plot it (:mod:`hdet_hf.plotting`, which depends on this module, never the other way round),
- replay the learning rates HDET found on one device, with no ``torch.distributed``
  (:meth:`HDETSchedule.as_lr_scheduler` -> :class:`ReplayLR`).

Example:
    >>> import torch
    >>> from hdet_hf.schedule_metadata import HDETSchedule
    >>> schedule = HDETSchedule(world_size=2, total_steps=3, sync_interval=2,
    ...                         lr_per_step=[[1e-3], [2e-3], [3e-3]])
    >>> optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
    >>> scheduler = schedule.as_lr_scheduler(optimizer)
    >>> optimizer.param_groups[0]["lr"]
    0.001
    >>> optimizer.step(); scheduler.step()
    >>> optimizer.param_groups[0]["lr"]
    0.002
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler

__all__ = [
    "PLOT_FILENAME",
    "SCHEDULE_FILENAME",
    "SCHEDULE_FORMAT",
    "SCHEDULE_FORMAT_VERSION",
    "HDETSchedule",
    "MODEL_CARD_TAG",
    "ReplayLR",
    "add_to_model_card",
    "model_card_section",
    "summary_from_lr",
]

SCHEDULE_FILENAME = "hdet_schedule.json"
PLOT_FILENAME = "hdet_schedule.png"
SCHEDULE_FORMAT = "hdet_schedule"
SCHEDULE_FORMAT_VERSION = 1
MODEL_CARD_TAG = "hdet"
# The section sits between these markers in README.md, so writing it again replaces it instead of adding a copy.
_CARD_START = "<!-- hdet_schedule:start -->"
_CARD_END = "<!-- hdet_schedule:end -->"

# Keys every version-1 file has; anything else at the top level is kept in `extra` untouched.
_REQUIRED_KEYS = (
    "world_size",
    "total_steps",
    "sync_interval",
    "hyperparameters",
    "param_group_names",
    "lr_per_step",
    "trajectory",
)
_KNOWN_KEYS = {
    "format",
    "version",
    "config",
    "summary",
    "values_per_step",
    "divergence_events",
    *_REQUIRED_KEYS,
}
# A replayed LR above this is not a training LR but a damaged or hostile file (files come from the Hub);
# HDET's own LRs stay within --hdet_controller_max_factor of the user's schedule.
MAX_REPLAY_LR = 1e3


def summary_from_lr(values: Sequence[float | None]) -> dict[str, float]:
    """Start, final, min and max of a sequence of values (an LR or any other hyperparameter).

    ``None`` and non-finite entries (a value the engine could not record) are skipped. Returns an
    empty dict when nothing is left, so callers can drop the hyperparameter from a summary.

    Example:
        >>> summary_from_lr([1e-3, 3e-3, 2e-3])
        {'start': 0.001, 'final': 0.002, 'min': 0.001, 'max': 0.003}
    """
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return {}
    return {"start": finite[0], "final": finite[-1], "min": min(finite), "max": max(finite)}


@dataclass
class HDETSchedule:
    """What an HDET run did, in the ``hdet_schedule.json`` format (version 1).

    Attributes:
        config: the HDET config as a plain dict.
        world_size: number of ranks that trained with divergent hyperparameters.
        total_steps: planned optimizer steps.
        sync_interval: optimizer steps between two converges (parameter averagings).
        hyperparameters: names of the explored values (``"lr"``, ``"lr/embeddings"``, ``"dropout"``...).
        param_group_names: optimizer param groups, in order.
        lr_per_step: ``lr_per_step[i][g]`` is the base LR of group ``g`` applied at optimizer step
            ``i + 1``, before the per-rank multiplier.
        trajectory: one dict per converge, in order (``step``, ``base``, ``multipliers``, ``losses``,
            ``weights``, ``delta``, ``velocity``, ``excluded_ranks``; since session 27 also ``loss_noise``, the
            train loss's noise that floored the vote, and ``line_search_optimum``, the probe's fitted ``m*``,
            each None where unused; an unbounded ``m*`` (a straight line falling along the whole fan-out, which
            allows the line search's largest raise) is written ``"inf"`` in the JSON file and read back as
            ``math.inf``). With a comparison horizon
            (``config["comparison_horizon"]`` > 0, see ``--hdet_comparison_horizon``) an LR multiplier ``m``
            sets the rank's offset along the run's direction, not its step size (before
            ``config["comparison_horizon_start"]``: its step size, or with ``early_comparison`` "lower_of_both"
            alternately one and the other, and ``delta`` is the lower of the two latest votes; a step-size
            interval runs at ``1 + config["lr_fan_out_scale"] x (m - 1)``, the multiplier recorded is ``m``).
        summary: ``{name: {"start", "final", "min", "max"}}`` over the base values, as recorded by
            the engine. When empty, :meth:`to_dict` and the model card use :meth:`compute_summary`.
        values_per_step: optional per-step base values of hyperparameters other than the LR.
        divergence_events: one dict per replica left out of an average (``step``, ``rank``, ``loss``,
            ``multipliers``); written even when empty.
        extra: top-level keys this version does not know, kept so a round trip loses nothing.

    Example:
        >>> s = HDETSchedule(world_size=2, total_steps=2, sync_interval=1, lr_per_step=[[1.0], [0.5]],
        ...                  trajectory=[{"step": 1, "base": {"lr": 1.0}, "losses": [2.0, 1.9]}])
        >>> s.summary = s.compute_summary()
        >>> s.summary["lr"]
        {'start': 1.0, 'final': 0.5, 'min': 0.5, 'max': 1.0}
        >>> HDETSchedule.from_dict(s.to_dict()) == s
        True
    """

    config: dict[str, Any] = field(default_factory=dict)
    world_size: int = 1
    total_steps: int = 0
    sync_interval: int = 1
    hyperparameters: list[str] = field(default_factory=lambda: ["lr"])
    param_group_names: list[str] = field(default_factory=lambda: ["group_0"])
    lr_per_step: list[list[float]] = field(default_factory=list)
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    values_per_step: dict[str, list[float]] = field(default_factory=dict)
    divergence_events: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    # -- plain data -------------------------------------------------------------------------------

    @property
    def num_converges(self) -> int:
        """Number of (regular) converges recorded."""
        return len(self.trajectory)

    @property
    def converge_steps(self) -> list[int]:
        """Optimizer step of each recorded converge."""
        return [int(entry["step"]) for entry in self.trajectory if "step" in entry]

    # Names from before "converge" was the one word for parameter averaging; kept for code that reads them.
    num_syncs = num_converges
    sync_steps = converge_steps

    def base_values(self, name: str) -> list[float]:
        """The controller's base value of ``name`` at each converge that recorded it."""
        return [
            entry["base"][name]
            for entry in self.trajectory
            if isinstance(entry.get("base"), Mapping) and entry["base"].get(name) is not None
        ]

    def final_scale(self, name: str = "lr") -> float | None:
        """The controller's last correction factor on ``name``'s schedule, or None if no controller moved it.

        The base value after the controller is the configured schedule x this factor, so for the LR a plain
        run (no HDET) at ``learning_rate x final_scale()`` uses the peak the controller settled on. How close
        that is to a sweep's best LR depends on the task and the start: with the default controller, on the
        benchmarks' six language-model tasks 1.2-2.5x from 3x above, 0.5-1.7x from the best LR and 0.3-1x from
        10x below; on the pretrained classifiers about the start LR from 3x above (the controller hardly moves
        there). A plain second run at it ended within 1 % of the sweep's best on four of the six language-model
        tasks from 3x above (BENCHMARKS.md, "The controller", reading 43).

        Example:
            >>> moved = {"step": 10, "scale": {"lr": 1.5}, "controller_active": True}
            >>> HDETSchedule(trajectory=[moved, {"step": 20, "scale": {"lr": 0.8}}]).final_scale()
            0.8
            >>> HDETSchedule(trajectory=[{"step": 10, "scale": {"lr": 1.0}}]).final_scale() is None  # auto-LR off
            True
        """
        # Every converge records the scale (1.0 without auto-LR); only a run whose controller acted found an LR.
        if not any(entry.get("controller_active") for entry in self.trajectory):
            return None
        for entry in reversed(self.trajectory):
            scale = entry.get("scale")
            if isinstance(scale, Mapping) and _is_number(scale.get(name)) and math.isfinite(scale[name]):
                return float(scale[name])
        return None

    def compute_summary(self) -> dict[str, dict[str, float]]:
        """Start/final/min/max of each explored hyperparameter's base value (does not modify ``self``).

        Like the engine: ``"lr"`` is summarised over ``lr_per_step`` (first param group), and
        ``"lr/<group>"`` over that group's column; other names over ``values_per_step``. A name
        without a per-step record falls back to the controller's base values at the converges.
        Hyperparameters with no recorded value are left out.
        """
        summary: dict[str, dict[str, float]] = {}
        for name in self.hyperparameters:
            values: Sequence[float | None] = []
            column = self._lr_column(name)
            if column is not None:
                values = [row[column] for row in self.lr_per_step if column < len(row)]
            elif name in self.values_per_step:
                values = self.values_per_step[name]
            stats = summary_from_lr(values) or summary_from_lr(self.base_values(name))
            if stats:
                summary[name] = stats
        return summary

    def _lr_column(self, name: str) -> int | None:
        """Column of ``lr_per_step`` that holds hyperparameter ``name``, if any."""
        if not self.lr_per_step:
            return None
        if name == "lr":
            return 0
        if name.startswith("lr/") and name[3:] in self.param_group_names:
            return self.param_group_names.index(name[3:])
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict of format version 1 (a deep copy; ``values_per_step`` only if set)."""
        data: dict[str, Any] = {
            "format": SCHEDULE_FORMAT,
            "version": SCHEDULE_FORMAT_VERSION,
            "config": self.config,
            "world_size": self.world_size,
            "total_steps": self.total_steps,
            "sync_interval": self.sync_interval,
            "hyperparameters": self.hyperparameters,
            "param_group_names": self.param_group_names,
            "lr_per_step": self.lr_per_step,
            "trajectory": self.trajectory,
            "summary": self.summary or self.compute_summary(),
        }
        if self.values_per_step:
            data["values_per_step"] = self.values_per_step
        data["divergence_events"] = self.divergence_events
        data.update({k: v for k, v in self.extra.items() if k not in data})
        return copy.deepcopy(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HDETSchedule:
        """Build a schedule from :meth:`to_dict` output (or a parsed ``hdet_schedule.json``).

        Raises:
            ValueError: if ``format``/``version`` are not ``"hdet_schedule"``/``1``, a required key
                is missing, or an ``lr_per_step`` row has the wrong number of groups.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"Expected a dict for an HDET schedule, but got {type(data).__name__}.")
        fmt = data.get("format")
        if fmt != SCHEDULE_FORMAT:
            raise ValueError(
                f"Expected format '{SCHEDULE_FORMAT}', but got {fmt!r}: this is not an HDET schedule file "
                f"({SCHEDULE_FILENAME} written by hdet_hf)."
            )
        version = data.get("version")
        if version != SCHEDULE_FORMAT_VERSION:
            hint = (
                "It was written by a newer hdet_hf; upgrade hdet_hf to read it."
                if isinstance(version, int) and version > SCHEDULE_FORMAT_VERSION
                else "The file is damaged or was not written by hdet_hf."
            )
            raise ValueError(
                f"Unsupported {SCHEDULE_FILENAME} version {version!r}; this hdet_hf reads version "
                f"{SCHEDULE_FORMAT_VERSION}. {hint}"
            )
        missing = [key for key in _REQUIRED_KEYS if key not in data]
        if missing:
            raise ValueError(
                f"{SCHEDULE_FILENAME} (version 1) is missing required key(s): {', '.join(missing)}."
            )

        try:
            data = copy.deepcopy(dict(data))
        except RecursionError as exc:
            raise ValueError(f"{SCHEDULE_FILENAME} is nested too deeply to be an HDET schedule.") from exc
        _check_schedule_types(data)
        n_groups = len(data["param_group_names"])
        for i, row in enumerate(data["lr_per_step"]):
            if n_groups and len(row) != n_groups:
                raise ValueError(
                    f"lr_per_step[{i}] has {len(row)} value(s), but param_group_names lists {n_groups} "
                    f"group(s); every row needs one base LR per param group."
                )
        _check_lr_table(data["lr_per_step"])
        schedule = cls(
            config=dict(data.get("config") or {}),
            world_size=int(data["world_size"]),
            total_steps=int(data["total_steps"]),
            sync_interval=int(data["sync_interval"]),
            hyperparameters=list(data["hyperparameters"]),
            param_group_names=list(data["param_group_names"]),
            lr_per_step=[list(row) for row in data["lr_per_step"]],
            trajectory=[_unbounded_optimum_from_json(entry) for entry in data["trajectory"]],
            summary=dict(data.get("summary") or {}),
            values_per_step=dict(data.get("values_per_step") or {}),
            divergence_events=list(data.get("divergence_events") or []),
            extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
        )
        return schedule

    # -- files and the Hub --------------------------------------------------------------------------

    def save_pretrained(self, save_directory: str | os.PathLike[str], plot: bool | None = None) -> list[str]:
        """Write ``hdet_schedule.json`` into ``save_directory``.

        The JSON is written to a temporary file and renamed, so a crash mid-save (or a reader on
        another rank) never sees a truncated file. Non-finite numbers (a diverged rank's loss) are
        written as ``null`` so the file stays strict JSON for the Hub viewer and other languages.
        Drawing the picture is the caller's choice:
        ``hdet_hf.plotting.plot_schedule(schedule, os.path.join(save_directory, PLOT_FILENAME))``
        (`HDETTrainer` draws it once, at the end of training).

        Args:
            plot: no longer used (``False`` is accepted for old callers; ``True`` is refused with the fix).

        Returns:
            The paths written: the JSON file.
        """
        if plot:
            raise ValueError(
                "HDETSchedule.save_pretrained(plot=True) no longer draws the plot: call "
                "hdet_hf.plotting.plot_schedule(schedule, os.path.join(save_directory, PLOT_FILENAME)) after it."
            )
        os.makedirs(save_directory, exist_ok=True)
        json_path = os.path.join(save_directory, SCHEDULE_FILENAME)
        data = self.to_dict()
        data["trajectory"] = [_unbounded_optimum_to_json(entry) for entry in data["trajectory"]]
        text = json.dumps(_finite_or_none(data), indent=2, allow_nan=False)
        fd, tmp_path = tempfile.mkstemp(dir=save_directory, prefix=f".{SCHEDULE_FILENAME}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            os.replace(tmp_path, json_path)
        except BaseException:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
            raise
        return [json_path]

    @classmethod
    def from_pretrained(
        cls,
        path_or_repo_id: str | os.PathLike[str],
        revision: str | None = None,
        token: str | bool | None = None,
        *,
        subfolder: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> HDETSchedule:
        """Load a schedule from a folder, a path to the JSON file, or a Hub repo id.

        Args:
            path_or_repo_id: a local directory holding ``hdet_schedule.json``, a path to the file
                itself, or a model repo id on the Hub (e.g. ``"me/my-hdet-model"``).
            revision: Hub branch, tag or commit (ignored for local paths).
            token: Hub token (ignored for local paths).
            subfolder: folder inside the directory/repo, e.g. ``"last-checkpoint"``.
            cache_dir: Hub download cache (defaults to the huggingface_hub cache).

        Raises:
            FileNotFoundError: if the directory or the repo has no ``hdet_schedule.json``.
            ValueError: if the file is not a supported HDET schedule.
        """
        path = os.fspath(path_or_repo_id)
        local = os.path.join(path, subfolder) if subfolder else path
        if os.path.isfile(local):
            return cls._load_json(local)
        if os.path.isdir(local):
            json_path = os.path.join(local, SCHEDULE_FILENAME)
            if not os.path.isfile(json_path):
                raise FileNotFoundError(
                    f"No {SCHEDULE_FILENAME} in directory '{local}'. It is written by "
                    f"HDETSchedule.save_pretrained() at the end of an HDET run and in every checkpoint."
                )
            return cls._load_json(json_path)
        return cls._load_json(
            _download_from_hub(path, revision=revision, token=token, subfolder=subfolder, cache_dir=cache_dir)
        )

    @classmethod
    def _load_json(cls, json_path: str) -> HDETSchedule:
        with open(json_path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as exc:
                raise ValueError(f"'{json_path}' is not valid JSON: {exc}") from exc
            except RecursionError as exc:
                raise ValueError(f"'{json_path}' is nested too deeply to be an HDET schedule.") from exc
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"'{json_path}': {exc}") from exc

    # -- replay --------------------------------------------------------------------------------------

    def as_lr_scheduler(self, optimizer: torch.optim.Optimizer, hold_last: bool = True) -> ReplayLR:
        """A scheduler that sets ``optimizer``'s LRs to the recorded base LRs, step by step.

        Call ``scheduler.step()`` after each ``optimizer.step()`` as usual. The per-rank
        multipliers are not applied: this replays the shared base schedule on one device.

        Example:
            >>> import torch
            >>> s = HDETSchedule(lr_per_step=[[0.1], [0.2]])
            >>> opt = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)
            >>> sched = s.as_lr_scheduler(opt)
            >>> sched.get_last_lr()
            [0.1]
        """
        return ReplayLR(optimizer, self.lr_per_step, hold_last=hold_last)


class ReplayLR(LRScheduler):
    """Replays a recorded table of per-group learning rates: a closed form of the step count.

    At construction group ``g`` gets ``lr_per_step[0][g]``; after ``k`` calls of :meth:`step` it
    gets ``lr_per_step[k][g]``. Past the end the last row is held. With ``hold_last=False`` a
    ``RuntimeError`` is raised once more optimizer steps were taken than recorded: the one
    ``step()`` every training loop makes after its last optimizer step is allowed, the next one
    raises. A table with one column is broadcast to every param group.

    Args:
        optimizer: the optimizer whose ``param_groups[g]["lr"]`` are set.
        lr_per_step: rows of per-group LRs, one row per optimizer step.
        hold_last: keep the last recorded LRs when stepped past the end of the table (else raise).
        last_epoch: as in every torch scheduler; leave at -1 and use :meth:`load_state_dict` to resume.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(2, 2)
        >>> opt = torch.optim.AdamW([{"params": [model.weight]}, {"params": [model.bias]}], lr=1.0)
        >>> sched = ReplayLR(opt, [[1e-3, 2e-3], [4e-3, 8e-3]])
        >>> opt.step(); sched.step()
        >>> sched.get_last_lr()
        [0.004, 0.008]
    """

    STATE_VERSION = 1

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        lr_per_step: Sequence[Sequence[float]],
        hold_last: bool = True,
        last_epoch: int = -1,
    ) -> None:
        try:
            table = [[float(v) for v in row] for row in lr_per_step]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Expected lr_per_step to be rows of numbers, but could not read it: {exc}") from exc
        _check_lr_table(table)
        if not table:
            raise ValueError(
                "Expected a non-empty lr_per_step to replay, but got 0 recorded steps: the schedule was "
                "saved before the first optimizer step."
            )
        n_columns = len(table[0])
        if any(len(row) != n_columns for row in table):
            raise ValueError("Expected every lr_per_step row to have the same number of param groups.")
        n_groups = len(optimizer.param_groups)
        if n_columns == 1 and n_groups > 1:
            # One recorded group fits any optimizer: every group followed the same base LR.
            table = [row * n_groups for row in table]
        elif n_columns != n_groups:
            raise ValueError(
                f"The schedule records {n_columns} param group(s), but the optimizer has {n_groups}. "
                f"Build the optimizer with the same {n_columns} param group(s), in the same order, as the "
                f"training run (see HDETSchedule.param_group_names)."
            )
        self._table = table
        self.hold_last = hold_last
        super().__init__(optimizer, last_epoch)

    @property
    def num_recorded_steps(self) -> int:
        """Number of rows in the replayed table."""
        return len(self._table)

    def _row(self, index: int) -> list[float]:
        if index < len(self._table):
            return list(self._table[index])
        # index == len: the loop's step() after the last recorded optimizer step; its LR is never used.
        if self.hold_last or index == len(self._table):
            return list(self._table[-1])
        raise RuntimeError(
            f"ReplayLR was stepped {index} times, but only {len(self._table)} optimizer steps are recorded. "
            f"Train for at most {len(self._table)} optimizer steps or pass hold_last=True."
        )

    def get_lr(self) -> list[float]:  # type: ignore[override]
        """LRs for the current ``last_epoch`` (number of ``step()`` calls so far)."""
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        return self._row(max(self.last_epoch, 0))

    def _get_closed_form_lr(self) -> list[float]:
        return self._row(max(self.last_epoch, 0))

    def state_dict(self) -> dict[str, Any]:
        """Plain, versioned state; the LR table itself is not saved (it comes from the schedule)."""
        state = {k: v for k, v in super().state_dict().items() if k != "_table"}
        state["version"] = self.STATE_VERSION
        state["num_recorded_steps"] = len(self._table)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the position in the schedule (the table must be the one the state was saved with)."""
        state = dict(state_dict)
        version = state.pop("version", None)
        if version != self.STATE_VERSION:
            raise ValueError(f"Expected ReplayLR state version {self.STATE_VERSION}, but got {version!r}.")
        recorded = state.pop("num_recorded_steps", len(self._table))
        if recorded != len(self._table):
            raise ValueError(
                f"This ReplayLR state was saved with a schedule of {recorded} steps, but this scheduler "
                f"replays {len(self._table)}; load the same hdet_schedule.json as the saved run."
            )
        state.pop("_table", None)
        super().load_state_dict(state)


def model_card_section(
    schedule: HDETSchedule,
    plot_filename: str | None = PLOT_FILENAME,
    *,
    repo_id: str | None = None,
) -> str:
    """A ``## HDET schedule`` markdown section for a model card (README.md).

    Args:
        schedule: the run's schedule.
        plot_filename: relative path of the plot next to the README, or ``None`` for no image.
        repo_id: used in the replay snippet; a placeholder is shown when not given.

    Example:
        >>> s = HDETSchedule(world_size=4, total_steps=40, sync_interval=20, trajectory=[
        ...     {"step": 20, "base": {"lr": 1e-3}}, {"step": 40, "base": {"lr": 2e-3}}])
        >>> print(model_card_section(s, plot_filename=None).splitlines()[0])
        ## HDET schedule
    """
    summary = schedule.summary or schedule.compute_summary()
    names = ", ".join(f"`{h}`" for h in schedule.hyperparameters) or "no hyperparameter"
    controlled = any(t.get("controller_active") for t in schedule.trajectory)
    controller_text = (
        ", while a controller moved the shared base value using the ranks' losses."
        if controlled
        else "; the base values followed the configured schedule (no controller update)."
    )
    lines = [
        "## HDET schedule",
        "",
        f"This model was trained with Hyperparameter-Divergent Ensemble Training (HDET): "
        f"{schedule.world_size} data-parallel ranks trained with different values of {names}, and "
        f"their parameters were averaged every {schedule.sync_interval} optimizer steps{controller_text}",
        "",
        f"- World size: {schedule.world_size}",
        f"- Sync interval: {schedule.sync_interval} optimizer steps",
        f"- Converges: {schedule.num_converges}",
        f"- Optimizer steps: {len(schedule.lr_per_step)} recorded of {schedule.total_steps} planned",
        "",
    ]
    if summary:
        lines += ["| hyperparameter | start | final | min | max |", "|---|---|---|---|---|"]
        for name, stats in summary.items():
            cells = " | ".join(_fmt(stats.get(key)) for key in ("start", "final", "min", "max"))
            lines.append(f"| `{name}` | {cells} |")
        lines.append("")
    found = schedule.final_scale("lr")
    if found is not None:
        lines += [
            f"The controller ended at {found:.3g}x the configured learning rate: a plain run (no HDET) at the "
            f"learning rate x {found:.3g} trains at the peak it settled on.",
            "",
        ]
    if plot_filename:
        lines += [f"![HDET schedule]({plot_filename})", ""]
    target = repo_id or "<this repo id or local folder>"
    lines += [
        f"The full record is in [`{SCHEDULE_FILENAME}`]({SCHEDULE_FILENAME}). To replay its base "
        "learning rates on a single device:",
        "",
        "```python",
        "from hdet_hf.schedule_metadata import HDETSchedule",
        "",
        f'scheduler = HDETSchedule.from_pretrained("{target}").as_lr_scheduler(optimizer)',
        "# then call scheduler.step() after each optimizer.step()",
        "```",
        "",
    ]
    return "\n".join(lines)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_schedule_types(data: Mapping[str, Any]) -> None:
    """Refuse a schedule whose fields have the wrong JSON types (files come from the Hub: untrusted)."""

    def fail(key: str, expected: str, value: Any) -> None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(
            f"{SCHEDULE_FILENAME} field {key!r} must be {expected}, but got {shown}. The file is damaged or "
            "was not written by hdet_hf."
        )

    for key, low in (("world_size", 1), ("total_steps", 0), ("sync_interval", 1)):
        value = data[key]
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
            fail(key, f"an integer >= {low}", value)
    for key in ("hyperparameters", "param_group_names"):
        value = data[key]
        if not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            fail(key, "a list of strings", value)
    if not isinstance(data["lr_per_step"], list) or not all(isinstance(r, list) for r in data["lr_per_step"]):
        fail("lr_per_step", "a list of rows (lists of numbers)", data["lr_per_step"])
    trajectory = data["trajectory"]
    if not isinstance(trajectory, list) or not all(isinstance(e, dict) for e in trajectory):
        fail("trajectory", "a list of objects (one per converge)", trajectory)
    for i, entry in enumerate(trajectory):
        step = entry.get("step")
        if step is not None and not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
            fail(f"trajectory[{i}].step", "an integer >= 0", step)
        base = entry.get("base")
        if base is not None and not (
            isinstance(base, dict) and all(v is None or _is_number(v) for v in base.values())
        ):
            fail(f"trajectory[{i}].base", "an object of numbers", base)
    for key in ("config", "summary", "values_per_step"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            fail(key, "an object", data[key])
    events = data.get("divergence_events")
    if events is not None and not (isinstance(events, list) and all(isinstance(e, dict) for e in events)):
        fail("divergence_events", "a list of objects (one per replica left out of an average)", events)
    for name, series in (data.get("values_per_step") or {}).items():
        if not (isinstance(series, list) and all(v is None or _is_number(v) for v in series)):
            fail(f"values_per_step.{name}", "a list of numbers", series)
    for name, stats in (data.get("summary") or {}).items():
        if not (isinstance(stats, dict) and all(v is None or _is_number(v) for v in stats.values())):
            fail(f"summary.{name}", "an object of numbers", stats)


def _check_lr_table(lr_per_step: Any) -> None:
    """Every replayed LR must be a finite number in [0, MAX_REPLAY_LR]: a NaN, negative or huge LR would be
    replayed into NaN or exploding weights without any error."""
    for i, row in enumerate(lr_per_step):
        for g, value in enumerate(row):
            if not (_is_number(value) and math.isfinite(value) and 0 <= value <= MAX_REPLAY_LR):
                raise ValueError(
                    f"lr_per_step[{i}][{g}] (the base LR of optimizer step {i + 1}) must be a finite number in "
                    f"[0, {MAX_REPLAY_LR:g}], but got {value!r}. The schedule is damaged; replaying it would train "
                    "at that LR. Use another hdet_schedule.json."
                )


def add_to_model_card(
    readme: str | os.PathLike[str], schedule: HDETSchedule, plot_filename: str | None = PLOT_FILENAME
) -> None:
    """Add the `model_card_section` and the ``hdet`` tag to an existing model card (README.md), in place.

    Idempotent: a section written earlier (e.g. by a checkpoint's card) is replaced, never repeated, so every
    shell may call it after whatever wrote the card (`Trainer.create_model_card` or a subclass's override).

    Example:
        >>> import tempfile
        >>> s = HDETSchedule(world_size=2, total_steps=2, sync_interval=2, trajectory=[{"step": 2, "base": {"lr": 1e-3}}])
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     readme = os.path.join(folder, "README.md")
        ...     with open(readme, "w") as f:
        ...         _ = f.write("---\\ntags:\\n- trl\\n---\\n# My model\\n")
        ...     add_to_model_card(readme, s, plot_filename=None)
        ...     add_to_model_card(readme, s, plot_filename=None)
        ...     text = open(readme).read()
        >>> text.count("## HDET schedule"), "- hdet" in text, "- trl" in text
        (1, True, True)
    """
    from huggingface_hub import ModelCard

    card = ModelCard.load(readme)
    tags = card.data.tags or []
    tags = [tags] if isinstance(tags, str) else list(tags)
    if MODEL_CARD_TAG not in tags:
        card.data.tags = [*tags, MODEL_CARD_TAG]
    block = f"{_CARD_START}\n{model_card_section(schedule, plot_filename=plot_filename).strip()}\n{_CARD_END}"
    before, start, rest = card.text.partition(_CARD_START)
    if start and _CARD_END in rest:
        card.text = before + block + rest.split(_CARD_END, 1)[1]
    else:
        card.text = card.text.rstrip("\n") + "\n\n" + block + "\n"
    card.save(readme)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


# Strict JSON has no infinity. `_finite_or_none` would write an unbounded line-search optimum as None, which reads
# "no fit" although it is the fit that allows the largest raise (session 47 found runs whose 4x raises showed None).
UNBOUNDED = "inf"


def _unbounded_optimum_to_json(entry: Any) -> Any:
    if isinstance(entry, Mapping) and entry.get("line_search_optimum") == math.inf:
        return {**entry, "line_search_optimum": UNBOUNDED}
    return entry


def _unbounded_optimum_from_json(entry: Any) -> Any:
    if isinstance(entry, Mapping) and entry.get("line_search_optimum") == UNBOUNDED:
        return {**entry, "line_search_optimum": math.inf}
    return entry


def _finite_or_none(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    return obj


def _download_from_hub(
    repo_id: str,
    *,
    revision: str | None,
    token: str | bool | None,
    subfolder: str | None,
    cache_dir: str | os.PathLike[str] | None,
) -> str:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HFValidationError, RevisionNotFoundError

    where = f"'{repo_id}'" + (f" (revision '{revision}')" if revision else "")
    try:
        return hf_hub_download(
            repo_id,
            SCHEDULE_FILENAME,
            subfolder=subfolder,
            revision=revision,
            token=token,
            cache_dir=cache_dir,
        )
    except HFValidationError as exc:
        raise FileNotFoundError(
            f"'{repo_id}' is neither a local file or directory nor a valid Hub repo id ({exc})."
        ) from exc
    except EntryNotFoundError as exc:
        inside = f" in '{subfolder}'" if subfolder else ""
        raise FileNotFoundError(
            f"The Hub repo {where} has no {SCHEDULE_FILENAME}{inside}. Push a model saved by an HDET run "
            f"(the trainer writes {SCHEDULE_FILENAME} next to the weights)."
        ) from exc
    except RevisionNotFoundError as exc:
        raise FileNotFoundError(f"Revision '{revision}' does not exist in the Hub repo '{repo_id}'.") from exc
