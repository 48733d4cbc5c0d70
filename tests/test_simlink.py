"""scripts/simlink.py: the link model of the simulated interconnect (pure arithmetic, no processes), and the
benchmark's link queue that applies it."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import simlink  # noqa: E402
from simlink import (  # noqa: E402
    Link,
    break_even_bandwidth,
    fit_link,
    fit_overlap,
    max_compute_for_ratio,
    ring_allreduce_seconds,
    ring_factor,
    step_times,
)


def test_ring_factor_is_two_n_minus_one_over_n():
    assert [ring_factor(n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]


def test_ring_allreduce_time_is_latency_hops_plus_ring_bytes_over_bandwidth():
    # 8 Gb/s = 1 GB/s; 2 ranks send 1x the buffer: 1 GB takes 1 s, plus 2 hops of 10 us.
    assert ring_allreduce_seconds(1e9, 2, Link(8.0, 10.0)) == pytest.approx(1.0 + 2 * 10e-6)
    # 4 ranks: 1.5x the buffer in 6 hops.
    assert ring_allreduce_seconds(1e9, 4, Link(8.0, 10.0)) == pytest.approx(1.5 + 6 * 10e-6)
    # Ten times the bandwidth, a tenth of the transfer time.
    assert ring_allreduce_seconds(1e9, 2, Link(80.0)) == pytest.approx(0.1)
    assert ring_allreduce_seconds(1e9, 1, Link(8.0, 10.0)) == 0.0


@pytest.mark.parametrize("world", [2, 4, 8])
def test_fit_link_recovers_the_link_that_produced_the_times(world):
    truth = Link(gbps=13.7, latency_us=42.0)
    sizes = [2**k for k in range(12, 28, 3)]
    fitted = fit_link(sizes, [ring_allreduce_seconds(b, world, truth) for b in sizes], world)
    assert fitted.gbps == pytest.approx(truth.gbps, rel=1e-9)
    assert fitted.latency_us == pytest.approx(truth.latency_us, rel=1e-6)


def test_fit_link_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError, match="two different sizes"):
        fit_link([100, 100], [1.0, 1.1], 2)
    with pytest.raises(ValueError, match="do not grow"):
        fit_link([100, 200], [1.0, 0.5], 2)
    with pytest.raises(ValueError, match="world >= 2"):
        fit_link([100, 200], [1.0, 2.0], 1)


def test_link_validates_its_numbers():
    with pytest.raises(ValueError, match="bandwidth"):
        Link(0.0)
    with pytest.raises(ValueError, match="latency"):
        Link(1.0, -1.0)


def test_step_times_add_exposed_communication_to_ddp_and_amortized_converges_to_local():
    link = Link(8.0)  # 1 GB/s
    ddp, local = step_times(2.0, 1e9, 2, link, sync_interval=10)
    assert ddp == pytest.approx(3.0) and local == pytest.approx(2.1)
    # Communication hidden under the backward pass is not paid; more overlap than communication costs nothing.
    assert step_times(2.0, 1e9, 2, link, 10, overlap_s=0.4)[0] == pytest.approx(2.6)
    assert step_times(2.0, 1e9, 2, link, 10, overlap_s=5.0)[0] == pytest.approx(2.0)


def test_fit_overlap_is_what_the_exposed_rows_hid():
    comm = [1.0, 0.5, 0.1]
    exposed = [max(0.0, c - 0.3) for c in comm]  # 0.3 s hidden
    assert fit_overlap(2.0, exposed, comm) == pytest.approx(0.3)
    assert fit_overlap(2.0, [0.0, 0.0], [0.1, 0.2]) == 0.0  # nothing exposed: the pessimistic bound


@pytest.mark.parametrize("ratio", [1.1, 2.0])
@pytest.mark.parametrize("overlap", [0.0, 0.2])
def test_break_even_bandwidth_is_where_the_ratio_crosses(ratio, overlap):
    compute, nbytes, world, t = 0.8, 86.4e6, 2, 10
    gbps = break_even_bandwidth(ratio, compute, nbytes, world, t, latency_us=10.0, overlap_s=overlap)
    assert gbps is not None

    def predicted(g):
        ddp, local = step_times(compute, nbytes, world, Link(g, 10.0), t, overlap_s=overlap)
        return ddp / local

    assert predicted(gbps) == pytest.approx(ratio, rel=1e-6)
    assert predicted(gbps * 0.5) > ratio > predicted(gbps * 2)


def test_break_even_bandwidth_says_when_a_ratio_is_out_of_reach():
    # With T = 1 the converge costs what DDP's all-reduce costs: HDET local can never be 2x faster.
    assert break_even_bandwidth(2.0, 0.8, 86.4e6, 2, 1) is None
    with pytest.raises(ValueError, match="above 1"):
        break_even_bandwidth(1.0, 0.8, 86.4e6, 2, 10)


def test_max_compute_for_ratio_gives_exactly_that_ratio():
    link, nbytes, t = Link(100.0, 10.0), 4e9, 10
    compute = max_compute_for_ratio(2.0, nbytes, 2, link, t)
    ddp, local = step_times(compute, nbytes, 2, link, t)
    assert ddp / local == pytest.approx(2.0)
    assert (
        max_compute_for_ratio(2.0, nbytes, 2, link, sync_interval=2) is None
    )  # T = 2: at most 2x, never above


def test_module_has_no_torch_dependency():
    assert "torch" not in simlink.__dict__
    source = Path(simlink.__file__).read_text()
    assert "import torch" not in source


def test_simulated_link_queues_transfers_one_after_another():
    """The benchmark's link carries one transfer at a time: a second bucket ready while the first is on the
    wire starts when the first ends; one ready after the link went idle starts at once."""
    benchmark_speed = pytest.importorskip("benchmark_speed")
    sim = benchmark_speed.SimulatedLink(world=2)
    sim.link = Link(8.0)  # 1 GB/s, no latency
    first = sim._finish_at(ready=100.0, nbytes=10**8)  # 0.1 s on the wire
    second = sim._finish_at(ready=100.05, nbytes=10**8)
    third = sim._finish_at(ready=101.0, nbytes=10**8)
    assert first == pytest.approx(100.1)
    assert second == pytest.approx(100.2)  # queued behind the first
    assert third == pytest.approx(101.1)  # link idle again
    assert sim.transfers == 3 and sim.modelled_s == pytest.approx(0.3)
    assert math.isclose(sim.modelled_s, 3 * ring_allreduce_seconds(10**8, 2, sim.link))
