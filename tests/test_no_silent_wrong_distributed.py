"""No silent wrong training (issue 11) under real gloo processes: settings that differ between ranks are
refused on every rank at start (they used to hang or train with wrong multipliers), and a non-finite
optimizer state on one rank no longer enters every rank's average."""

import math

import pytest
import torch
from distributed import load_ranks, torchrun

pytestmark = pytest.mark.slow


def test_settings_that_differ_between_ranks_are_refused_on_every_rank(tmp_path):
    torchrun("safety_worker.py", 3, ["settings", str(tmp_path)], timeout=180)
    ranks = load_ranks(tmp_path, 3)
    for r in ranks:
        assert r["sync_interval"] == ranks[0]["sync_interval"]  # the same error on every rank: none hangs
        assert (
            "HDET settings differ between processes: --hdet_sync_interval: 2 on ranks [0], 3 on ranks [1, 2]"
            in (r["sync_interval"])
        )
        assert "--hdet_lr_spread: 0.25 on ranks [0], 0.5 on ranks [1, 2]" in r["lr_spread"]
        assert "total optimizer steps (--max_steps): 8 on ranks [0], 10 on ranks [1, 2]" in r["run_length"]
        assert "same command line" in r["lr_spread"]
        assert r["same"] is None


def test_an_inf_in_one_ranks_averaged_optimizer_state_does_not_reach_the_others(tmp_path):
    torchrun("safety_worker.py", 3, ["optimizer_inf", str(tmp_path)], timeout=180)
    ranks = load_ranks(tmp_path, 3)
    assert math.isinf(float(ranks[1]["before"]["exp_avg_sq"][0, 0]))
    healthy_mean = torch.stack([ranks[r]["before"]["exp_avg_sq"] for r in (0, 2)]).mean(0)
    for r in ranks:
        assert r["excluded"] == [1]
        # Every rank, the bad one included, holds the healthy ranks' average: finite, and bit-identical.
        assert torch.isfinite(r["after"]["exp_avg_sq"]).all()
        assert torch.equal(r["after"]["exp_avg_sq"], ranks[0]["after"]["exp_avg_sq"])
        torch.testing.assert_close(r["after"]["exp_avg_sq"], healthy_mean)
        for p, q in zip(r["params"], ranks[0]["params"]):
            assert torch.equal(p, q) and torch.isfinite(p).all()


def test_the_first_step_tells_shared_gradients_from_local_ones(tmp_path):
    """The comparison horizon's offsets cancel only when every rank's direction is the same: a horizon without a DDP
    wrapper is refused at the first step; the drop-in takes the horizon when it is given the DDP wrapper or when
    its first step shows shared gradients, and keeps the reference's comparison for local gradients."""
    torchrun("safety_worker.py", 2, ["gradient_sharing", str(tmp_path)], timeout=180)
    ranks = load_ranks(tmp_path, 2)
    for r in ranks:
        assert r == ranks[0]  # every rank read, raised and warned the same
    cases = ranks[0]
    assert cases["engine_ddp"] == {"error": None, "warnings": [], "shared": True, "horizon": True}
    assert (
        cases["engine_local"]["shared"] is False
        and "needs the gradients all-reduced" in cases["engine_local"]["error"]
    )
    assert cases["drop_in_ddp"] == {"error": None, "warnings": [], "shared": True, "horizon": True}
    # Given the unwrapped model, the first step shows shared gradients and switches the horizon on (also after a
    # resume into a fresh scheduler).
    assert cases["drop_in_unwrapped_ddp"] == {"error": None, "warnings": [], "shared": True, "horizon": True}
    assert cases["drop_in_unwrapped_ddp_config"] == (None, None)
    assert cases["drop_in_resumed"] == {"horizon": True, "config": None, "step": 4}
    assert cases["drop_in_local"] == {"error": None, "warnings": [], "shared": False, "horizon": False}
    assert "needs the gradients all-reduced" in cases["drop_in_horizon_local"]["error"]
    # Auto-LR without a probe is said once, at construction (with a probe the drop-in did not raise a correct LR).
    counts = {name: n for name, n in cases.items() if name.endswith("_no_probe_warnings")}
    assert len(counts) == 4 and set(counts.values()) == {1}
    # The 2-replica line search's "needs the horizon" warning comes only where the horizon stays off.
    assert cases["probe_shared"] == {"at_construction": 0, "after_first_step": 0, "horizon": True}
    assert cases["probe_local"] == {"at_construction": 0, "after_first_step": 1, "horizon": False}
