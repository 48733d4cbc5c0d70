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

The start race scores its copies on a probe of its own (``race_probe_size``): 128 examples by default, since its
paired tests decide once per run; where that probe comes from the train set, at most a quarter of it, so that the race
keeps most of the set to train its copies on.

Pure index arithmetic: the Trainer shell (`trainer.py`, `trainer_race.py`) selects the examples.
"""

from __future__ import annotations

__all__ = ["DEFAULT_RACE_PROBE_SIZE", "PROBE_SAMPLINGS", "indices_without", "probe_indices", "race_probe_size"]

PROBE_SAMPLINGS = ("spread", "first")
# The race's probe when --hdet_start_race_probe_size is unset (session 51: with the controller's 32 a collapsed start
# was 1.7 standard errors behind the copy below on a pretrained classifier; with 128 the race lowered it).
DEFAULT_RACE_PROBE_SIZE = 128
# An unset race probe drawn from the train set takes at most 1 / RACE_PROBE_TRAIN_SHARE of it.
RACE_PROBE_TRAIN_SHARE = 4


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


def race_probe_size(requested: int | None, probe_size: int, train_set_size: int | None = None) -> int:
    """How many examples the start race scores its copies on.

    ``requested`` (--hdet_start_race_probe_size) as it is when set. Unset: `DEFAULT_RACE_PROBE_SIZE`, except where the
    probe comes from the train set (``train_set_size`` given: no usable eval set), where it is at most a quarter of
    that set and never below the controller's ``probe_size``: the race trains its copies on the examples the probes
    leave, and a train set of a few hundred would otherwise lose half of them to the probe.
    """
    if requested is not None:
        return requested
    if train_set_size is None:
        return DEFAULT_RACE_PROBE_SIZE
    return min(DEFAULT_RACE_PROBE_SIZE, max(probe_size, train_set_size // RACE_PROBE_TRAIN_SHARE))
