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


class FakeClock:
    """A clock that only moves when told to (or when slept on): the link thread's scheduling without timing."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += min(seconds, 0.25)  # wakes early on long waits: the link must sleep again


def _sim_with_fake_clock(start: float = 100.0):
    benchmark_speed = pytest.importorskip("benchmark_speed")
    clock = FakeClock(start)
    return benchmark_speed, benchmark_speed.SimulatedLink(world=2, clock=clock, sleep=clock.sleep), clock


def test_link_thread_delivers_each_bucket_when_the_modelled_link_has_carried_it():
    """A bucket starts on the link when its real part is through (less that part's own modelled time) or when
    the link is free, whichever is later; its future completes at the modelled end, not before."""
    torch = pytest.importorskip("torch")
    benchmark_speed, sim, clock = _sim_with_fake_clock()
    link = Link(8e-3)  # 1 MB/s, no latency
    buffer = torch.zeros(100_000)  # 400 kB: 0.4 s on the wire
    wire, tail = 0.4, benchmark_speed.SYNC_TAIL * 4 / 1e6  # the real part's own bytes: 16 ms of the 0.4 s

    def real_part_takes(seconds):
        def ready():
            clock.now += seconds

        return ready

    first = torch.futures.Future()
    sim._deliver(link, 100.0, real_part_takes(0.020), buffer, first)
    assert first.done() and first.wait() is buffer
    # The real part's 20 ms are counted once: its own bytes' 16 ms are inside the modelled 0.4 s.
    assert clock.now == pytest.approx(100.020 - tail + wire)
    assert clock.slept[0] == pytest.approx(wire - tail) and len(clock.slept) > 1  # woke early, slept again

    # Issued while the first was on the wire, its real part long through: queued behind the first.
    second = torch.futures.Future()
    sim._deliver(link, 100.1, real_part_takes(0.0), buffer, second)
    assert clock.now == pytest.approx(100.020 - tail + 2 * wire)

    # Issued after the link went idle: starts when its real part is through, never before it was issued.
    clock.now = 102.0
    third = torch.futures.Future()
    sim._deliver(link, 102.0, real_part_takes(0.001), buffer, third)
    assert clock.now == pytest.approx(102.0 + wire)
    assert sim.transfers == 3 and sim.modelled_s == pytest.approx(3 * wire)


def test_link_thread_surfaces_a_failed_real_part_to_ddp():
    torch = pytest.importorskip("torch")
    _, sim, clock = _sim_with_fake_clock()

    def failed():
        raise RuntimeError("peer went away")

    out = torch.futures.Future()
    sim._deliver(Link(1.0), clock.now, failed, torch.zeros(10_000), out)
    with pytest.raises(RuntimeError, match="peer went away"):
        out.wait()
    assert sim.transfers == 0 and clock.slept == []


def test_link_thread_completes_buckets_first_in_first_out_and_stops_on_close():
    torch = pytest.importorskip("torch")
    _, sim, clock = _sim_with_fake_clock()
    link = Link(8e-3)
    done: list[int] = []
    futures = []
    for i in range(4):
        out = torch.futures.Future()
        out.add_done_callback(lambda _f, i=i: done.append(i))
        sim._submit(link, clock.now, lambda: None, torch.zeros(10_000 * (4 - i)), out)  # large to small
        futures.append(out)
    sim.close()
    assert sim._thread is None and all(f.done() for f in futures)
    assert done == [0, 1, 2, 3]  # a small bucket never overtakes a large one queued before it (one wire)
    assert sim.transfers == 4


def test_simulated_converge_waits_the_modelled_time_and_scales_the_unsent_part(monkeypatch):
    """HDET's converge (a blocking all-reduce): the tail is reduced for real, the rest is multiplied by the world
    size as if every replica held the same values, and the call returns when the modelled link has delivered."""
    torch = pytest.importorskip("torch")
    benchmark_speed, sim, clock = _sim_with_fake_clock()
    dist = benchmark_speed.dist
    reduced = []

    def real_all_reduce(tensor, op=None, group=None, async_op=False):
        reduced.append(tensor.numel())
        tensor.mul_(2)  # the other rank holds the same values
        clock.now += 0.005

    monkeypatch.setattr(dist, "all_reduce", real_all_reduce)
    sim.link = Link(8e-3)
    buffer = torch.ones(100_000)
    with sim.patched_all_reduce():
        dist.all_reduce(buffer)
    assert dist.all_reduce is real_all_reduce  # restored
    assert reduced == [benchmark_speed.SYNC_TAIL]
    assert torch.equal(buffer, torch.full((100_000,), 2.0))
    assert clock.now == pytest.approx(100.0 + 0.4)  # the real 5 ms were part of the modelled 0.4 s
    assert sim.transfers == 1
