"""Engine, drop-in scheduler and Accelerate API under real gloo processes.

The converge and controller tests also run on NCCL, one GPU per process (``pytest --dist-backend nccl``, as
``scripts/gpu_check.sh`` runs them); the others are gloo-only and skip there."""

import math

import numpy as np
import pytest
import torch
from distributed import gloo_only, load_ranks, skip_unless_backend_fits, test_backend, torchrun

from hdet_hf.engine import STATE_VERSION

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nproc", [2, 4])
def test_converge_is_the_exact_mean_on_every_rank(tmp_path, nproc):
    skip_unless_backend_fits(nproc)
    torchrun("engine_worker.py", nproc, ["average", str(tmp_path)])
    ranks = load_ranks(tmp_path, nproc)
    assert ranks[0]["device"].startswith("cuda" if test_backend() == "nccl" else "cpu")
    expected = sum(range(nproc)) / nproc
    for r in ranks:
        for p in r["rank_valued"]:
            assert torch.equal(p, torch.full_like(p, expected)), "average of rank numbers is not exact"
        # The same collective gathered every rank's loss (10 + rank) and multiplier.
        assert r["report"]["losses"] == [10.0 + k for k in range(nproc)]
        assert sorted(r["report"]["multipliers"]["lr"]) == pytest.approx(
            [0.5 + k / (nproc - 1) for k in range(nproc)]
        )
    # Random values: bit-identical everywhere, and the mean up to float32 rounding.
    for i in range(len(ranks[0]["after"])):
        for r in ranks[1:]:
            assert torch.equal(r["after"][i], ranks[0]["after"][i])
        mean = torch.stack([r["before"][i].double() for r in ranks]).mean(0)
        assert torch.allclose(ranks[0]["after"][i].double(), mean, atol=1e-6)
    # Persistent float buffers (BatchNorm running stats) are averaged too; integer counters are left alone.
    buf_mean = torch.stack([r["running_mean_before"] for r in ranks]).mean(0)
    assert torch.equal(ranks[0]["running_mean_after"], buf_mean)
    assert buf_mean[0].item() == expected + 0.25


def test_controller_moves_base_lr_toward_better_ranks(tmp_path):
    skip_unless_backend_fits(2)
    torchrun("engine_worker.py", 2, ["controller", str(tmp_path)])
    ranks = load_ranks(tmp_path, 2)
    assert ranks[0]["device"].startswith("cuda" if test_backend() == "nccl" else "cpu")
    for update in ("multiplicative", "additive"):
        up = ranks[0][f"up_{update}"]["scales"]
        down = ranks[0][f"down_{update}"]["scales"]
        assert up[-1] > 1.5 and down[-1] < 0.7, (update, up, down)
        assert all(s > 0 for s in down)
        # Both ranks computed the same controller state and drew the same permutations.
        assert ranks[1][f"up_{update}"] == ranks[0][f"up_{update}"]
    perms = [tuple(p) for p in ranks[0]["up_multiplicative"]["permutations"]]
    assert len(set(perms)) == 2  # multipliers really get reassigned between intervals


def test_no_net_cut_after_the_schedules_peak(tmp_path):
    """--hdet_controller_floor_after_peak: every converge asks for a lower LR. Until the schedule decays and
    the early phase is over the factor falls as without the option; from the first converge where both hold
    it keeps the factor it had there, also across a resume, on both ranks alike."""
    skip_unless_backend_fits(2)
    torchrun("engine_worker.py", 2, ["peak_floor", str(tmp_path)])
    ranks = load_ranks(tmp_path, 2)
    assert ranks[1] == ranks[0]
    runs = ranks[0]
    # Without the floor: a cut at every converge (down to the 10x bound).
    for off in (runs["off"], runs["early_off"]):
        assert off["scales"] == sorted(off["scales"], reverse=True) and off["scales"][-1] == pytest.approx(
            0.1
        )
    # Peak at step 8, early phase to step 6: the first floored converge is step 10. Peak at step 2, early
    # phase to step 10 (half the run): the first floored converge is step 10 too.
    for off, on in ((runs["off"], runs["on"]), (runs["early_off"], runs["early_on"])):
        first = on["steps"].index(10)
        assert on["scales"][:first] == off["scales"][:first]
        floor = off["scales"][first - 1]  # the factor before step 10's move
        assert on["floors"] == {"lr": floor}
        assert on["scales"][first:] == [floor] * (len(on["scales"]) - first)
        assert off["scales"][-1] < floor
    assert runs["resumed"] == runs["on"]


def _parabola_optimum(multipliers: list[float], losses: list[float]) -> float:
    """The line search's optimum, computed here with numpy (the library fits with torch)."""
    c2, c1, _ = np.polyfit(multipliers, losses, 2)
    return -c1 / (2 * c2)


def test_line_search_sizes_a_raise_far_below_the_right_lr(tmp_path):
    """--hdet_controller_line_search_threshold on 3 processes: while the probe's line search puts the best step
    at >= 4x the current one at this converge and the last, a raise is at least min(m*/4, max_raise), up to the
    controller's bound; the first such converge and a near optimum change nothing; a resume continues it."""
    skip_unless_backend_fits(3)
    torchrun("engine_worker.py", 3, ["line_search", str(tmp_path)])
    ranks = load_ranks(tmp_path, 3)
    assert ranks[1] == ranks[0] and ranks[2] == ranks[0]
    runs = ranks[0]
    off, on = runs["off"]["converges"], runs["on"]["converges"]
    # The first converge only records its optimum; with nothing to compare yet, the same move as without.
    assert on[0]["scale"] == off[0]["scale"]
    boosted = 0
    for previous, current in zip(on, on[1:]):
        optima = [_parabola_optimum(c["multipliers"], c["probe_losses"]) for c in (previous, current)]
        if min(optima) >= 4.0 and current["delta"] > 0:
            expected = min(previous["scale"] * min(optima[1] / 4.0, 2.0), 10.0)
            assert current["scale"] >= expected * (1 - 1e-9)
            boosted += 1
    assert boosted >= 2 and on[-1]["scale"] == pytest.approx(10.0)
    # Without it the climb is slower at every converge after the first.
    assert all(a["scale"] > b["scale"] for a, b in zip(on[1:4], off[1:4]))
    # Near the optimum the line search never reaches 4: nothing changes, bit for bit.
    assert runs["near_on"]["converges"] == runs["near_off"]["converges"]
    assert runs["resumed"] == runs["on"]
    # With the train loss voting "lower" against the probe's "higher", every gated delta is 0. Off: the LR holds.
    # --hdet_controller_line_search_breaks_ties: from the second straight line on, it rises by min(m*/4, 2).
    tied_off, tied_on = runs["ties_off"]["converges"], runs["ties_on"]["converges"]
    assert all(c["delta"] == 0.0 for c in tied_off) and {c["scale"] for c in tied_off} == {1.0}
    assert tied_on[0]["scale"] == 1.0
    raised = 0
    for previous, current in zip(tied_on, tied_on[1:]):
        assert current["delta"] == 0.0
        optima = [_parabola_optimum(c["multipliers"], c["probe_losses"]) for c in (previous, current)]
        if min(optima) >= 4.0:
            expected = min(previous["scale"] * min(optima[1] / 4.0, 2.0), 10.0)
            assert current["scale"] == pytest.approx(expected, rel=1e-9)
            raised += 1
        else:
            assert current["scale"] == previous["scale"]
    assert raised >= 2 and tied_on[-1]["scale"] > 2.0
    # --hdet_controller_line_search_max_raise bounds each such raise: at 4 a straight line climbs 4x per converge
    # where the bound of 2 took 2x (m* is far above 16 here), so it reaches the controller's bound sooner.
    bound4 = runs["ties_on_bound4"]["converges"]
    factors = {2.0: [], 4.0: []}
    for bound, run in ((2.0, tied_on), (4.0, bound4)):
        for previous, current in zip(run, run[1:]):
            optima = [_parabola_optimum(c["multipliers"], c["probe_losses"]) for c in (previous, current)]
            if min(optima) >= 4.0 and current["scale"] < 10.0:
                expected = min(previous["scale"] * min(optima[1] / 4.0, bound), 10.0)
                assert current["scale"] == pytest.approx(expected, rel=1e-9)
                factors[bound].append(current["scale"] / previous["scale"])
    assert (
        factors[4.0] and max(factors[4.0]) == pytest.approx(4.0) and max(factors[2.0]) == pytest.approx(2.0)
    )
    first_at_bound = [
        next(c["step"] for c in run if c["scale"] == pytest.approx(10.0)) for run in (bound4, tied_on)
    ]
    assert first_at_bound[0] < first_at_bound[1]
    # A near optimum breaks no tie: bit for bit the same run.
    assert runs["ties_near_on"]["converges"] == runs["ties_near_off"]["converges"]


def test_two_replicas_rebuild_the_lines_centre_for_the_line_search(tmp_path):
    """`centre_point` on 2 processes: at every converge that probes it, the centre each replica rebuilds from its
    own weights (after step-size and after offset intervals) is the mean of the two replicas' weights (their
    interval means, with the averaged probe), and the line search fits (m_r, probe) plus (1, centre): the optimum
    of the parabola through the three points. From far below it climbs faster than with the line search off; a
    forced converge inside an interval leaves that interval without a centre; a resume continues bit for bit."""
    skip_unless_backend_fits(2)
    torchrun("engine_worker.py", 2, ["centre_point", str(tmp_path)])
    ranks = load_ranks(tmp_path, 2)
    for name in ("on", "off", "forced", "resumed", "averaged", "other_spread", "near"):
        assert ranks[1][name]["converges"] == ranks[0][name]["converges"], name
    for name, own in (("on", "own"), ("averaged", "own_mean")):
        by_rank = [{c["step"]: c for c in ranks[r][name]["centres"]} for r in range(2)]
        assert by_rank[0].keys() == by_rank[1].keys()
        assert {c["kind"] for c in by_rank[0].values()} == {"step_size", "horizon"}
        for step, mine in by_rank[0].items():
            other = by_rank[1][step]
            mean = (mine[own] + other[own]) / 2
            assert mine["centre"] == pytest.approx(mean, rel=1e-5) and other["centre"] == pytest.approx(
                mean, rel=1e-5
            )
    on, off = ranks[0]["on"]["converges"], ranks[0]["off"]["converges"]
    fitted = 0
    for converge in on:
        if converge["optimum"] is None:
            continue
        step = converge["step"]
        (kind,) = {c["kind"] for r in range(2) for c in ranks[r]["on"]["centres"] if c["step"] == step}
        m = np.array(converge["multipliers"])
        m = 1 + converge["fan_out"] * (m - 1) if kind == "step_size" else m
        # The centre's probe, recomputed from the rebuilt centres: (w - 2)**2, sent in float32 as the gathered
        # table is (the parameters' dtype), averaged over the two replicas.
        centres = [c["centre"] for r in range(2) for c in ranks[r]["on"]["centres"] if c["step"] == step]
        centre = np.mean([float(np.float32((w - 2.0) ** 2)) for w in centres])
        expected = _parabola_optimum([*m, 1.0], [*converge["probe_losses"], centre])
        assert converge["optimum"] == pytest.approx(expected, rel=1e-4)
        fitted += 1
    assert fitted >= len(on) - 3  # all but the first (no anchor) and the ones before Z holds an update
    assert all(c["optimum"] is None for c in off)
    # `until_bend`: the first optimum below the threshold (4) ends the line search, and it stays ended.
    assert not any(c["bent"] for c in on)  # this line never bends
    near = ranks[0]["near"]["converges"]
    bends = [c["optimum"] is not None and c["optimum"] < 4.0 for c in near]
    assert any(bends) and [c["bent"] for c in near] == [any(bends[: i + 1]) for i in range(len(near))]
    first_at_bound = [next(c["step"] for c in run if c["scale"] == pytest.approx(10.0)) for run in (on, off)]
    assert first_at_bound[0] < first_at_bound[1]
    # A forced converge at step 5, inside the interval of steps 5-6: no centre there, a fit again from the next on.
    forced = {c["step"]: c for c in ranks[0]["forced"]["converges"]}
    assert forced[6]["optimum"] is None and on[2]["step"] == 6 and on[2]["optimum"] is not None
    assert forced[8]["optimum"] is not None
    assert 6 not in {c["step"] for c in ranks[0]["forced"]["centres"]}
    assert ranks[0]["resumed"]["converges"] == on
    # Another spread hyperparameter moves the replicas off the line: no centre, no fit with two replicas.
    assert ranks[0]["other_spread"]["centres"] == [] and ranks[1]["other_spread"]["centres"] == []
    assert all(c["optimum"] is None for c in ranks[0]["other_spread"]["converges"])


def test_two_replicas_size_the_train_loss_vote_by_its_noise(tmp_path):
    """`noise_floor` on 2 processes: each converge's noise is the square root of the two replicas' mean window
    variance, computed here from the step losses they fed in (successive differences, ragged items); the weights
    are the softmax of ``(mean - loss) / max(spread, noise)``. A gap within the noise votes near-uniformly, a
    large gap full-size (0.881 / 0.119, as every vote does with the floor off; a gap of noise alone can still reach
    twice the noise); gradient accumulation leaves the
    estimate unchanged, and a resume inside an interval continues bit for bit."""
    skip_unless_backend_fits(2)
    torchrun("engine_worker.py", 2, ["noise_floor", str(tmp_path)])
    ranks = load_ranks(tmp_path, 2)
    for name in (
        "small",
        "large",
        "off",
        "accumulated",
        "resumed",
        "abstain",
        "abstain_large",
        "large_full_cuts",
    ):
        assert ranks[1][name]["converges"] == ranks[0][name]["converges"], name

    def expected_noise(run: str, step: int) -> float:
        variances = []
        for r in range(2):
            window = [f for f in ranks[r][run]["fed"] if step - 5 < f["step"] <= step]
            x, w = np.array([f["loss"] for f in window]), np.array([f["items"] for f in window], dtype=float)
            per_step = np.mean(np.diff(x) ** 2) / 2
            variances.append(per_step * np.sum(w**2) / np.sum(w) ** 2)
        return math.sqrt(np.mean(variances))

    for run in ("small", "large", "accumulated"):
        converges = ranks[0][run]["converges"]
        assert len(converges) == 4
        for c in converges:
            noise = expected_noise(run, c["step"])
            # The gathered table travels in the parameters' dtype (float32).
            assert c["loss_noise"] == pytest.approx(noise, rel=1e-6)
            losses = np.array(c["losses"])
            sigma = max(np.std(losses), c["loss_noise"])
            logits = (losses.mean() - losses) / sigma
            assert c["weights"] == pytest.approx(list(np.exp(logits) / np.exp(logits).sum()), rel=1e-9)
    small, large = ranks[0]["small"]["converges"], ranks[0]["large"]["converges"]
    # Within the noise (|gap| < 2 x noise) the vote shrinks with the gap; beyond it, it is full-size.
    assert all(max(c["weights"]) <= 0.8808 + 1e-4 for c in small)
    assert sum(max(c["weights"]) < 0.75 for c in small) >= 2
    assert all(max(c["weights"]) == pytest.approx(0.8808, abs=1e-4) for c in large)
    off = ranks[0]["off"]["converges"]
    assert all(c["loss_noise"] is None and max(c["weights"]) == pytest.approx(0.8808, abs=1e-4) for c in off)
    assert abs(off[-1]["scale"] - 1.0) > abs(small[-1]["scale"] - 1.0)  # full-size noise votes move further
    accumulated = ranks[0]["accumulated"]["converges"]
    for a, b in zip(small, accumulated):
        assert b["loss_noise"] == pytest.approx(a["loss_noise"], rel=1e-6)
    assert ranks[0]["resumed"]["converges"] == small
    # --hdet_controller_abstain_within_noise: the same weights (the same fed losses), but a gap within the noise
    # (spread below it) is no vote: delta 0 there, the shrunk vote's delta elsewhere; a large gap votes as before.
    abstain = ranks[0]["abstain"]["converges"]
    within = [np.std(c["losses"]) < c["loss_noise"] for c in small]
    assert any(within) and not all(within)
    previous = None
    for quiet, a, b in zip(within, small, abstain):
        assert b["weights"] == a["weights"] and b["loss_noise"] == a["loss_noise"]
        vote = 0.0 if quiet else a["delta"]
        # Until 30 % of the run (step 6) the move is the lower of this vote and the previous one
        # (`horizon.PairedVotes`): the interval ending at step 10 started at step 5.
        assert b["delta"] == (min(vote, previous) if b["step"] == 10 else vote)
        previous = b["delta"]
    assert [c["delta"] for c in ranks[0]["abstain_large"]["converges"]] == [c["delta"] for c in large]
    # --hdet_controller_two_replica_cut_gain (0.5 by default at 2 replicas): the same votes, and a large gap that
    # asks for a cut at every converge (the loss rises with the multiplier) moves the LR half as far in log space.
    full = ranks[0]["large_full_cuts"]["converges"]
    assert [c["delta"] for c in full] == [c["delta"] for c in large] and all(c["delta"] < 0 for c in large)
    for half, whole in zip(large, full):
        assert math.log(whole["scale"]) < 0
        assert math.log(half["scale"]) == pytest.approx(0.5 * math.log(whole["scale"]), rel=1e-12)


def test_onecycleautolr_spreads_and_averages_across_processes(tmp_path):
    gloo_only()
    torchrun("engine_worker.py", 2, ["onecycle", str(tmp_path)])
    r0, r1 = load_ranks(tmp_path, 2)
    # Spread from the very first step: rank LRs differ by 1.5/0.5 = 3x, mean = OneCycle's value.
    reference = torch.optim.lr_scheduler.OneCycleLR(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9),
        max_lr=0.1,
        total_steps=12,
    )
    first = reference.get_last_lr()[0]
    assert max(r0["lrs"][0], r1["lrs"][0]) / min(r0["lrs"][0], r1["lrs"][0]) == pytest.approx(3.0)
    assert (r0["lrs"][0] + r1["lrs"][0]) / 2 == pytest.approx(first)
    # Averaged at steps 4, 8 and 12 (not only with auto-LR), bit-identical; different in between.
    for step in (4, 8, 12):
        assert torch.equal(r0["params"][step - 1], r1["params"][step - 1])
    assert not torch.equal(r0["params"][1], r1["params"][1])
    assert [t["step"] for t in r0["trajectory"]] == [4, 8, 12]
    assert r0["state"]["hdet"]["version"] == STATE_VERSION


@pytest.mark.parametrize("gradient_sync", ["local", "shared"])
def test_accelerate_api_counts_optimizer_steps_and_converges(tmp_path, gradient_sync):
    gloo_only()
    torchrun("engine_worker.py", 2, ["accelerate", str(tmp_path), gradient_sync])
    r0, r1 = load_ranks(tmp_path, 2)
    assert r0["steps"] == 6  # 12 micro-batches, accumulation 2
    # local: no DDP wrapper (no gradient all-reduce); shared: DDP all-reduces gradients every step.
    assert r0["is_ddp"] == (gradient_sync == "shared")
    assert sorted(r0["after_sync"]) == [3, 6]
    for step in (3, 6):
        assert torch.equal(r0["after_sync"][step], r1["after_sync"][step])
    for k in range(6):
        base = r0["schedule"][k][0]
        assert base == pytest.approx(1e-2 / (1 + 0.1 * k))
        assert r0["lrs"][k] == pytest.approx(base * r0["multipliers"][k])
        assert r0["multipliers"][k] + r1["multipliers"][k] == pytest.approx(2.0)
        assert r0["multipliers"][k] != 1.0  # explore_until 1: spread at every step
    assert math.isclose(r0["schedule"][0][0], r1["schedule"][0][0])


@pytest.mark.parametrize("signal", ["averaged_probe", "train_and_averaged_probe"])
def test_averaged_probe_scores_the_interval_mean_and_exploration_ends(tmp_path, signal):
    gloo_only()
    torchrun("engine_worker.py", 2, ["exploration", str(tmp_path), signal])
    ranks = load_ranks(tmp_path, 2)
    for r in ranks:
        # explore_until 0.5 of 12 steps: spread through step 6, then every rank runs the base LR.
        assert sorted({round(m, 6) for m in r["multipliers"][:6]}) <= [0.5, 1.5]
        assert all(m != 1.0 for m in r["multipliers"][:6])
        assert r["multipliers"][6:] == [1.0] * 6
        # The controller moved at steps 3 and 6 and never after; the scale it reached stays.
        assert [(step, on) for step, on, _ in r["active"]] == [(3, True), (6, True), (9, False), (12, False)]
        assert r["active"][1][2] == r["active"][2][2] == r["active"][3][2]
        assert r["lrs"][6:] == [pytest.approx(r["lrs"][6])] * 6
        # Probed at steps 3 and 6, each time on the mean of this replica's iterates since the last converge.
        assert len(r["seen"]) == 2
        for probe, window in zip(r["seen"], (range(0, 3), range(3, 6))):
            expected = torch.stack([r["iterates"][k] for k in window]).mean(0)
            assert torch.allclose(probe, expected, atol=1e-6)
            assert not torch.equal(probe, r["iterates"][window[-1]])
    for entry in ranks[0]["trajectory"][:2]:
        assert len(entry["probe_losses"]) == 2 and entry["probe_losses"][0] != entry["probe_losses"][1]
    # Identical on every rank after the last converge, and the probe left the trained weights in place.
    assert torch.equal(ranks[0]["final"], ranks[1]["final"])


def test_the_default_ends_exploration_halfway(tmp_path):
    """HDETConfig's default explore_until (0.5) on 12 steps, T 3: spread and controller through step 6, then
    every rank runs the base schedule at the scale the controller reached."""
    gloo_only()
    torchrun("engine_worker.py", 2, ["exploration", str(tmp_path), "train_and_averaged_probe", "default"])
    r0, r1 = load_ranks(tmp_path, 2)
    assert r0["explore_until"] == 0.5
    for r in (r0, r1):
        assert all(m != 1.0 for m in r["multipliers"][:6])
        assert r["multipliers"][6:] == [1.0] * 6
        assert r["lrs"][6:] == [pytest.approx(r["lrs"][6])] * 6
    for k in range(6):
        assert r0["multipliers"][k] + r1["multipliers"][k] == pytest.approx(2.0)
    assert r0["lrs"][6:] == r1["lrs"][6:]
    trajectory = r0["trajectory"]
    active = [(t["step"], t["controller_active"]) for t in trajectory]
    assert active == [(3, True), (6, True), (9, False), (12, False)]
    assert trajectory[1]["scale"] == trajectory[2]["scale"] == trajectory[3]["scale"]
    assert [len(t["probe_losses"]) for t in trajectory] == [2, 2, 0, 0]


@pytest.mark.parametrize("nproc", [3])  # 3: an interior rank too (2 was the same code path)
def test_fitness_weighted_converge_pulls_the_average_toward_better_replicas(tmp_path, nproc):
    skip_unless_backend_fits(nproc)
    torchrun("engine_worker.py", nproc, ["fitness", str(tmp_path)])
    ranks = load_ranks(tmp_path, nproc)
    # Rank r holds r and reports loss 1 + r. Reference from the previous converge: mean and std of the losses.
    losses = torch.tensor([1.0 + r for r in range(nproc)], dtype=torch.float64)
    centre, scale = float(losses.mean()), float(losses.std(unbiased=False))
    z = ((losses - centre) / scale).clamp(-3, 3)
    weights = torch.exp(-z)
    weighted = float((weights * torch.arange(nproc, dtype=torch.float64)).sum() / weights.sum())
    for r in ranks:
        first, second, third = r["averages"]
        for p in first:  # no reference yet: the plain mean, exactly
            assert torch.equal(p, torch.full_like(p, sum(range(nproc)) / nproc))
        for p in second + third:
            assert torch.allclose(p.double(), torch.full_like(p.double(), weighted), atol=1e-6)
            assert float(p.flatten()[0]) < sum(range(nproc)) / nproc  # toward rank 0, the lowest loss
        assert r["reference"] == [[centre, scale]]
    for i, p in enumerate(ranks[0]["averages"][1]):  # bit-identical on every rank
        assert all(torch.equal(p, r["averages"][1][i]) for r in ranks[1:])


def test_lower_of_both_alternates_fan_out_and_offsets_and_moves_by_the_lower_vote(tmp_path):
    """Before the horizon's start (early_comparison="lower_of_both") intervals alternate: the fan-out (rank r
    steps at m_r x the base LR, no offsets), then the offsets (every rank at the base LR, rank r at anchor +
    (1 - decay)(m_r - 1) Z); the controller moves by min(this interval's hypergradient, the other kind's
    latest), and by at most 0 before the other kind has voted."""
    gloo_only()
    torchrun("engine_worker.py", 3, ["horizon_paired", str(tmp_path)])
    ranks = load_ranks(tmp_path, 3)
    decay = ranks[0]["decay"]
    records = [r["records"] for r in ranks]
    assert [x["step"] for x in records[0]] == [2, 4, 6, 8]
    for r in ranks:
        for step, (lr, base, m) in enumerate(r["lrs"], start=1):
            fan_out = step in (1, 2, 5, 6)
            assert lr == pytest.approx(base * m if fan_out else base, rel=1e-12), (step, lr, base, m)
    assert len({r["lrs"][0][0] for r in ranks}) == 3 and len({r["lrs"][2][0] for r in ranks}) == 1
    for i, first in enumerate(records[0]):
        offsets = first["step"] in (2, 6)  # the next interval is one of offsets
        for r in records:
            m = r[i]["next_multiplier"] if offsets else 1.0
            for p, anchor, z in zip(r[i]["params"], first["anchors"], first["directions"]):
                assert torch.equal(p, anchor.clone().add_(z, alpha=(1.0 - decay) * (m - 1.0)))
            assert r[i]["delta"] == first["delta"] and r[i]["votes"] == first["votes"]
    kinds = ["one_interval", "horizon", "one_interval", "horizon"]
    for i, (first, kind) in enumerate(zip(records[0], kinds)):
        other = "horizon" if kind == "one_interval" else "one_interval"
        raw = first["votes"][kind]
        cap = records[0][i - 1]["votes"][other] if i else None
        assert first["delta"] == (min(raw, 0.0) if cap is None else min(raw, cap))
    deltas = [x["votes"][k] for x, k in zip(records[0], kinds)]
    assert any(d != 0 for d in deltas)  # the replicas' losses differ: the votes are real
    assert any(x["delta"] < x["votes"][k] for x, k in zip(records[0], kinds))  # the cap bound at least once


def test_fan_out_scale_narrows_only_the_step_size_intervals(tmp_path):
    """--hdet_lr_fan_out_scale 0.4 (--hdet_lr_spread 0.5) on 3 processes: in a step-size interval rank r steps
    at 1 + 0.4 (m_r - 1) x the base LR, in an offset interval at the base LR; converge reports (the controller's
    vote) keep the lr_spread multipliers, and the line search fits the multipliers actually stepped."""
    skip_unless_backend_fits(3)
    torchrun("engine_worker.py", 3, ["fan_out", str(tmp_path)])
    ranks = load_ranks(tmp_path, 3)
    assert ranks[1]["converges"] == ranks[0]["converges"] and ranks[2]["converges"] == ranks[0]["converges"]
    for r in ranks:
        for step, (lr, base, m) in enumerate(r["lrs"], start=1):
            step_size = (step - 1) // 2 % 2 == 0  # intervals starting at steps 0, 4, 8, 12
            assert lr == pytest.approx(base * (1 + 0.4 * (m - 1)) if step_size else base, rel=1e-12), step
    assert {r["lrs"][0][2] for r in ranks} == {
        0.5,
        1.0,
        1.5,
    }  # the nominal multipliers, as without the option
    converges = ranks[0]["converges"]
    assert [c["step"] for c in converges] == list(range(2, 17, 2))
    fitted = 0
    for c in converges:
        assert sorted(c["multipliers"]) == [0.5, 1.0, 1.5]
        if c["step"] % 4 == 2:  # a step-size interval ended here
            stepped = [1 + 0.4 * (m - 1) for m in c["multipliers"]]
            assert c["optimum"] == pytest.approx(_parabola_optimum(stepped, c["probe_losses"]), rel=1e-9)
            fitted += 1
    assert fitted == 4
    # The offset interval after the first converge starts every replica at the average (Z holds no update
    # yet): no line to fit. The later ones are displaced along Z and fitted.
    assert converges[1]["step"] == 4 and converges[1]["optimum"] is None
    assert all(c["optimum"] is not None for c in converges if c["step"] % 4 == 0 and c["step"] > 4)
    assert any(c["delta"] > 0 for c in converges)  # the target lies ahead: the controller raises


def test_comparison_horizon_offsets_replicas_along_the_discounted_direction(tmp_path):
    """Before ``comparison_horizon_start`` (step 4) rank r steps at m_r x the base LR and a converge leaves
    the plain average; from the regular converge at step 4 on, rank r is at anchor + (1 - decay) (m_r - 1) x
    Z after each regular converge, Z = decay x Z + (average - anchor) is the same on every rank (and was
    accumulated from the first converge), the offsets average out, and every rank steps at the base LR; a
    forced converge leaves the plain average."""
    gloo_only()
    torchrun("engine_worker.py", 3, ["horizon", str(tmp_path)])
    ranks = load_ranks(tmp_path, 3)
    decay = ranks[0]["decay"]
    assert decay == pytest.approx(math.exp(-2 / 4))
    records = [r["records"] for r in ranks]
    # The forced converge at step 4 comes right after a regular one: no step taken, yet the offsets make the
    # replicas differ, so it must average. The last step lands on the grid: no offsets after it.
    assert [(x["step"], x["regular"]) for x in records[0]] == [
        (2, True), (4, True), (4, False), (5, False), (6, True), (8, True)
    ]  # fmt: skip
    previous = None
    offset_seen = False
    for i, first in enumerate(records[0]):
        if not first["regular"]:
            for r in records:  # the plain average, identical everywhere
                for p, q in zip(r[i]["params"], first["params"]):
                    assert torch.equal(p, q)
            continue
        for r in records[1:]:
            for key in ("anchors", "directions"):
                for a, b in zip(r[i][key], first[key]):
                    assert torch.equal(a, b)
        for r in records:
            # No offsets before the horizon's start, nor after the last step (the run ends on the plain average).
            m = r[i]["next_multiplier"] if 4 <= first["step"] < 8 else 1.0
            offset_seen |= m != 1.0
            for p, anchor, z in zip(r[i]["params"], first["anchors"], first["directions"]):
                assert torch.equal(p, anchor.clone().add_(z, alpha=(1.0 - decay) * (m - 1.0)))
        for j, anchor in enumerate(first["anchors"]):
            mean = torch.stack([r[i]["params"][j] for r in records]).double().mean(0)
            assert torch.allclose(mean, anchor.double(), atol=1e-6)
            if previous is not None:
                expected = decay * previous["directions"][j] + (anchor - previous["anchors"][j])
                assert torch.allclose(first["directions"][j], expected, atol=1e-6)
        previous = first
    assert offset_seen
    # Steps 1-4: the step-size fan-out (rank r runs m_r x the base LR). From step 5 no fan-out: every rank runs
    # the base LR (which the controller moves) and the multipliers act as offsets.
    for r in ranks:
        for step, (lr, base, m) in enumerate(r["lrs"], start=1):
            assert lr == pytest.approx(base * m if step <= 4 else base, rel=1e-12), (step, lr, base, m)
    assert len({r["lrs"][0][0] for r in ranks}) == 3 and ranks[0]["lrs"][0][1] == 0.1
    assert all([x[0] for x in r["lrs"][4:]] == [x[0] for x in ranks[0]["lrs"][4:]] for r in ranks)
    for r in records:  # the run ends on the plain average, identical everywhere
        for p, q in zip(r[-1]["params"], records[0][-1]["params"]):
            assert torch.equal(p, q)
    assert any(z.abs().sum() > 0 for z in records[0][-2]["directions"])


@pytest.fixture(scope="module")
def vote_runs(tmp_path_factory):
    """The runs of engine_worker's ``votes`` scenario on 2 processes (one launch for the tests below)."""
    skip_unless_backend_fits(2)
    out = tmp_path_factory.mktemp("votes")
    torchrun("engine_worker.py", 2, ["votes", str(out)])
    return load_ranks(out, 2)


def test_votes_span_several_converges_with_controller_time_scale_vote(vote_runs):
    """--hdet_controller_time_scale vote, T 10 in a 1,000-step run (default interval 30): every 10 steps the
    parameters are averaged (bit-identical on both ranks, the mean of what they held), but the controller votes only
    at steps 30 and 60, on each rank's item-weighted loss over the 30 steps since the last vote; between votes the
    multipliers are held. A higher LR does worse here, so each vote cuts. A resume between a converge and the vote
    continues bit for bit; with offsets along the run's direction the same holds. A blow-up in the vote's last
    10 steps (20x the loss on rank 1) is caught by the divergence guard, which judges those 10 steps, not all 30."""
    ranks = vote_runs
    for name in ("plain", "resumed", "horizon", "blow_up"):
        run = [r[name] for r in ranks]
        assert run[0]["vote_interval"] == 30
        steps = [c["step"] for c in run[0]["converges"]]
        assert steps == [10, 20, 30, 40, 50, 60, 70], name
        for c0, c1 in zip(run[0]["converges"], run[1]["converges"]):
            for a, b, x, y in zip(c0["after"], c1["after"], c0["before"], c1["before"]):
                if name != "horizon":
                    assert torch.equal(a, b), (name, c0["step"])  # averaged at every converge
                if not c0["excluded"]:  # with the horizon, the replicas sit at symmetric offsets from the mean
                    torch.testing.assert_close((a + b) / 2, (x + y) / 2, rtol=0, atol=1e-6)
            assert c0["scale"] == c1["scale"] and c0["multipliers"] == c1["multipliers"]
    # The engine warns once that T 10 is shorter than the default interval, and says how it votes.
    (warning,) = [w for w in ranks[0]["plain"]["warnings"] if "shorter than this 1000-step run" in w]
    assert "default interval (30 steps" in warning and "votes once per 30 steps, on the windows of 3 converges" in warning
    plain = [c for c in ranks[0]["plain"]["converges"]]
    by_step = {c["step"]: c for c in plain}
    # Multipliers held within a vote's interval (10, 20, 30 and 40, 50, 60 share theirs); the controller moves
    # at the votes only, and cuts there (the higher LR's loss is higher).
    assert by_step[10]["multipliers"] == by_step[20]["multipliers"] == by_step[30]["multipliers"]
    assert by_step[40]["multipliers"] == by_step[50]["multipliers"] == by_step[60]["multipliers"]
    assert sorted(by_step[10]["multipliers"]) == [0.5, 1.5]
    assert by_step[10]["scale"] == by_step[20]["scale"] == 1.0
    assert by_step[30]["scale"] < 1.0 and by_step[30]["delta"] < 0
    assert by_step[40]["scale"] == by_step[50]["scale"] == by_step[30]["scale"]
    assert by_step[60]["scale"] < by_step[30]["scale"]
    # The vote compares each rank's item-weighted mean over the 30 steps since the last vote.
    for step in (30, 60):
        for r in range(2):
            fed = [f for f in ranks[r]["plain"]["fed"] if step - 30 < f["step"] <= step]
            mean = sum(f["loss"] * f["items"] for f in fed) / sum(f["items"] for f in fed)
            assert by_step[step]["losses"][r] == pytest.approx(mean, rel=1e-6)  # the table travels in float32
    for a, b in zip(ranks[0]["resumed"]["converges"], plain):
        assert (a["step"], a["losses"], a["scale"], a["multipliers"]) == (b["step"], b["losses"], b["scale"], b["multipliers"])
        assert all(torch.equal(x, y) for x, y in zip(a["after"], b["after"]))
    horizon = {c["step"]: c for c in ranks[0]["horizon"]["converges"]}
    # At the converge between votes (step 20) the replicas go back to offsets along Z, opposite and non-zero (at
    # step 10 Z holds no update yet); the multipliers that set them are the vote interval's, held.
    c0, c1 = ranks[0]["horizon"]["converges"][1], ranks[1]["horizon"]["converges"][1]
    mean = (c0["before"][0] + c1["before"][0]) / 2
    assert c0["step"] == 20 and (c0["after"][0] - mean).abs().min() > 0
    torch.testing.assert_close(c0["after"][0] - mean, mean - c1["after"][0], rtol=0, atol=1e-6)
    assert horizon[10]["multipliers"] == horizon[20]["multipliers"] == horizon[30]["multipliers"]
    assert horizon[20]["scale"] == 1.0 and horizon[30]["scale"] != 1.0
    blow_up = {c["step"]: c for c in ranks[0]["blow_up"]["converges"]}
    assert blow_up[10]["excluded"] == blow_up[20]["excluded"] == []
    assert blow_up[30]["excluded"] == [1]


def test_step_size_fan_out_survives_the_converges_between_votes(vote_runs):
    """--hdet_keep_fan_out_between_votes (default) with T 10 and a vote every 30 steps, shared gradients, step-size
    intervals: the converges at 10, 20 (and 40, 50, 70) exchange the statistics but leave every replica's parameters
    bit for bit where they were, so each replica's displacement since the vote at 30 is its own step size times one
    shared path; the votes at 30 and 60 average. Off, every converge averages and that proportion breaks. A resume
    at step 25 (after a converge that kept the replicas apart) continues bit for bit; a blow-up on rank 1 in steps
    11-20 is still reset to rank 0's weights at step 20; a forced converge (before saving) right after a kept one
    averages."""
    ranks = vote_runs
    kept = [{c["step"]: c for c in r["kept"]["converges"]} for r in ranks]
    assert sorted(kept[0]) == [10, 20, 30, 40, 50, 60, 70]
    assert kept[0][10]["multipliers"] == kept[0][20]["multipliers"] == kept[0][30]["multipliers"]
    for step in (10, 20, 40, 50, 70):
        for r in range(2):
            assert all(torch.equal(a, b) for a, b in zip(kept[r][step]["after"], kept[r][step]["before"])), step
        assert not torch.equal(kept[0][step]["after"][0], kept[1][step]["after"][0])  # apart
    for step in (30, 60):
        for a, b, x, y in zip(kept[0][step]["after"], kept[1][step]["after"], kept[0][step]["before"], kept[1][step]["before"]):
            assert torch.equal(a, b)
            torch.testing.assert_close(a, (x + y) / 2, rtol=0, atol=1e-6)
    assert kept[0][30]["scale"] != 1.0 and kept[0][20]["scale"] == 1.0  # the controller moves at votes only

    def displacement_ratio(run: str) -> torch.Tensor:
        """Rank 0's over rank 1's displacement from the vote at 30 to step 50, per parameter element."""
        by_rank = [{c["step"]: c for c in r[run]["converges"] if "forced" not in c} for r in ranks]
        start = torch.cat([p.flatten() for p in by_rank[0][30]["after"]])
        moved = [torch.cat([p.flatten() for p in b[50]["before"]]) - start for b in by_rank]
        return moved[0] / moved[1]

    # Kept: w_r = w_30 + s_r x D, so every element's ratio is s_0 / s_1 (the stepped multipliers 1 +/- 0.4 x 0.5).
    ratio = displacement_ratio("kept")
    assert sorted([ratio[0].item(), 1 / ratio[0].item()]) == pytest.approx([0.8 / 1.2, 1.2 / 0.8], rel=1e-4)
    torch.testing.assert_close(ratio, ratio[0].expand_as(ratio), rtol=1e-4, atol=0)
    off = displacement_ratio("kept_off")
    assert (off - off[0]).abs().max() > 1e-3  # averaged at 40: the fan-out restarted there
    for r in range(2):
        off_by_step = {c["step"]: c for c in ranks[r]["kept_off"]["converges"]}
        assert torch.equal(off_by_step[20]["after"][0], {c["step"]: c for c in ranks[1 - r]["kept_off"]["converges"]}[20]["after"][0])
        for a, b in zip(ranks[r]["kept_resumed"]["converges"], ranks[r]["kept"]["converges"]):
            assert (a["step"], a["losses"], a["scale"], a["multipliers"]) == (b["step"], b["losses"], b["scale"], b["multipliers"])
            assert all(torch.equal(x, y) for x, y in zip(a["after"], b["after"]))
    blow_up = [{c["step"]: c for c in r["kept_blow_up"]["converges"]} for r in ranks]
    assert blow_up[0][10]["excluded"] == [] and blow_up[0][20]["excluded"] == [1]
    for a, b, x in zip(blow_up[0][20]["after"], blow_up[1][20]["after"], blow_up[0][20]["before"]):
        assert torch.equal(a, b) and torch.equal(a, x)  # the healthy average is rank 0's weights
    forced = [[c for c in r["kept_forced"]["converges"] if "forced" in c] for r in ranks]
    assert forced[0][0]["step"] == 20 and forced[0][0]["forced"]
    for a, b, x, y in zip(forced[0][0]["after"], forced[1][0]["after"], kept[0][20]["after"], kept[1][20]["after"]):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, (x + y) / 2, rtol=0, atol=1e-6)


def test_the_averaged_probe_scores_the_whole_vote_window(vote_runs):
    """With votes every 3rd converge (T 10, a vote every 30 steps) the averaged probe scores each replica at the mean
    of its iterates over the vote's whole window, as at the default interval: across the converges that keep the
    step-size fan-out, after a resume between them (step 25), and across the averages (and fresh offsets) of a
    horizon interval. Before session 35 the mean restarted at every converge, so a vote scored the last 10 steps."""
    for run in ("kept_probed", "kept_probed_resumed", "horizon_probed"):
        for rank in vote_runs:
            seen, iterates = rank[run]["seen"], rank[run]["iterates"]
            assert [s["step"] for s in seen] == [30, 60], run  # probed at votes only
            for probe in seen:
                window = torch.stack(iterates[probe["step"] - 30 : probe["step"]])
                torch.testing.assert_close(probe["weights"], window.mean(0), rtol=0, atol=1e-6)
                last_ten = window[-10:].mean(0)
                assert (probe["weights"] - last_ten).abs().max() > 1e-4, run  # not the converge's 10 steps
    kept, resumed = (vote_runs[0][name]["converges"] for name in ("kept_probed", "kept_probed_resumed"))
    for a, b in zip(resumed, kept):
        assert (a["step"], a["losses"], a["scale"]) == (b["step"], b["losses"], b["scale"])


def test_the_averaged_probe_share_averages_the_last_part_of_the_vote_window(vote_runs):
    """--hdet_averaged_probe_share: at each vote the averaged probe scores each replica at the mean of its last
    round(share x 30) iterates of the 30-step window, not the whole window's: a third with T 10 (the converges at 10
    and 20 keep the fan-out), the same resumed at step 25 (inside that third: the saved partial mean continues, and
    the run matches the uninterrupted one), a third with T 30 (a vote at every converge), and the last 6 steps of a
    horizon interval (converges between votes average and offset again)."""
    for run, last in (("kept_probed_share", 10), ("kept_probed_share_resumed", 10), ("probed_share_t30", 10),
                      ("horizon_probed_share", 6)):  # fmt: skip
        for rank in vote_runs:
            seen, iterates = rank[run]["seen"], rank[run]["iterates"]
            assert [s["step"] for s in seen] == [30, 60], run
            for probe in seen:
                window = torch.stack(iterates[probe["step"] - 30 : probe["step"]])
                torch.testing.assert_close(probe["weights"], window[-last:].mean(0), rtol=0, atol=1e-6)
                assert (probe["weights"] - window.mean(0)).abs().max() > 1e-4, run  # not the whole window's
    share, resumed = (vote_runs[0][name]["converges"] for name in ("kept_probed_share", "kept_probed_share_resumed"))
    for a, b in zip(resumed, share, strict=True):
        assert (a["step"], a["losses"], a["scale"]) == (b["step"], b["losses"], b["scale"])
        assert all(torch.equal(x, y) for x, y in zip(a["after"], b["after"]))


def test_a_forced_converge_right_after_a_resume_averages_replicas_left_apart(vote_runs):
    """A checkpoint keeps whether the replicas differ when it is saved: after a converge that kept the step-size
    fan-out (step 20), mid-interval (step 25), or with the horizon's offsets in place (step 20). A forced converge
    right after resuming, before any step, averages them (bit-identical on both ranks, the mean of what they held),
    as it would have without the resume. Before session 35 the first and last skipped the average (the flags were not
    saved) and the second too (the steps since the last converge were not saved)."""
    for run in ("kept_resumed_forced", "kept_mid_resumed_forced", "horizon_resumed_forced"):
        forced = [[c for c in r[run]["converges"] if "forced" in c] for r in vote_runs]
        assert forced[0][0]["forced"] and forced[1][0]["forced"], run
        before = [torch.cat([p.flatten() for p in f[0]["before"]]) for f in forced]
        after = [torch.cat([p.flatten() for p in f[0]["after"]]) for f in forced]
        assert not torch.equal(before[0], before[1]), run  # apart when saved
        assert torch.equal(after[0], after[1]), run
        torch.testing.assert_close(after[0], (before[0] + before[1]) / 2, rtol=0, atol=1e-6)


def drop_in_race(tmp_path, name, max_lr, race):
    torchrun("engine_worker.py", 2, ["drop_in_race", str(tmp_path / name), max_lr, race])
    return load_ranks(tmp_path / name, 2)


def test_the_drop_in_start_race_raises_a_start_far_below_and_keeps_the_initial_weights(tmp_path):
    plain = drop_in_race(tmp_path, "plain", "1e-4", "none")
    raced = drop_in_race(tmp_path, "raced", "1e-4", "lowers")
    decision = raced[0]["decision"]
    assert decision == raced[1]["decision"]  # one decision, taken alike on every rank
    assert decision["scale"] == pytest.approx(10.0) and decision["start_came_last"]
    assert decision["gap"] >= 2.0 * decision["standard_error"] > 0
    assert raced[0]["record"] == {**decision, "steps": 20, "probe_size": 16}  # in the schedule's record (hdet_schedule.json)
    for rank in raced:
        # The race put the initial weights back (bit for bit); the first step runs at 10x the schedule.
        for b, a in zip(rank["before"], rank["after_race"]):
            assert torch.equal(b, a)
        assert rank["lrs"][0] == pytest.approx(10 * rank["lr_before"])
    assert [r["lrs"][0] for r in plain] == [r["lr_before"] for r in plain]
    # The run itself differs from the one without a race from the first step on.
    assert not torch.equal(plain[0]["final"][0], raced[0]["final"][0])


def test_a_drop_in_race_that_changes_nothing_leaves_the_run_bit_identical(tmp_path):
    # At LR 1 the copies at 2.15-10x the start do worse (Adam on a small regression), so the start does not come
    # last: no raise; lowers=False, so no lowering either. The run is then the run without a race, bit for bit.
    plain = drop_in_race(tmp_path, "plain", "1.0", "none")
    raced = drop_in_race(tmp_path, "raced", "1.0", "raise_only")
    decision = raced[0]["decision"]
    assert decision["scale"] == 1.0 and not decision["start_came_last"] and decision["below_probe_loss"] is None
    for p, r in zip(plain, raced):
        assert p["lrs"] == r["lrs"]
        for a, b in zip(p["final"], r["final"]):
            assert torch.equal(a, b)


def test_a_drop_in_race_on_batches_that_differ_between_ranks_is_refused_on_every_rank(tmp_path):
    ranks = drop_in_race(tmp_path, "differ", "1e-4", "differing_probe")
    for rank in ranks:
        assert "probe_batches on every rank" in rank["error"] and "train_batches" not in rank["error"]
        assert all(torch.equal(a, b) for a, b in zip(rank["before"], rank["weights"]))  # nothing trained


def test_the_drop_in_split_race_races_the_pair_on_its_own_batches_bit_for_bit(tmp_path):
    # HDETTrainer's split race in a hand-written loop: the candidates on train_batches, the start and the copy below
    # it again on lower_train_batches. On the same batches the pair's start is the candidates' start bit for bit and
    # the run is the single race's; on a quarter of each batch the pair is the single race on those quarters.
    single = drop_in_race(tmp_path, "single", "1e-4", "lowers")
    same = drop_in_race(tmp_path, "same", "1e-4", "split_self")
    quarter = drop_in_race(tmp_path, "quarter", "1e-4", "quarter")
    split = drop_in_race(tmp_path, "split", "1e-4", "split_quarter")
    one, two = single[0]["decision"], same[0]["decision"]
    assert one["lower_start_probe_loss"] is None and two["lower_start_probe_loss"] == two["probe_losses"][0]
    assert {**two, "lower_start_probe_loss": None} == one and one["scale"] == pytest.approx(10.0)
    for a, b in zip(single, same):
        assert a["lrs"] == b["lrs"] and all(torch.equal(x, y) for x, y in zip(a["final"], b["final"]))
    decision, on_quarters = split[0]["decision"], quarter[0]["decision"]
    assert decision == split[1]["decision"]  # decided alike on every rank
    assert decision["probe_losses"] == one["probe_losses"]  # the candidates on the whole batches
    assert decision["lower_start_probe_loss"] == on_quarters["probe_losses"][0]  # the pair on the quarters
    assert decision["below_probe_loss"] == on_quarters["below_probe_loss"] != one["below_probe_loss"]
    assert split[0]["record"]["lower_start_probe_loss"] == decision["lower_start_probe_loss"]
    for rank in split:  # the initial weights put back after both layouts
        assert all(torch.equal(b, a) for b, a in zip(rank["before"], rank["after_race"]))


def test_a_drop_in_race_step_accumulated_over_micro_batches_is_the_whole_batchs_step(tmp_path):
    # A copy's step larger than a device fits: 4 micro-batches of 4 accumulated per step race as the 16-row batches
    # do (the same mean loss and gradient, up to float rounding), and decide alike.
    whole = drop_in_race(tmp_path, "whole", "1e-4", "lowers")[0]["decision"]
    accumulated = drop_in_race(tmp_path, "accumulated", "1e-4", "accumulated")
    decision = accumulated[0]["decision"]
    assert decision == accumulated[1]["decision"]
    assert decision["scale"] == whole["scale"] == pytest.approx(10.0)
    torch.testing.assert_close(decision["probe_losses"], whole["probe_losses"], rtol=1e-5, atol=0)
    assert decision["below_probe_loss"] == pytest.approx(whole["below_probe_loss"], rel=1e-5)
    for rank in accumulated:
        assert all(torch.equal(b, a) for b, a in zip(rank["before"], rank["after_race"]))


def test_a_drop_in_race_pair_batches_that_differ_between_ranks_are_refused_on_every_rank(tmp_path):
    for rank in drop_in_race(tmp_path, "differ_pair", "1e-4", "differing_pair"):
        assert "lower_train_batches on every rank" in rank["error"] and "probe_batches" not in rank["error"]
        assert all(torch.equal(a, b) for a, b in zip(rank["before"], rank["weights"]))


def test_the_drop_in_race_steps_through_the_loops_grad_scaler_under_fp16(tmp_path):
    # Under fp16 autocast a small loss's gradients underflow to zero in half precision unless the loss is scaled:
    # raced without the loop's GradScaler no copy learns (every probe loss is the initial weights'), and nothing is
    # raised; through it the copies learn and the start far below is raised to 10x, as in fp32.
    torchrun("engine_worker.py", 2, ["drop_in_race_fp16", str(tmp_path / "none"), "none"])
    torchrun("engine_worker.py", 2, ["drop_in_race_fp16", str(tmp_path / "loop"), "loop"])
    unscaled, scaled = load_ranks(tmp_path / "none", 2), load_ranks(tmp_path / "loop", 2)
    flat = unscaled[0]["decision"]
    assert len(set(flat["probe_losses"])) == 1 and flat["probe_losses"][0] == flat["initial_probe_loss"]
    assert flat["scale"] == 1.0
    decision = scaled[0]["decision"]
    assert decision == scaled[1]["decision"] and decision["scale"] == pytest.approx(10.0)
    assert decision["start_came_last"] and decision["probe_losses"][-1] < decision["initial_probe_loss"]
    for rank in scaled:  # each copy stepped through a fresh scaler: the loop's own is as it was
        assert rank["scaler_after"] == rank["scaler_before"] and rank["scaler_before"]["scale"] == 2.0**16


@pytest.mark.parametrize("gradient_sync", ["shared", "local"])
def test_hdet_accelerate_start_race_raises_a_start_far_below(tmp_path, gradient_sync):
    torchrun("engine_worker.py", 2, ["accelerate_race", str(tmp_path), gradient_sync])
    ranks = load_ranks(tmp_path, 2)
    decision = ranks[0]["decision"]
    assert decision == ranks[1]["decision"] and decision["scale"] == pytest.approx(10.0)
    assert ranks[0]["record"] == {**decision, "steps": 20, "probe_size": 16}
    # Local mode passes lower_train_batches (the split race): the pair's start raced again, on other batches.
    split = decision["lower_start_probe_loss"]
    assert split is None if gradient_sync == "shared" else split != decision["probe_losses"][0]
    for rank in ranks:
        assert all(torch.equal(a, b) for a, b in zip(rank["before"], rank["after_race"]))
        # The first step's base LR at 10x (this rank's step-size multiplier on top, the same before and after).
        assert rank["lrs"][0] == pytest.approx(10 * rank["lr_before"])
