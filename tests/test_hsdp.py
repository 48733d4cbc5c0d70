"""HDET across HSDP replica groups: 4 gloo processes = 2 replica groups x 2 FSDP2 shards (tests/workers/hsdp_worker.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from distributed import load_ranks, torchrun

from hdet_hf.hsdp import check_no_accelerate_sharding, load_sharded_state

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
    torchrun("hsdp_worker.py", NPROC, ["local", str(dump), str(STEPS), "--auto_lr", "--save_at", "6", str(ckpt)])
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
                assert same(a["post"], b["post"]), f"step {step}: shard {shard} differs across groups after a converge"
                for x, y, avg in zip(a["pre"], b["pre"], a["post"]):
                    mean = (x.double() + y.double()) / 2
                    assert torch.allclose(avg.double(), mean, atol=1e-6, rtol=0)
            elif step != 6:  # step 6 saved a checkpoint, which converges first
                assert not same(a["post"], b["post"])
        if converged:
            # Every rank gathered the same per-group losses: statistics agree inside a group and across columns.
            losses = [r["steps"][step]["losses"] for r in ranks]
            assert all(x == losses[0] for x in losses) and len(losses[0]) == 2 and losses[0][0] != losses[0][1]


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
    hdet = [(r["rank"], step) for r in ranks for p, step, name, m in r["collectives"] if p == "hdet" and len({x // SHARD for x in m}) > 1]
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


def test_shared_mode_all_reduces_gradients_across_groups(tmp_path):
    torchrun("hsdp_worker.py", NPROC, ["shared", str(tmp_path), str(STEPS)])
    ranks = load_ranks(tmp_path, NPROC)
    check_replica_groups(ranks)
    crossing = cross_group(ranks, "train")
    # HSDP's own gradient all-reduce across groups, every step (what local mode leaves out).
    assert {name for _, _, name, _ in crossing} == {"all_reduce"}
    assert {step for _, step, _, _ in crossing} == set(range(1, STEPS + 1))


def test_resume_reproduces_the_uninterrupted_run(local_run, tmp_path):
    reference, ckpt = local_run
    torchrun("hsdp_worker.py", NPROC, ["local", str(tmp_path), str(STEPS), "--auto_lr", "--resume", str(ckpt)])
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
    assert [(r["replica_rank"], r["shard_rank"]) for r in ranks] == [(g, s) for g in range(3) for s in range(2)]
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


def test_resume_with_another_shard_size_is_refused(local_run):
    _, ckpt = local_run
    saved = torch.load(ckpt / "hdet_hsdp_rank0.pt", weights_only=True)
    # Checked before anything is touched, so a stand-in for this run's engine (4 groups of 1) is enough.
    layout = SimpleNamespace(shard_size=1, shard_rank=0, num_replicas=4)
    with pytest.raises(ValueError, match="--hdet_hsdp_shard_size 2 .shard 0., but this process is shard 0 of 1"):
        load_sharded_state([saved], None, None, SimpleNamespace(layout=layout))


def test_accelerate_sharding_is_refused_naming_the_route():
    fsdp = SimpleNamespace(distributed_type="DistributedType.FSDP")
    with pytest.raises(ValueError, match="leaves no replicas to average.*--hdet_hsdp_shard_size N"):
        check_no_accelerate_sharding(fsdp, hsdp=False)
    with pytest.raises(ValueError, match="shards the model with FSDP2 itself.*plain multi-process config"):
        check_no_accelerate_sharding(SimpleNamespace(distributed_type="DistributedType.DEEPSPEED"), hsdp=True)
    check_no_accelerate_sharding(SimpleNamespace(distributed_type="DistributedType.MULTI_CPU"), hsdp=True)


TRAINER_ARGS = [
    "--hdet", "--hdet_hsdp_shard_size", "2", "--hdet_gradient_sync", "local", "--hdet_sync_interval", "4",
    "--hdet_lr_spread", "0.5", "--max_steps", "8", "--save_strategy", "steps", "--save_steps", "6",
    "--per_device_train_batch_size", "4", "--learning_rate", "1e-2", "--report_to", "none",
]  # fmt: skip


def test_trainer_route_trains_saves_and_resumes_exactly(tmp_path):
    """HDETTrainer --hdet_hsdp_shard_size 2 on 4 processes; then a resume from checkpoint-6 on fresh processes."""
    out = tmp_path / "out"
    (tmp_path / "a").mkdir()
    torchrun("hsdp_trainer_worker.py", NPROC, ["--dump_dir", str(tmp_path / "a"), "--output_dir", str(out), *TRAINER_ARGS])
    ranks = load_ranks(tmp_path / "a", NPROC)
    groups = groups_of(ranks)
    for step in range(1, 9):
        assert len({m["steps"][step]["lr"] for m in groups[0]}) == 1
        assert {m["steps"][step]["lr"] for m in groups[0]} != {m["steps"][step]["lr"] for m in groups[1]} or step == 8
        for shard in range(SHARD):
            a, b = (groups[g][shard]["steps"][step]["shards"] for g in (0, 1))
            # Converges at 4 and 8 (T) and before the checkpoint at 6; apart otherwise.
            assert same(a, b) == (step in (4, 6, 8)), (step, shard)
    assert ranks[0]["saved_matches_gathered"]  # the saved model is the gathered ensemble mean, loadable as is
    names = {p.name for p in (out / "checkpoint-6").iterdir()}
    assert {f"hdet_hsdp_rank{r}.pt" for r in range(NPROC)} <= names and "optimizer.pt" not in names

    (tmp_path / "b").mkdir()
    torchrun(
        "hsdp_trainer_worker.py",
        NPROC,
        ["--dump_dir", str(tmp_path / "b"), "--resume", str(out / "checkpoint-6"), "--output_dir", str(tmp_path / "out_b"), *TRAINER_ARGS],
    )
    for a, b in zip(ranks, load_ranks(tmp_path / "b", NPROC)):
        assert sorted(b["steps"]) == [7, 8]
        for step in (7, 8):
            assert b["steps"][step]["lr"] == a["steps"][step]["lr"]
            assert same(b["steps"][step]["shards"], a["steps"][step]["shards"]), (a["rank"], step)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < NPROC, reason=f"needs {NPROC} CUDA devices (NCCL, one per process)")
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
