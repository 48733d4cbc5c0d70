import pytest
import torch

from hdet_hf.spread import permuted_multipliers, shared_permutation, spread_multipliers


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("spread", [0.0, 0.25, 0.5, 0.9])
def test_multipliers_mean_exactly_one_and_span(world_size, spread):
    m = spread_multipliers(world_size, spread)
    assert len(m) == world_size
    assert sum(m) / world_size == pytest.approx(1.0, abs=1e-15)
    if world_size > 1:
        assert min(m) == pytest.approx(1 - spread)
        assert max(m) == pytest.approx(1 + spread)
    assert all(x > 0 for x in m)


def test_formula_matches_issue():
    n, a = 4, 0.5
    expected = [1 + a * (r - (n - 1) / 2) / max((n - 1) / 2, 0.5) for r in range(n)]
    assert spread_multipliers(n, a) == expected
    # Two ranks: divisor 0.5, so multipliers are 1 -/+ alpha.
    assert spread_multipliers(2, 0.3) == [0.7, 1.3]


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5])
def test_spread_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        spread_multipliers(4, bad)


def test_permutation_reassigns_slots():
    assert permuted_multipliers(3, 0.5, [2, 0, 1]) == [1.5, 0.5, 1.0]
    with pytest.raises(ValueError, match="permutation"):
        permuted_multipliers(3, 0.5, [0, 0, 1])


def test_shared_permutation_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    g1 = torch.Generator().manual_seed(7)
    g2 = torch.Generator().manual_seed(7)
    perms1 = [shared_permutation(8, g1) for _ in range(5)]
    perms2 = [shared_permutation(8, g2) for _ in range(5)]
    assert perms1 == perms2
    assert len({tuple(p) for p in perms1}) > 1  # it does change between intervals
    assert torch.equal(torch.rand(3), expected_next)
