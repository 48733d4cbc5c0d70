"""Rank multipliers: the symmetric spread of a hyperparameter around its shared base value.

Pure functions of plain numbers; nothing here touches torch.distributed.

Rank ``r`` of ``N`` gets ``1 + alpha * (r - (N - 1) / 2) / max((N - 1) / 2, 0.5)``: the multipliers are
evenly spaced in ``[1 - alpha, 1 + alpha]`` and their mean is exactly 1, so the ensemble as a whole runs at
the base value. A permutation (identical on every rank) decides which rank gets which slot at each interval.

Example:
    >>> spread_multipliers(4, 0.5)
    [0.5, 0.8333333333333334, 1.1666666666666667, 1.5]
    >>> permuted_multipliers(4, 0.5, [3, 2, 1, 0])
    [1.5, 1.1666666666666667, 0.8333333333333334, 0.5]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["spread_multipliers", "permuted_multipliers", "shared_permutation"]


def spread_multipliers(world_size: int, spread: float) -> list[float]:
    """Multipliers for slots ``0..world_size-1``; slot ``s`` gets ``1 + spread * (s - c) / max(c, 0.5)``."""
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"Expected positive integer world_size, but got {world_size!r}")
    if not 0.0 <= spread < 1.0:
        raise ValueError(f"Expected spread in [0, 1) so every multiplier stays positive, but got {spread!r}")
    center = (world_size - 1) / 2.0
    divisor = max(center, 0.5)
    return [1.0 + spread * (slot - center) / divisor for slot in range(world_size)]


def permuted_multipliers(world_size: int, spread: float, permutation: Sequence[int]) -> list[float]:
    """Per-rank multipliers when rank ``r`` takes slot ``permutation[r]``."""
    if sorted(permutation) != list(range(world_size)):
        raise ValueError(f"Expected a permutation of range({world_size}), but got {list(permutation)!r}")
    slots = spread_multipliers(world_size, spread)
    return [slots[slot] for slot in permutation]


def shared_permutation(world_size: int, generator: torch.Generator) -> list[int]:
    """A random permutation drawn from ``generator``.

    Every rank owns a generator seeded identically and draws from it the same number of times, so all ranks
    get the same permutation without any communication and without touching the global RNG (the reference
    implementation re-seeded ``torch.manual_seed``, which silently changes the user's data order and dropout).
    """
    return torch.randperm(world_size, generator=generator).tolist()
