"""A link model for simulating the interconnect between replicas (pure arithmetic: no torch, no processes).

``benchmark_speed.py --simulate_links`` applies it to every cross-replica collective of a real training step
(DDP's gradient all-reduce, HDET's converge); the step's compute is measured for real. The model is the
textbook ring all-reduce (Patarasuk & Yuan; NCCL's "bus bandwidth"): each of ``N`` ranks sends and receives
``2 (N - 1) / N`` times the buffer in ``2 (N - 1)`` steps, each step paying the link's latency once::

    seconds = 2 (N - 1) * latency + 2 (N - 1) / N * bytes * 8 / bits_per_second

For HSDP, ``N`` is the number of replica groups and ``bytes`` what one group sends across groups (its whole
replica: the shards of a group travel in parallel over the group's links, which together are the link here).

The rest of this module turns measurements into statements: :func:`fit_link` recovers (bandwidth, latency)
from timed all-reduces (the loopback link this machine really has), :func:`step_times` predicts a DDP and an
HDET ``local`` step from a compute time, and :func:`break_even_bandwidth` solves for the link speed where
DDP / HDET-local reaches a given ratio.

Example:
    >>> link = Link(gbps=10.0, latency_us=10.0)
    >>> round(ring_allreduce_seconds(10**9, 2, link), 4)  # 1 GB over 2 ranks at 10 Gb/s
    0.8
    >>> ring_allreduce_seconds(10**9, 1, link)  # nobody to talk to
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Link",
    "ring_factor",
    "ring_allreduce_seconds",
    "fit_link",
    "step_times",
    "fit_overlap",
    "break_even_bandwidth",
    "max_compute_for_ratio",
]


@dataclass(frozen=True)
class Link:
    """One link between replicas: ``gbps`` gigabits per second (10**9 bit/s) each way, ``latency_us`` per hop."""

    gbps: float
    latency_us: float = 0.0

    def __post_init__(self) -> None:
        if not (self.gbps > 0 and math.isfinite(self.gbps)):
            raise ValueError(f"Expected a positive, finite link bandwidth in Gb/s, but got {self.gbps!r}")
        if not (self.latency_us >= 0 and math.isfinite(self.latency_us)):
            raise ValueError(
                f"Expected a non-negative, finite link latency in us, but got {self.latency_us!r}"
            )

    @property
    def bytes_per_second(self) -> float:
        return self.gbps * 1e9 / 8


def ring_factor(world: int) -> float:
    """``2 (N - 1) / N``: the multiple of the buffer each rank sends (and receives) in a ring all-reduce."""
    if world < 1:
        raise ValueError(f"Expected at least 1 rank, but got world={world!r}")
    return 2 * (world - 1) / world


def ring_allreduce_seconds(nbytes: float, world: int, link: Link) -> float:
    """Seconds one ring all-reduce of ``nbytes`` (per rank) takes over ``link`` among ``world`` ranks."""
    if nbytes < 0:
        raise ValueError(f"Expected a non-negative byte count, but got {nbytes!r}")
    if world <= 1:
        return 0.0
    steps = 2 * (world - 1)
    return steps * link.latency_us * 1e-6 + ring_factor(world) * nbytes / link.bytes_per_second


def fit_link(nbytes: Sequence[float], seconds: Sequence[float], world: int) -> Link:
    """The link whose ring all-reduce best explains measured (bytes, seconds) pairs (least squares).

    Fits ``seconds = a + b * bytes`` and inverts the ring model: ``latency = a / (2 (N - 1))``,
    ``bandwidth = 2 (N - 1) / N / b``. A negative intercept (noise on small sizes) is clamped to zero latency.
    """
    if len(nbytes) != len(seconds) or len(set(nbytes)) < 2:
        raise ValueError(
            f"Expected (bytes, seconds) pairs with at least two different sizes, but got {len(set(nbytes))} "
            f"sizes for {len(seconds)} times"
        )
    if world < 2:
        raise ValueError(f"Expected world >= 2 to fit a link (one rank sends nothing), but got {world!r}")
    n = len(nbytes)
    mx, my = sum(nbytes) / n, sum(seconds) / n
    sxx = sum((x - mx) ** 2 for x in nbytes)
    b = sum((x - mx) * (y - my) for x, y in zip(nbytes, seconds)) / sxx
    if b <= 0:
        raise ValueError(
            f"Measured all-reduce times do not grow with size (slope {b:.3g} s/byte): too noisy to fit a link"
        )
    a = max(0.0, my - b * mx)
    return Link(gbps=ring_factor(world) / b * 8 / 1e9, latency_us=a / (2 * (world - 1)) * 1e6)


def step_times(
    compute_s: float,
    grad_bytes: float,
    world: int,
    link: Link,
    sync_interval: int,
    overlap_s: float = 0.0,
    converge_bytes: float | None = None,
) -> tuple[float, float]:
    """Predicted (DDP, HDET ``local``) seconds per optimizer step.

    DDP all-reduces ``grad_bytes`` every step; ``overlap_s`` of it hides under the backward pass (0: none
    hidden, the pessimistic bound for DDP). HDET ``local`` computes alone and all-reduces ``converge_bytes``
    (default: the same bytes, parameters instead of gradients) once every ``sync_interval`` steps.
    """
    if sync_interval < 1:
        raise ValueError(f"Expected a positive sync_interval, but got {sync_interval!r}")
    if compute_s < 0 or overlap_s < 0:
        raise ValueError(f"Expected non-negative times, but got compute {compute_s!r}, overlap {overlap_s!r}")
    comm = ring_allreduce_seconds(grad_bytes, world, link)
    conv = ring_allreduce_seconds(grad_bytes if converge_bytes is None else converge_bytes, world, link)
    return compute_s + max(0.0, comm - overlap_s), compute_s + conv / sync_interval


def fit_overlap(compute_s: float, exposed_s: Sequence[float], comm_s: Sequence[float]) -> float:
    """Seconds of DDP communication hidden under compute, from measured (exposed, modelled comm) pairs.

    Each pair says ``exposed = max(0, comm - overlap)``; the rows where communication was exposed give
    ``overlap = comm - exposed``; their median is returned, clamped to ``[0, compute_s]``. With no exposed row,
    0 (the pessimistic bound).
    """
    estimates = sorted(c - e for e, c in zip(exposed_s, comm_s) if e > 0)
    if not estimates:
        return 0.0
    mid = len(estimates) // 2
    median = estimates[mid] if len(estimates) % 2 else (estimates[mid - 1] + estimates[mid]) / 2
    return min(max(0.0, median), compute_s)


def break_even_bandwidth(
    ratio: float,
    compute_s: float,
    grad_bytes: float,
    world: int,
    sync_interval: int,
    latency_us: float = 0.0,
    overlap_s: float = 0.0,
    lo_gbps: float = 1e-3,
    hi_gbps: float = 1e5,
) -> float | None:
    """The link speed (Gb/s) at which predicted DDP / HDET-local equals ``ratio``; slower links give more.

    The ratio falls as bandwidth rises, so bisection (in log space) finds the one crossing. Returns None when
    even ``lo_gbps`` stays below ``ratio`` (the ratio is out of reach: e.g. latency dominates), and ``hi_gbps``
    when even ``hi_gbps`` is above it.
    """
    if ratio <= 1:
        raise ValueError(f"Expected a DDP / HDET-local ratio above 1, but got {ratio!r}")

    def f(gbps: float) -> float:
        ddp, local = step_times(
            compute_s, grad_bytes, world, Link(gbps, latency_us), sync_interval, overlap_s=overlap_s
        )
        return ddp / local - ratio

    if f(lo_gbps) < 0:
        return None
    if f(hi_gbps) >= 0:
        return hi_gbps
    lo, hi = math.log(lo_gbps), math.log(hi_gbps)
    for _ in range(100):
        mid = (lo + hi) / 2
        if f(math.exp(mid)) >= 0:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def max_compute_for_ratio(
    ratio: float, grad_bytes: float, world: int, link: Link, sync_interval: int
) -> float | None:
    """The longest step compute (seconds) for which DDP / HDET-local still reaches ``ratio`` with no overlap.

    Solves ``(c + comm) / (c + conv / T) = ratio`` for ``c``: the regime statement "HDET local is ``ratio``x
    faster when a step computes in under this", independent of how fast this machine computes. None when no
    compute time reaches it (``T <= ratio``: even a step with no compute is at most ``T``x faster).
    """
    if ratio <= 1:
        raise ValueError(f"Expected a DDP / HDET-local ratio above 1, but got {ratio!r}")
    comm = ring_allreduce_seconds(grad_bytes, world, link)
    amortized = comm / sync_interval
    if comm - ratio * amortized <= 0:
        return None
    return (comm - ratio * amortized) / (ratio - 1)
