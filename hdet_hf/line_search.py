"""Far below the right LR, let the probe's line search size a raise (``--hdet_controller_line_search_threshold``).

In shared mode the replicas of one interval lie on one line: after a step-size fan-out replica r is at
``start + m_r * D``, after a horizon interval at ``average + D + c (m_r - 1) Z`` (`horizon`). So the probe losses
of a converge sample one function of the multiplier, ``loss(m)``, and a quadratic fit through them gives that
line search's optimum ``m*``: how many times the current LR the probe would step along the run's direction.

The controller's softmax reduces every comparison to a ranking (`controller.loss_weights`), so one move is at
most about ``gain x lambda x 0.15`` in log scale however far the LR is from right: from 10x below it needs a
dozen agreeing converges, and by then most of what a slow start loses is lost (BENCHMARKS.md, reading 15).
The line search tells the two apart. At the sweep's best LR its optimum was 1-2.6 on five tasks (the probe
favours long steps); 10x below, 4 to infinity (progress exactly proportional to the step: a straight line).

So when a raise passes the controller's own checks (the gated hypergradient is > 0) and the optimum was at or
beyond ``threshold`` at this converge *and* the previous one (one converge's line can be straight by chance at a
too-high LR, where the next one bends back), the raise is at least ``min(m* / threshold, max_raise)``: dividing
by the threshold allows for the probe's bias towards long steps, and the cap bounds one move when the line
has no curvature to measure. The controller's own bounds (``--hdet_controller_max_factor``) still apply.
With ``--hdet_controller_line_search_breaks_ties`` (the default since session 19) the same raise also happens
when the controller would hold because its scores disagree (gated hypergradient exactly 0): on a pretrained
classifier from 10x below the train loss kept disagreeing with a probe whose line stayed straight (reading 24).

Two replicas give two points, too few for a parabola: each then rebuilds the line's centre (multiplier 1) as the
third (`centre_point`, ``--hdet_controller_line_search_centre``).

Pure math (no collectives): the controller step (`controller_step`) hands in each converge's multipliers and probe
losses.

Example:
    >>> import torch
    >>> m = torch.tensor([0.75, 0.9167, 1.0833, 1.25])
    >>> round(line_search_optimum(m, 2.0 - 0.1 * m + 0.01 * m**2), 3)   # a parabola with its minimum at 5
    5.0
    >>> raises = LineSearchRaise(threshold=4.0, max_raise=2.0)
    >>> raises.observe(5.0), raises.observe(6.0)   # the second of two far optima in a row
    (1.0, 1.5)
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .config import HDETConfig

__all__ = ["line_search_optimum", "LineSearchRaise"]

# Fewer distinct multipliers than a parabola's three parameters leave its curvature unknown.
MIN_POINTS = 3


def line_search_optimum(
    multipliers: torch.Tensor, losses: torch.Tensor, mask: torch.Tensor | None = None
) -> float | None:
    """The minimiser ``m*`` of a least-squares parabola through ``(m_r, loss_r)``.

    ``inf`` when the loss falls along the whole line and the fit has no upward curvature (straight or bending
    down: the optimum is beyond anything measured); ``0.0`` when it rises along it without upward curvature;
    None with fewer than three distinct finite points (``mask`` drops ranks, e.g. unhealthy ones) or when every
    point has the same loss (replicas that were not displaced measured nothing).
    """
    m, y = multipliers.double().flatten(), losses.double().flatten()
    keep = torch.isfinite(m) & torch.isfinite(y)
    if mask is not None:
        keep &= mask.flatten().bool()
    points = list(zip(m[keep].tolist(), y[keep].tolist()))
    if len({x for x, _ in points}) < MIN_POINTS:
        return None
    if len({y for _, y in points}) == 1:
        return None  # every replica scored the same: nothing was measured (not a flat line to extrapolate)
    # Plain Python floats in a fixed order, not LAPACK: every rank must get the same bits from the same
    # gathered numbers, or a threshold test could go one way on one rank and the other way on another.
    # Centred and scaled multipliers keep the normal equations well conditioned for narrow spreads.
    centre = math.fsum(x for x, _ in points) / len(points)
    width = math.sqrt(math.fsum((x - centre) ** 2 for x, _ in points) / len(points))
    xs = [(x - centre) / width for x, _ in points]
    ys = [v for _, v in points]
    slope, curvature = _parabola(xs, ys)
    # Relative to the slope: a curvature at rounding level is no curvature.
    if curvature <= 1e-12 * max(1.0, abs(slope)):
        return math.inf if slope < 0 else 0.0
    return max(0.0, centre + width * (-slope / (2.0 * curvature)))


def _parabola(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x + c x**2`` through points with mean(x) 0: returns (b, c)."""
    n = len(xs)
    s2 = math.fsum(x**2 for x in xs)
    s3 = math.fsum(x**3 for x in xs)
    s4 = math.fsum(x**4 for x in xs)
    t0 = math.fsum(ys)
    t1 = math.fsum(x * y for x, y in zip(xs, ys))
    t2 = math.fsum(x * x * y for x, y in zip(xs, ys))
    # Normal equations [[n, 0, s2], [0, s2, s3], [s2, s3, s4]] (a, b, c) = (t0, t1, t2), solved by Cramer's rule.
    det = n * (s2 * s4 - s3 * s3) - s2 * s2 * s2
    b = (n * (t1 * s4 - s3 * t2) + s2 * (s3 * t0 - s2 * t1)) / det
    c = (n * (s2 * t2 - s3 * t1) - s2 * s2 * t0) / det
    return b, c


class LineSearchRaise:
    """The raise factor the line search allows at each converge (1.0: none), and the last optimum seen.

    ``breaks_ties``: a converge where the controller would hold (its move exactly 0) may be raised too.
    ``until_bend``: the first fitted optimum below the threshold ends the line search for the run (`bent`).
    """

    def __init__(
        self, threshold: float, max_raise: float, breaks_ties: bool = False, until_bend: bool = False
    ) -> None:
        self.threshold = threshold
        self.max_raise = max_raise
        self.breaks_ties = breaks_ties
        self.until_bend = until_bend
        self.last_optimum: float | None = None
        self.bent = False

    @classmethod
    def for_run(cls, config: HDETConfig, replicas: int = MIN_POINTS, warn: bool = True) -> LineSearchRaise:
        """The line search of a run's resolved config (``HDETConfig.for_run``) over ``replicas`` replicas; warns
        (unless not ``warn``) where it is uncalibrated or cannot act."""
        from .centre_point import uses_centre_point
        from .config import MIN_FRACTION_SYNC_INTERVAL

        raises = cls(
            config.controller_line_search_threshold,
            config.controller_line_search_max_raise,
            config.controller_line_search_breaks_ties,
            # Three points fitted exactly (the rebuilt centre) leave no residual to show noise: climb only from
            # the start, until the line first bends (BENCHMARKS.md, reading 32).
            until_bend=config.controller_line_search_until_bend and uses_centre_point(config, replicas),
        )
        reads_probe = config.auto_lr and config.controller_signal != "train_loss"
        if warn and raises.enabled and reads_probe and config.sync_interval < MIN_FRACTION_SYNC_INTERVAL:
            # Warned, not changed: the threshold is uncalibrated there, not wrong by construction.
            warnings.warn(
                f"--hdet_controller_line_search_threshold {raises.threshold:g} was measured with converges at least "
                f"{MIN_FRACTION_SYNC_INTERVAL} steps apart; over {config.sync_interval}-step intervals the probe's "
                "line is straight early in a run at any LR, and on a held-out task 4-step intervals raised the best "
                "LR 4x and ended 1.6-3.7x worse (BENCHMARKS.md, reading 25). Use --hdet_sync_interval "
                f"{MIN_FRACTION_SYNC_INTERVAL} or more, or --hdet_controller_line_search_threshold 0.",
                stacklevel=3,
            )
        centreless = 1 < replicas < MIN_POINTS and not uses_centre_point(config, replicas)
        if warn and raises.enabled and reads_probe and centreless:
            # Warned, not refused: the rest of the controller works; only the climb from far below is slower.
            warnings.warn(
                f"--hdet_controller_line_search_threshold needs {MIN_POINTS} or more replicas to fit a line, or "
                f"{replicas} with shared gradients, the comparison horizon and a probe scored without a cool-down "
                f"(each replica then rebuilds the line's centre), and does nothing here: from far below the right "
                "LR the controller climbs by its votes alone, which on a 120-step classifier from 10x below ended "
                f"2.48x the sweep's best at 2 processes against 1.38x at 4 (BENCHMARKS.md, reading 30).",
                stacklevel=3,
            )
        return raises

    @property
    def enabled(self) -> bool:
        return self.threshold > 0

    def observe(self, optimum: float | None) -> float:
        """Take in this converge's optimum (None: no fit) and return the least raise factor it allows."""
        previous, self.last_optimum = self.last_optimum, optimum
        if self.until_bend and optimum is not None and optimum < self.threshold:
            self.bent = True
        if not self.enabled or self.bent or optimum is None or previous is None:
            return 1.0
        if optimum < self.threshold or previous < self.threshold:
            return 1.0
        return max(1.0, min(optimum / self.threshold, self.max_raise))

    def raise_for(self, optimum: float | None, delta: float) -> float:
        """Take in this converge's optimum and return the raise for the controller's move ``delta``: what
        `observe` allows when the move is a raise (or, with ``breaks_ties``, a tie: delta exactly 0), else 1."""
        factor = self.observe(optimum)
        passed = delta > 0 or (delta == 0 and self.breaks_ties)
        return factor if passed else 1.0

    def state_dict(self) -> dict[str, Any]:
        return {"line_search": {"last_optimum": self.last_optimum, "bent": self.bent}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("line_search") or {}
        last = saved.get("last_optimum")
        self.last_optimum = None if last is None else float(last)
        self.bent = bool(saved.get("bent", False))
