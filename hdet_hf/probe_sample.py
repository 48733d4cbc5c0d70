"""Which examples form the shared probe batch, and which examples are left for training copies.

The probe scores every replica (and every start-race copy) on the same examples, so it must stand for the data the
run is judged on. Datasets are often ordered: a causal-LM dataset made by `group_texts` holds each document's blocks
one after another, and files, packages or labels are often sorted. The first ``size`` examples of such a dataset are
one document. On task j (BENCHMARKS.md reading 55) the first 32 train blocks are one source file: training at the
best LR for 30 steps raised their loss from 3.870 to 4.303 while 32 blocks spread over the train set fell from 3.986
to 3.898, and the race read that one file's loss as "every larger LR loses ground".

``spread`` (the default) takes ``size`` examples evenly spaced over the dataset (index ``i * n // size``): the
same examples on every rank without a random draw, every part of an ordered dataset, and on a shuffled one as
good as a random sample. ``first`` takes the first ``size`` (the rule before session 50).

Pure index arithmetic: the Trainer shell (`trainer.py`, `trainer_race.py`) selects the examples.
"""

from __future__ import annotations

__all__ = ["PROBE_SAMPLINGS", "probe_indices", "indices_without"]

PROBE_SAMPLINGS = ("spread", "first")


def probe_indices(dataset_size: int, size: int, sampling: str = "spread") -> list[int]:
    """The probe's example indices in a dataset of ``dataset_size``: ``min(size, dataset_size)`` distinct ones."""
    if sampling not in PROBE_SAMPLINGS:
        raise ValueError(f"sampling must be one of {', '.join(PROBE_SAMPLINGS)}, got {sampling!r}")
    if dataset_size < 0 or size < 0:
        raise ValueError(f"Expected sizes >= 0, got dataset_size={dataset_size}, size={size}")
    count = min(size, dataset_size)
    if sampling == "first":
        return list(range(count))
    # i * n // count is strictly increasing in i when count <= n: distinct indices, the first one 0.
    return [i * dataset_size // count for i in range(count)]


def indices_without(dataset_size: int, excluded: list[int]) -> list[int]:
    """The indices of ``range(dataset_size)`` not in ``excluded``, in order; all of them when nothing would be
    left (a dataset no larger than the probe trains on the probe's examples rather than on none)."""
    leave_out = set(excluded)
    kept = [i for i in range(dataset_size) if i not in leave_out]
    return kept if kept else list(range(dataset_size))
