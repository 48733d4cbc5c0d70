"""Fitness weights of a converge (`hdet_hf.fitness`): pure math, no processes."""

import math

import pytest
import torch

from hdet_hf import HDETConfig
from hdet_hf.collectives import fused_average_
from hdet_hf.fitness import MAX_Z, FitnessWeights, fitness_reference, fitness_weight


def test_reference_is_mean_and_temperature_times_std_of_scored_ranks():
    rows = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    scored = torch.tensor(
        [True, True, True, False]
    )  # an unscored (reset) replica does not move the reference
    ((centre, scale),) = fitness_reference(rows, scored, 2.0, "adaptive")
    assert centre == pytest.approx(2.0) and scale == pytest.approx(2.0 * math.sqrt(2 / 3))
    assert fitness_reference(rows, scored, 0.5, "fixed") == [(pytest.approx(2.0), 0.5)]


@pytest.mark.parametrize(
    "rows, scored",
    [
        (torch.tensor([[1.0, 1.0]]), torch.tensor([True, True])),  # identical scores: nothing to tell apart
        (torch.tensor([[1.0, 2.0]]), torch.tensor([True, False])),  # one scored rank
        (torch.tensor([[1.0, math.nan]]), torch.tensor([True, True])),
    ],
)
def test_no_reference_when_scores_cannot_rank_replicas(rows, scored):
    assert fitness_reference(rows, scored, 1.0, "adaptive") is None


def test_lower_scores_weigh_more_and_the_ratio_is_bounded():
    reference = [(2.0, 0.5)]
    assert fitness_weight([2.0], reference) == 1.0
    assert fitness_weight([1.5], reference) == pytest.approx(math.e)
    assert fitness_weight([2.5], reference) == pytest.approx(1 / math.e)
    assert fitness_weight([-1e9], reference) == pytest.approx(math.exp(MAX_Z))  # clipped, no overflow
    assert fitness_weight([math.nan], reference) == 1.0 and fitness_weight([5.0], None) == 1.0
    # Two rows (train_and_* signals): the mean of their z.
    assert fitness_weight([1.5, 2.5], [(2.0, 0.5), (2.0, 0.5)]) == pytest.approx(1.0)


def test_state_round_trips_for_exact_resume():
    weights = FitnessWeights(1.0, "adaptive")
    weights.observe(torch.tensor([[1.0, 3.0], [2.0, 4.0]]), torch.tensor([True, True]))
    restored = FitnessWeights(1.0, "adaptive")
    restored.load_state_dict(weights.state_dict())
    assert restored.reference == weights.reference == [(2.0, 1.0), (3.0, 1.0)]
    empty = FitnessWeights(1.0, "adaptive")
    empty.load_state_dict(FitnessWeights(1.0, "adaptive").state_dict())
    assert empty.reference is None


def test_fused_average_takes_a_weight_and_refuses_a_bad_one():
    tensors = [torch.tensor([3.0, -1.0])]
    _, total = fused_average_(tensors, torch.zeros(1), 0, 1, weight=0.25)
    assert total == 0.25 and tensors[0].tolist() == [3.0, -1.0]  # one rank: its own values
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="finite weight > 0"):
            fused_average_(tensors, torch.zeros(1), 0, 1, weight=bad)


def test_fitness_weights_are_refused_with_hsdp():
    with pytest.raises(
        ValueError, match="converge_weights fitness is not supported with --hdet_hsdp_shard_size"
    ):
        HDETConfig(converge_weights="fitness", hsdp_shard_size=2)
