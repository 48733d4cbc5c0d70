"""One picture of an HDET run: base LR with the per-rank spread, per-rank losses, other hyperparameters.

Uses matplotlib's object API with the Agg canvas directly (no ``pyplot``), so it works without a
display, from any thread, and never changes the backend of a notebook that imports hdet_hf.

Example:
    >>> import tempfile, os
    >>> from hdet_hf.schedule_metadata import HDETSchedule
    >>> from hdet_hf.plotting import plot_schedule
    >>> s = HDETSchedule(world_size=2, total_steps=4, sync_interval=2, lr_per_step=[[1e-3]] * 4,
    ...                  trajectory=[{"step": 2, "base": {"lr": 1e-3}, "multipliers": {"lr": [0.5, 1.5]},
    ...                               "losses": [2.0, 1.8]}])
    >>> path = plot_schedule(s, os.path.join(tempfile.mkdtemp(), "hdet_schedule.png"))
    >>> os.path.getsize(path) > 0
    True
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .schedule_metadata import HDETSchedule

__all__ = ["plot_schedule"]

# Above this many converges, a vertical line per converge turns the panel grey; markers alone remain.
_MAX_CONVERGE_LINES = 60
_LOG_SPAN = 10.0


def plot_schedule(schedule: HDETSchedule | Mapping[str, Any], path: str | os.PathLike[str]) -> str:
    """Draw ``schedule`` and save it to ``path`` (PNG unless the suffix says otherwise).

    Panels: (1) base LR per optimizer step, with the per-rank LRs (base x min .. max multiplier of
    each interval) shaded and converges marked; (2) each rank's loss at each converge, coloured by
    its multiplier, with the controller's softmax weights (not averaging weights: a converge
    averages replicas equally) on a second axis; (3) only when other
    hyperparameters were explored, their base values. A run with no converge yet still plots.

    Args:
        schedule: an :class:`HDETSchedule` or its ``to_dict()`` form.
        path: output file; parent folders are created.

    Returns:
        ``path`` as a string.
    """
    if not isinstance(schedule, HDETSchedule):
        schedule = HDETSchedule.from_dict(schedule)
    path = os.fspath(path)
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)

    others = _other_hyperparameters(schedule)
    n_panels = 3 if others else 2
    fig = Figure(figsize=(9.0, 3.3 * n_panels), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_panels, 1, sharex=True, squeeze=False)[:, 0]
    fig.suptitle(
        f"HDET schedule: {schedule.world_size} ranks, converge every {schedule.sync_interval} steps"
        f"{_vote_spacing(schedule)}, {schedule.num_converges} converges"
    )

    _plot_lr(axes[0], schedule)
    _plot_losses(fig, axes[1], schedule)
    if others:
        _plot_others(axes[2], schedule, others)

    last_step = max([len(schedule.lr_per_step), schedule.total_steps, *schedule.converge_steps, 1])
    axes[-1].set_xlim(0, last_step + 1)
    axes[-1].set_xlabel("optimizer step")
    fig.savefig(path)
    return path


# -- data helpers -------------------------------------------------------------------------------------


def _num(value: Any) -> float:
    """A float, NaN for missing / non-numeric values (a diverged rank's loss is saved as null)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _multiplier_name(schedule: HDETSchedule) -> str | None:
    """The hyperparameter whose multipliers colour the ranks: "lr" if recorded, else the first one."""
    names = [name for entry in schedule.trajectory for name in (entry.get("multipliers") or {})]
    if "lr" in names:
        return "lr"
    return names[0] if names else None


def _interval_multipliers(schedule: HDETSchedule, name: str) -> list[tuple[int, int, list[float]]]:
    """``(first_step, last_step, multipliers)`` of each interval that recorded ``name``."""
    out, prev = [], 0
    for entry in schedule.trajectory:
        step = int(entry.get("step", prev))
        mults = [_num(m) for m in (entry.get("multipliers") or {}).get(name) or []]
        mults = [m for m in mults if math.isfinite(m)]
        if mults:
            out.append((prev + 1, step, mults))
        prev = step
    return out


def _base_lr_table(schedule: HDETSchedule) -> np.ndarray:
    """Per-step base LR, shape (steps, groups); rebuilt from the converges when no per-step record exists."""
    if schedule.lr_per_step:
        return np.array([[_num(v) for v in row] for row in schedule.lr_per_step], dtype=float)
    steps = schedule.converge_steps
    if not steps:
        return np.zeros((0, 1))
    table = np.full((max(steps), 1), np.nan)
    prev = 0
    for entry in schedule.trajectory:
        step = int(entry.get("step", prev))
        table[prev:step, 0] = _num((entry.get("base") or {}).get("lr"))
        prev = step
    return table


def _other_hyperparameters(schedule: HDETSchedule) -> list[str]:
    names = list(schedule.hyperparameters) + list(schedule.values_per_step)
    for entry in schedule.trajectory:
        names += list(entry.get("base") or {})
    seen: dict[str, None] = {}
    for name in names:
        if not (name == "lr" or name.startswith("lr/")):
            seen.setdefault(name, None)
    return list(seen)


def _maybe_log(ax: Any, values: Sequence[np.ndarray]) -> None:
    flat = np.concatenate([np.ravel(v) for v in values]) if values else np.zeros(0)
    flat = flat[np.isfinite(flat) & (flat > 0)]
    if flat.size and flat.max() / flat.min() > _LOG_SPAN:
        ax.set_yscale("log")


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def _mark_converges(ax: Any, schedule: HDETSchedule) -> None:
    if 0 < schedule.num_converges <= _MAX_CONVERGE_LINES:
        for step in schedule.converge_steps:
            ax.axvline(step, color="0.85", lw=0.6, zorder=0)


# -- panels -----------------------------------------------------------------------------------------------


def _vote_spacing(schedule: HDETSchedule) -> str:
    """", a vote every V steps" where the controller voted at every k-th converge only (``--hdet_controller_time_scale
    vote`` with a short T), read from the trajectory's active converges; "" otherwise."""
    votes = [entry["step"] for entry in schedule.trajectory if entry.get("controller_active")]
    gaps = {b - a for a, b in zip(votes, votes[1:])}
    if len(gaps) == 1 and (gap := gaps.pop()) > schedule.sync_interval:
        return f", a vote every {gap} steps"
    return ""


def _plot_lr(ax: Any, schedule: HDETSchedule) -> None:
    ax.set_title("Base learning rate")
    ax.set_ylabel("learning rate")
    table = _base_lr_table(schedule)
    if table.shape[0] == 0:
        _no_data(ax, "no optimizer steps recorded")
        return
    steps = np.arange(1, table.shape[0] + 1)
    base = table[:, 0]
    names = schedule.param_group_names or [f"group_{g}" for g in range(table.shape[1])]
    _mark_converges(ax, schedule)

    lo = np.full_like(base, np.nan)
    hi = np.full_like(base, np.nan)
    for first, last, mults in _interval_multipliers(schedule, "lr"):
        sl = slice(first - 1, min(last, len(base)))
        lo[sl], hi[sl] = base[sl] * min(mults), base[sl] * max(mults)
    if np.isfinite(lo).any():
        ax.fill_between(
            steps,
            lo,
            hi,
            where=np.isfinite(lo),
            color="C0",
            alpha=0.2,
            lw=0,
            label="per-rank LR (min..max multiplier)",
        )
        ax.set_title("Base learning rate (shaded: per-rank LR = base x multiplier)")

    ax.plot(steps, base, color="C0", lw=1.6, label=f"base LR ({names[0]})")
    for g in range(1, table.shape[1]):
        # Groups that follow group 0 exactly add only clutter.
        if not np.allclose(table[:, g], base, equal_nan=True):
            label = names[g] if g < len(names) else f"group_{g}"
            ax.plot(steps, table[:, g], color=f"C{g % 10}", lw=1.2, ls="--", label=f"base LR ({label})")

    converge_steps = [s for s in schedule.converge_steps if 1 <= s <= len(base)]
    if converge_steps:
        ax.plot(converge_steps, base[np.array(converge_steps) - 1], "o", ms=3.5, color="k", label="converge")
    _maybe_log(ax, [table, lo, hi])
    ax.legend(loc="best", fontsize="small")


def _plot_losses(fig: Figure, ax: Any, schedule: HDETSchedule) -> None:
    ax.set_title("Per-rank loss at each converge")
    ax.set_ylabel("loss")
    if not schedule.trajectory:
        _no_data(ax, "no converges recorded")
        return
    mult_name = _multiplier_name(schedule)
    xs, ys, cs, excluded = [], [], [], []
    rank_colour_values: dict[int, list[float]] = {}
    for entry in schedule.trajectory:
        losses = entry.get("losses") or []
        mults = (entry.get("multipliers") or {}).get(mult_name) if mult_name else None
        skip = set(entry.get("excluded_ranks") or [])
        for rank, loss in enumerate(losses):
            colour = _num(mults[rank]) if mults is not None and rank < len(mults) else float(rank)
            xs.append(_num(entry.get("step")))
            ys.append(_num(loss))
            cs.append(colour)
            excluded.append(rank in skip)
            rank_colour_values.setdefault(rank, []).append(colour)
    if not xs:
        _no_data(ax, "no losses recorded")
        return
    x, y, c, ex = (np.array(v) for v in (xs, ys, cs, excluded))
    finite_c = c[np.isfinite(c)]
    norm = Normalize(*(finite_c.min(), finite_c.max()) if finite_c.size else (0.0, 1.0))
    if norm.vmin == norm.vmax:
        # One value (zero spread): widen so the colormap maps it to its middle, not an edge.
        norm = Normalize(norm.vmin - 0.5, norm.vmax + 0.5)
    _mark_converges(ax, schedule)
    scatter = ax.scatter(
        x[~ex], y[~ex], c=c[~ex], cmap="viridis", norm=norm, s=22, edgecolors="k", linewidths=0.3, zorder=3
    )
    handles: list[Any] = [Line2D([], [], marker="o", ls="", color="0.5", label="rank loss")]
    ex &= np.isfinite(y)  # an excluded rank whose loss is NaN has nothing to draw
    if ex.any():
        ax.scatter(
            x[ex], y[ex], c=c[ex], cmap="viridis", norm=norm, marker="x", s=36, linewidths=1.6, zorder=3
        )
        handles.append(Line2D([], [], marker="x", ls="", color="0.5", label="excluded rank"))
    colorbar = fig.colorbar(scatter, ax=ax, pad=0.01)
    colorbar.set_label(f"{mult_name} multiplier" if mult_name else "rank")

    if any(entry.get("weights") for entry in schedule.trajectory):
        wax = ax.twinx()
        cmap = scatter.get_cmap()
        for rank, colours in rank_colour_values.items():
            points = [
                (_num(entry.get("step")), _num(entry["weights"][rank]))
                for entry in schedule.trajectory
                if entry.get("weights") and rank < len(entry["weights"])
            ]
            if points:
                wx, wy = zip(*points, strict=True)
                wax.plot(wx, wy, ls="--", lw=0.9, alpha=0.6, color=cmap(norm(float(np.nanmean(colours)))))
        wax.set_ylabel("controller weight (dashed)")
        wax.set_ylim(bottom=0)
        # A twin axis is drawn on top of its host: lift the losses above the weight lines.
        ax.set_zorder(wax.get_zorder() + 1)
        ax.patch.set_visible(False)
        handles.append(Line2D([], [], ls="--", color="0.5", label="controller weight (right axis)"))
    ax.legend(handles=handles, loc="best", fontsize="small")


def _plot_others(ax: Any, schedule: HDETSchedule, names: list[str]) -> None:
    ax.set_title("Other explored hyperparameters (base value)")
    ax.set_ylabel("value")
    _mark_converges(ax, schedule)
    plotted: list[np.ndarray] = []
    for i, name in enumerate(names):
        colour = f"C{(i + 1) % 10}"
        if name in schedule.values_per_step:
            values = np.array([_num(v) for v in schedule.values_per_step[name]])
            ax.plot(np.arange(1, len(values) + 1), values, color=colour, lw=1.4, label=name)
            plotted.append(values)
            continue
        rows = []  # (step, base, lowest rank value, highest rank value) per converge that recorded `name`
        for entry in schedule.trajectory:
            if "step" not in entry or name not in (entry.get("base") or {}):
                continue
            base = _num(entry["base"][name])
            mults = [_num(m) for m in (entry.get("multipliers") or {}).get(name) or []]
            mults = [m for m in mults if math.isfinite(m)]
            lo, hi = (base * min(mults), base * max(mults)) if mults else (math.nan, math.nan)
            rows.append((int(entry["step"]), base, lo, hi))
        if not rows:
            continue
        steps, values, lo, hi = (np.array(v, dtype=float) for v in zip(*rows, strict=True))
        ax.plot(steps, values, "o-", ms=3, color=colour, lw=1.4, label=name)
        plotted.append(values)
        if np.isfinite(lo).any():
            ax.fill_between(steps, lo, hi, where=np.isfinite(lo), color=colour, alpha=0.15, lw=0)
    if not plotted:
        _no_data(ax, "no values recorded")
        return
    _maybe_log(ax, plotted)
    ax.legend(loc="best", fontsize="small")
