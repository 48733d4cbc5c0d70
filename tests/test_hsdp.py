"""HDET across HSDP replica groups: 4 gloo processes = 2 replica groups x 2 FSDP2 shards (tests/workers/hsdp_worker.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from distributed import gloo_only, load_ranks, torchrun

from hdet_hf.hsdp import check_no_accelerate_sharding, load_sharded_state, regroup_window_sums

pytestmark = pytest.mark.slow

NPROC, SHARD, STEPS, T = 4, 2, 12, 4


def groups_of(ranks: list[dict]) -> dict[int, list[dict]]:
    by_group: dict[int, list[dict]] = {}
    for r in ranks:
        by_group.setdefault(r["replica_rank"], []).append(r)
    return by_group


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """Local mode with the controller on, saving a checkpoint mid-interval (step 6): also the resume reference."""
    dump, ckpt = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("ckpt")
    torchrun(
        "hsdp_worker.py", NPROC, ["local", str(dump), str(STEPS), "--auto_lr", "--save_at", "6", str(ckpt)]
    )
    return load_ranks(dump, NPROC), ckpt


def check_replica_groups(ranks: list[dict]) -> None:
    """What both modes promise: one hyperparameter set per group, groups apart between converges, one model after."""
    assert [(r["replica_rank"], r["shard_rank"]) for r in ranks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    groups = groups_of(ranks)
    for step in range(1, STEPS + 1):
        lrs = {g: {m["steps"][step]["lr"] for m in members} for g, members in groups.items()}
        assert all(len(v) == 1 for v in lrs.values()), f"ranks of one group stepped with different LRs: {lrs}"
        assert lrs[0] != lrs[1], f"step {step}: both groups ran the same LR {lrs}"
        converged = step % T == 0 or step == STEPS
        assert {r["steps"][step]["converged"] for r in ranks} == {converged}
        for shard in range(SHARD):
            a, b = (groups[g][shard]["steps"][step] for g in (0, 1))
            # Before the HDET step the groups' shards differ (different LRs); after a converge they are one.
            assert not same(a["pre"], b["pre"]), f"step {step}: groups hold the same shard {shard}"
            if converged:
                assert same(a["post"], b["post"]), (
                    f"step {step}: shard {shard} differs across groups after a converge"
                )
                for x, y, avg in zip(a["pre"], b["pre"], a["post"]):
                    mean = (x.double() + y.double()) / 2
                    assert torch.allclose(avg.double(), mean, atol=1e-6, rtol=0)
            elif step != 6:  # step 6 saved a checkpoint, which converges first
                assert not same(a["post"], b["post"])
        if converged:
            # Every rank gathered the same per-group losses: statistics agree inside a group and across columns.
            losses = [r["steps"][step]["losses"] for r in ranks]
            assert (
                all(x == losses[0] for x in losses) and len(losses[0]) == 2 and losses[0][0] != losses[0][1]
            )


def test_two_replica_groups_floor_the_vote_at_the_group_losss_noise(local_run):
    """`noise_floor` with 2 replica groups: the noise is the root mean over the groups of the variance of each
    group's window loss, sum_k W_k^2 var_k / (sum_k W_k)^2 over its ranks (here one item per step each), computed
    from the per-rank step losses (successive differences) since the previous converge."""
    ranks, _ = local_run
    groups = groups_of(ranks)
    checked = 0
    converged_at = [0] + [s for s in range(1, STEPS + 1) if ranks[0]["steps"][s]["converged"]]
    for before, step in zip(converged_at, converged_at[1:]):
        noise = ranks[0]["steps"][step]["loss_noise"]
        assert all(r["steps"][step]["loss_noise"] == noise for r in ranks)
        if noise is None:  # a forced converge (the save at step 6), or the controller's warm-up
            continue
        variances = []
        for members in groups.values():
            per_rank = []
            for r in members:
                x = torch.tensor(
                    [r["steps"][s]["loss"] for s in range(before + 1, step + 1)], dtype=torch.float64
                )
                per_rank.append(float((x.diff() ** 2).mean() / 2 / len(x)))  # weight 1 per step: / n
            variances.append(sum(per_rank) / len(per_rank) ** 2)
        assert noise == pytest.approx((sum(variances) / len(variances)) ** 0.5, rel=1e-5)
        checked += 1
    assert checked >= 2


def cross_group(ranks: list[dict], phase: str) -> list[tuple]:
    """Collectives of ``phase`` whose group spans more than one replica group."""
    found = []
    for r in ranks:
        for p, step, name, members in r["collectives"]:
            if p == phase and len({m // SHARD for m in members}) > 1:
                found.append((r["rank"], step, name, members))
    return found


def test_local_mode_groups_explore_apart_and_converge_exactly(local_run):
    ranks, _ = local_run
    check_replica_groups(ranks)
    # The shards really are sharded inside the group (reduce-scatter/all-gather ran there).
    names = {name for r in ranks for p, _, name, members in r["collectives"] if p == "train"}
    assert any("reduce_scatter" in n for n in names) and any("all_gather" in n for n in names), names
    # No gradient (or any other) collective crosses groups between converges...
    assert cross_group(ranks, "train") == []
    # ...only the converge does: one fused all-reduce over the replicate group per converge, on each rank.
    hdet = [
        (r["rank"], step)
        for r in ranks
        for p, step, name, m in r["collectives"]
        if p == "hdet" and len({x // SHARD for x in m}) > 1
    ]
    converges = list(range(T, STEPS + 1, T))
    assert sorted({step for _, step in hdet}) == converges
    assert len(hdet) == len(converges) * NPROC
    # The controller moved the base LR (identically on every rank), scoring each group on the shared probe batch
    # at its interval-mean weights: one score per group, the same on every rank.
    scales = {r["steps"][STEPS]["scale"] for r in ranks}
    assert len(scales) == 1 and scales != {1.0}
    for step in converges:
        probes = [r["steps"][step]["probe_losses"] for r in ranks]
        assert all(p == probes[0] for p in probes) and len(probes[0]) == 2 and probes[0][0] != probes[0][1]


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    """Shared mode (FSDP2 on the 2-D mesh), saving a checkpoint at step 6."""
    dump, ckpt = tmp_path_factory.mktemp("shared"), tmp_path_factory.mktemp("shared_ckpt")
    torchrun("hsdp_worker.py", NPROC, ["shared", str(dump), str(STEPS), "--save_at", "6", str(ckpt)])
    return load_ranks(dump, NPROC), ckpt


def test_shared_mode_all_reduces_gradients_across_groups(shared_run):
    ranks, _ = shared_run
    check_replica_groups(ranks)
    crossing = cross_group(ranks, "train")
    # HSDP's own gradient all-reduce across groups, every step (what local mode leaves out).
    assert {name for _, _, name, _ in crossing} == {"all_reduce"}
    assert {step for _, step, _, _ in crossing} == set(range(1, STEPS + 1))


def test_resume_reproduces_the_uninterrupted_run(local_run, tmp_path):
    reference, ckpt = local_run
    torchrun(
        "hsdp_worker.py", NPROC, ["local", str(tmp_path), str(STEPS), "--auto_lr", "--resume", str(ckpt)]
    )
    resumed = load_ranks(tmp_path, NPROC)
    for a, b in zip(reference, resumed):
        assert sorted(b["steps"]) == list(range(7, STEPS + 1))
        for step in range(7, STEPS + 1):
            assert b["steps"][step]["lr"] == a["steps"][step]["lr"]
            assert same(b["steps"][step]["post"], a["steps"][step]["post"]), f"rank {a['rank']} step {step}"
            assert b["steps"][step]["scale"] == a["steps"][step]["scale"]


def test_resume_on_more_replica_groups_is_elastic(local_run, tmp_path):
    """2 groups x 2 shards saved, 3 groups x 2 shards resumed: new group 2 continues saved group 0's files."""
    reference, ckpt = local_run
    torchrun("hsdp_worker.py", 6, ["local", str(tmp_path), str(STEPS), "--auto_lr", "--resume", str(ckpt)])
    ranks = load_ranks(tmp_path, 6)
    assert [(r["replica_rank"], r["shard_rank"]) for r in ranks] == [
        (g, s) for g in range(3) for s in range(2)
    ]
    assert all(r["error"] is None and "world size 2 -> 3" in r["notes"][0] for r in ranks)
    groups = groups_of(ranks)
    for step in range(7, STEPS + 1):
        lrs = [{m["steps"][step]["lr"] for m in groups[g]} for g in range(3)]
        assert all(len(v) == 1 for v in lrs) and len(set.union(*lrs)) == 3, (step, lrs)
        if step % T == 0:
            for shard in range(SHARD):
                posts = [groups[g][shard]["steps"][step]["post"] for g in range(3)]
                assert same(posts[0], posts[1]) and same(posts[0], posts[2]), (step, shard)
    # The controller state carried over: the first resumed converge starts from the saved scale.
    assert ranks[0]["steps"][7]["scale"] == reference[0]["steps"][6]["scale"]


def test_resume_with_another_shard_size_recuts_the_shards(shared_run, tmp_path):
    """Shared mode, 2 groups x 2 shards saved, 2 groups x 1 resumed (2 processes): each group's shards joined
    (into DTensors on the 2-D mesh), schedule kept. (The Trainer tests below cover local mode.)"""
    gloo_only()
    reference, ckpt = shared_run
    torchrun(
        "hsdp_worker.py", 2, ["shared", str(tmp_path), str(STEPS), "--shard", "1", "--resume", str(ckpt)]
    )
    ranks = load_ranks(tmp_path, 2)
    assert all(r["error"] is None and "shard size 2 -> 1" in r["notes"][0] for r in ranks)
    for r in ranks:
        g = r["replica_rank"]
        assert sorted(r["steps"]) == list(range(7, STEPS + 1))
        # Not elastic: the multipliers and the schedule carry on, so the LRs are the reference's (the data,
        # fixed by the process rank, is not).
        for step in range(7, STEPS + 1):
            assert r["steps"][step]["lr"] == reference[g * SHARD]["steps"][step]["lr"], (g, step)
    assert same(ranks[0]["steps"][8]["post"], ranks[1]["steps"][8]["post"])
    assert not same(ranks[0]["steps"][7]["post"], ranks[1]["steps"][7]["post"])


def test_load_sharded_state_refuses_states_of_another_layout(local_run):
    _, ckpt = local_run
    saved = torch.load(ckpt / "hdet_hsdp_rank0.pt", weights_only=True)
    # Checked before anything is touched, so a stand-in for this run's engine (4 groups of 1) is enough.
    layout = SimpleNamespace(shard_size=1, shard_rank=0, num_replicas=4)
    with pytest.raises(
        ValueError, match="holds shard 0 of 2 .* but this process is shard 0 of 1.*resume_from_files"
    ):
        load_sharded_state([saved], None, None, SimpleNamespace(layout=layout))


def test_recut_matches_fsdp2_split_for_uneven_shapes():
    """Saved shards of one shard size cut for another give exactly FSDP2's shard (torch.chunk, empty tails)."""
    from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty, _get_dim_chunked_size

    from hdet_hf.hsdp import _recut

    def fsdp2_shards(full: torch.Tensor, parts: int) -> list[torch.Tensor]:
        # What FSDP2 holds locally: an empty chunk keeps the other dims (fully_shard's sharded_size).
        return [c.reshape(_get_dim_chunked_size(c, full.shape, 0)) for c in _chunk_with_empty(full, parts, 0)]

    for rows in (1, 5, 7, 8):
        full = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3)
        for saved in (1, 2, 3, 4):
            pieces = fsdp2_shards(full, saved)
            for size in (1, 2, 3, 4):
                for rank, expected in enumerate(fsdp2_shards(full, size)):
                    param = SimpleNamespace(
                        shape=full.shape, data=SimpleNamespace(to_local=lambda e=expected: e)
                    )
                    assert torch.equal(_recut(pieces, param, size, rank), expected), (rows, saved, size, rank)
    # Tensors that are not shards of the parameter (a scalar step, another shape) are left to the caller.
    param = SimpleNamespace(
        shape=torch.Size([4, 3]), data=SimpleNamespace(to_local=lambda: torch.zeros(2, 3))
    )
    assert _recut([torch.tensor(5.0), torch.tensor(5.0)], param, 2, 0) is None
    assert _recut([torch.zeros(2, 2), torch.zeros(2, 2)], param, 2, 0) is None


def test_accelerate_sharding_is_refused_naming_the_route():
    fsdp = SimpleNamespace(distributed_type="DistributedType.FSDP")
    with pytest.raises(ValueError, match="leaves no replicas to average.*--hdet_hsdp_shard_size N"):
        check_no_accelerate_sharding(fsdp, hsdp=False)
    with pytest.raises(ValueError, match="shards the model with FSDP2 itself.*plain multi-process config"):
        check_no_accelerate_sharding(SimpleNamespace(distributed_type="DistributedType.DEEPSPEED"), hsdp=True)
    check_no_accelerate_sharding(SimpleNamespace(distributed_type="DistributedType.MULTI_CPU"), hsdp=True)


TRAINER_ARGS = [
    "--hdet", "--hdet_hsdp_shard_size", "2", "--hdet_gradient_sync", "local", "--hdet_sync_interval", "4",
    "--hdet_lr_spread", "0.5", "--hdet_explore_until", "1", "--max_steps", "8", "--save_strategy", "steps",
    "--save_steps", "6",
    "--per_device_train_batch_size", "4", "--learning_rate", "1e-2", "--report_to", "none",
]  # fmt: skip


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory):
    """HDETTrainer --hdet_hsdp_shard_size 2 on 4 processes, checkpoint-6: the reference of the Trainer's resumes."""
    base = tmp_path_factory.mktemp("trainer")
    (base / "dump").mkdir()
    torchrun(
        "hsdp_trainer_worker.py",
        NPROC,
        ["--dump_dir", str(base / "dump"), "--output_dir", str(base / "out"), *TRAINER_ARGS],
    )
    return load_ranks(base / "dump", NPROC), base / "out" / "checkpoint-6"


def resume_trainer(tmp_path, checkpoint, nproc: int, *extra: str) -> list[dict]:
    """The Trainer route resumed from ``checkpoint`` on ``nproc`` fresh processes (``extra`` overrides flags)."""
    dump = tmp_path / "dump"
    dump.mkdir()
    args = [
        "--dump_dir",
        str(dump),
        "--resume",
        str(checkpoint),
        "--output_dir",
        str(tmp_path / "out"),
        *TRAINER_ARGS,
        *extra,
    ]
    torchrun("hsdp_trainer_worker.py", nproc, args)
    return load_ranks(dump, nproc)


def saved_group(checkpoint, group: int, shard_size: int) -> list[dict]:
    """The shard files of one saved replica group, in shard order."""
    return [
        torch.load(checkpoint / f"hdet_hsdp_rank{group * shard_size + s}.pt", weights_only=True)
        for s in range(shard_size)
    ]


def joined(pieces: list[torch.Tensor], shard_size: int, shard: int) -> torch.Tensor:
    """Shard ``shard`` of ``shard_size`` (FSDP2's dim-0 split) of the replica tensor made of saved ``pieces``."""
    full = torch.cat(pieces)
    chunks = torch.chunk(full, shard_size)
    return chunks[shard] if shard < len(chunks) else full[:0]


def moments(files: list[dict], shard_size: int, shard: int) -> list[dict[str, torch.Tensor]]:
    """The saved group's optimizer moments, cut for shard ``shard`` of ``shard_size``."""
    states = [f["optimizer"]["state"] for f in files]
    return [
        {key: joined([s[i][key] for s in states], shard_size, shard) for key in ("exp_avg", "exp_avg_sq")}
        for i in sorted(states[0])
    ]


def check_groups_apart_then_one(ranks: list[dict], shard_size: int, apart: int, converged: int) -> None:
    """One LR per group, a different one per group at step ``apart``; all groups bit-identical after ``converged``."""
    groups = groups_of(ranks)
    lrs = [{m["steps"][apart]["lr"] for m in members} for members in groups.values()]
    assert all(len(v) == 1 for v in lrs) and len(set.union(*lrs)) == len(groups), lrs
    for shard in range(shard_size):
        posts = [members[shard]["steps"][converged]["shards"] for members in groups.values()]
        assert all(same(posts[0], p) for p in posts[1:]), shard


def test_trainer_route_trains_and_saves(trainer_run):
    ranks, checkpoint = trainer_run
    groups = groups_of(ranks)
    for step in range(1, 9):
        assert len({m["steps"][step]["lr"] for m in groups[0]}) == 1
        assert {m["steps"][step]["lr"] for m in groups[0]} != {
            m["steps"][step]["lr"] for m in groups[1]
        } or step == 8
        for shard in range(SHARD):
            a, b = (groups[g][shard]["steps"][step]["shards"] for g in (0, 1))
            # Converges at 4 and 8 (T) and before the checkpoint at 6; apart otherwise.
            assert same(a, b) == (step in (4, 6, 8)), (step, shard)
    assert ranks[0]["saved_matches_gathered"]  # the saved model is the gathered ensemble mean, loadable as is
    names = {p.name for p in checkpoint.iterdir()}
    assert {f"hdet_hsdp_rank{r}.pt" for r in range(NPROC)} <= names and "optimizer.pt" not in names


def test_trainer_resume_reproduces_the_uninterrupted_run(trainer_run, tmp_path):
    reference, checkpoint = trainer_run
    resumed = resume_trainer(tmp_path, checkpoint, NPROC)
    for a, b in zip(reference, resumed):
        assert b["notes"] == [] and b["loaded"]["step"] == 6
        assert sorted(b["steps"]) == [7, 8]
        for step in (7, 8):
            assert b["steps"][step]["lr"] == a["steps"][step]["lr"]
            assert same(b["steps"][step]["shards"], a["steps"][step]["shards"]), (a["rank"], step)


@pytest.fixture(scope="module")
def trainer_on_three_groups(trainer_run, tmp_path_factory):
    """checkpoint-6 (2 groups x 2 shards) resumed on 6 processes (3 groups x 2), saving checkpoint-7 on the way."""
    gloo_only()  # the checkpoint logic is backend-independent; the NCCL check runs the 4-process Trainer tests
    tmp_path = tmp_path_factory.mktemp("three_groups")
    return resume_trainer(tmp_path, trainer_run[1], 6, "--save_at", "7"), tmp_path / "out" / "checkpoint-7"


def test_trainer_resume_on_more_replica_groups_is_elastic(trainer_run, trainer_on_three_groups):
    """The elastic resume of whole replicas, per group: new group 2 continues saved group 0's shards."""
    reference, checkpoint = trainer_run
    ranks, _ = trainer_on_three_groups
    assert [(r["replica_rank"], r["shard_rank"]) for r in ranks] == [
        (g, s) for g in range(3) for s in range(SHARD)
    ]
    assert "world size 2 -> 3: multipliers recomputed" in ranks[0]["notes"][0]
    saved = {g: saved_group(checkpoint, g, SHARD) for g in (0, 1)}
    for r in ranks:
        g, s = r["replica_rank"], r["shard_rank"]
        assert r["loaded"]["step"] == r["loaded"]["engine_step"] == 6 and sorted(r["steps"]) == [7, 8]
        source = reference[(g % 2) * SHARD + s]
        assert same(r["loaded"]["shards"], source["steps"][6]["shards"])
        for mine, theirs in zip(r["loaded"]["optimizer"], moments(saved[g % 2], SHARD, s)):
            assert torch.equal(mine["exp_avg"], theirs["exp_avg"]) and torch.equal(
                mine["exp_avg_sq"], theirs["exp_avg_sq"]
            )
    # Three LRs (multipliers recomputed for 3 groups), one per group; one model after the converges at 7 (save) and 8.
    check_groups_apart_then_one(ranks, SHARD, apart=7, converged=8)


def test_trainer_resume_with_another_shard_size_recuts_the_shards(trainer_run, tmp_path):
    """Same 2 groups, 1 process each instead of 2: each group's shards joined; the run continues its schedule."""
    gloo_only()
    reference, checkpoint = trainer_run
    ranks = resume_trainer(tmp_path, checkpoint, 2, "--hdet_hsdp_shard_size", "1")
    notes = ranks[0]["notes"][0]
    assert "shard size 2 -> 1" in notes and "world size" not in notes
    for r in ranks:
        g = r["replica_rank"]
        assert r["shard_rank"] == 0 and r["loaded"]["step"] == 6
        parts = [reference[g * SHARD + s]["steps"][6]["shards"] for s in range(SHARD)]
        assert same(r["loaded"]["shards"], [torch.cat(p) for p in zip(*parts)])
        for mine, theirs in zip(r["loaded"]["optimizer"], moments(saved_group(checkpoint, g, SHARD), 1, 0)):
            assert torch.equal(mine["exp_avg"], theirs["exp_avg"]) and torch.equal(
                mine["exp_avg_sq"], theirs["exp_avg_sq"]
            )
        # Not elastic: the saved multipliers and schedule carry on, so each group steps with the reference's LRs.
        for step in (7, 8):
            assert r["steps"][step]["lr"] == reference[g * SHARD]["steps"][step]["lr"], (g, step)
    check_groups_apart_then_one(ranks, 1, apart=7, converged=8)


def test_trainer_resume_on_fewer_groups_and_another_shard_size(trainer_on_three_groups, tmp_path):
    """checkpoint-7 (3 groups x 2) resumed on 2 processes (2 groups x 1): group 0 averages saved groups 0 and 2."""
    _, checkpoint = trainer_on_three_groups
    ranks = resume_trainer(tmp_path, checkpoint, 2, "--hdet_hsdp_shard_size", "1")
    assert "world size 3 -> 2" in ranks[0]["notes"][0] and "shard size 2 -> 1" in ranks[0]["notes"][0]
    for r, sources in zip(ranks, ([0, 2], [1])):
        assert r["loaded"]["step"] == 7 and sorted(r["steps"]) == [8]
        expected = [moments(saved_group(checkpoint, g, SHARD), 1, 0) for g in sources]
        for i, mine in enumerate(r["loaded"]["optimizer"]):
            for key in ("exp_avg", "exp_avg_sq"):
                mean = torch.stack([e[i][key] for e in expected]).mean(0)
                assert torch.allclose(mine[key], mean, rtol=0, atol=1e-12), (r["rank"], i, key)
    assert same(ranks[0]["steps"][8]["shards"], ranks[1]["steps"][8]["shards"])  # the final converge


def test_trainer_refuses_to_mix_sharded_and_whole_replica_checkpoints(trainer_run):
    """Checked on every rank before any state is loaded (`_raise_on_every_rank`), with the way out."""
    from hdet_hf.trainer import _check_sharding_matches, _read_saved_state

    _, checkpoint = trainer_run
    _, shared = _read_saved_state(str(checkpoint))
    with pytest.raises(
        ValueError, match=r"saved with --hdet_hsdp_shard_size 2 \(2 replica groups\), but this run has no"
    ):
        _check_sharding_matches(str(checkpoint), shared, hsdp=False)
    _check_sharding_matches(str(checkpoint), shared, hsdp=True)
    whole = {k: v for k, v in shared.items() if k != "hsdp"}
    with pytest.raises(ValueError, match="saved without HSDP .* Resume without --hdet_hsdp_shard_size"):
        _check_sharding_matches(str(checkpoint), whole, hsdp=True)
    _check_sharding_matches(str(checkpoint), whole, hsdp=False)


@pytest.mark.gpu
@pytest.mark.skipif(
    torch.cuda.device_count() < NPROC, reason=f"needs {NPROC} CUDA devices (NCCL, one per process)"
)
@pytest.mark.parametrize("mode", ["local", "shared"])
def test_nccl_replica_groups(tmp_path, mode):
    """The same protocol on GPUs with NCCL (what cannot run on this CPU machine)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("ACCELERATE_USE_CPU", None)
    torchrun("hsdp_worker.py", NPROC, [mode, str(tmp_path), str(STEPS), "--cuda"], env=env)
    ranks = load_ranks(tmp_path, NPROC)
    check_replica_groups(ranks)
    crossing = {name for _, _, name, _ in cross_group(ranks, "train")}
    assert crossing == (set() if mode == "local" else {"all_reduce"})


def test_a_regrouped_window_keeps_the_groups_means_over_the_vote_and_since_the_last_converge():
    """Re-cutting a saved group of 2 shards (each summing its own items) for another shard size: the group's window
    sums and the sums at its last converge (`ScoreWindow.mark`, a vote spanning converges) go whole to shard 0, so
    the group's mean over the vote and since the last converge are unchanged; other shards start empty."""
    saved = [
        {"loss_sum": 6.0, "loss_weight": 3.0, "loss_mark": [2.0, 1.0]},
        {"loss_sum": 10.0, "loss_weight": 4.0, "loss_mark": [4.0, 2.0]},
    ]
    first, other = regroup_window_sums(saved, 0), regroup_window_sums(saved, 1)
    assert first == {"loss_sum": 16.0, "loss_weight": 7.0, "loss_mark": [6.0, 3.0]}
    assert other == {"loss_sum": 0.0, "loss_weight": 0.0, "loss_mark": [0.0, 0.0]}
    recent = (first["loss_sum"] - first["loss_mark"][0]) / (first["loss_weight"] - first["loss_mark"][1])
    assert recent == (4.0 + 6.0) / (2.0 + 2.0)  # the two shards' steps since the converge, pooled
    # A state saved before the mark existed: no mark to regroup (the window then began at the last converge).
    assert "loss_mark" not in regroup_window_sums([{k: v for k, v in s.items() if k != "loss_mark"} for s in saved], 0)


def test_votes_across_converges_resume_between_a_converge_and_the_vote(tmp_path):
    """--hdet_controller_time_scale vote across replica groups: T 4 in a 12-step run (default interval 10) votes at
    step 8 only (k 2); the converge at step 4 averages and keeps each group's window. A checkpoint at step 6 (between
    them) resumes bit for bit: the groups' window sums since step 0 survive the save (the mark of step 4, which only
    the divergence guard reads, has its own round trip in test_noise_floor)."""
    dump, ckpt, resumed_dump = (tmp_path / name for name in ("full", "ckpt", "resumed"))
    for folder in (dump, ckpt, resumed_dump):
        folder.mkdir()
    common = ["--auto_lr", "--time_scale", "vote"]
    torchrun("hsdp_worker.py", NPROC, ["local", str(dump), str(STEPS), *common, "--save_at", "6", str(ckpt)])
    torchrun("hsdp_worker.py", NPROC, ["local", str(resumed_dump), str(STEPS), *common, "--resume", str(ckpt)])
    reference, resumed = load_ranks(dump, NPROC), load_ranks(resumed_dump, NPROC)
    scales = [reference[0]["steps"][step]["scale"] for step in range(1, STEPS + 1)]
    # Read after each step: moved at step 8's vote only (not at the converges of steps 4 and 12).
    assert scales[:7] == [1.0] * 7 and scales[7] != 1.0 and scales[8:] == [scales[7]] * (STEPS - 8)
    assert all(r["steps"][step]["scale"] == scales[step - 1] for r in reference for step in range(1, STEPS + 1))
    for a, b in zip(reference, resumed):
        for step in range(7, STEPS + 1):
            assert b["steps"][step]["lr"] == a["steps"][step]["lr"]
            assert same(b["steps"][step]["post"], a["steps"][step]["post"]), f"rank {a['rank']} step {step}"
            assert b["steps"][step]["scale"] == a["steps"][step]["scale"]
