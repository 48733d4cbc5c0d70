"""HDETTrainer under torchrun with 2 and 4 gloo processes on a tiny Llama built from config."""

import pytest
import torch
from distributed import TRAINER_ARGS, load_ranks, torchrun

from hdet_hf.spread import spread_multipliers

pytestmark = pytest.mark.slow

COMMON = [
    *TRAINER_ARGS,
]


def run(tmp_path, name, nproc, *flags):
    out = tmp_path / name
    torchrun(
        "trainer_worker.py",
        nproc,
        ["--output_dir", str(out / "out"), "--dump_dir", str(out / "dump"), *COMMON, *flags],
    )
    return load_ranks(out / "dump", nproc), out


def check_lrs_follow_base_times_multiplier(ranks, nproc, spread):
    steps = len(ranks[0]["lrs"])
    for k in range(steps):
        mults = [r["multipliers"][k] for r in ranks]
        assert sorted(mults) == pytest.approx(spread_multipliers(nproc, spread))
        assert sum(mults) / nproc == pytest.approx(1.0)
        for r in ranks:
            base = r["lr_per_step"][k]
            assert r["lrs"][k] == pytest.approx([b * r["multipliers"][k] for b in base])
        assert ranks[0]["lr_per_step"][k] == ranks[1]["lr_per_step"][k]  # one shared base


@pytest.mark.parametrize("nproc", [2, 4])
def test_local_mode_no_gradient_collective_and_exact_converges(tmp_path, nproc):
    ranks, _ = run(
        tmp_path,
        "local",
        nproc,
        "--hdet",
        "--hdet_gradient_sync",
        "local",
        "--hdet_lr_spread",
        "0.5",
        "--hdet_explore_until",  # the spread at every step (the default ends it halfway)
        "1",
        "--hdet_sync_interval",
        "3",
        "--max_steps",
        "6",
        "--save_strategy",
        "no",
        "--logging_steps",
        "1000",
    )
    for r in ranks:
        assert not r["is_ddp"]
        # Inside the six training steps the only collectives are the two converges (steps 3 and 6).
        assert r["collectives"] == {"gloo:all_reduce": 2}, r["collectives"]
        assert [t["step"] for t in r["engine"]["trajectory"]] == [3, 6]
    check_lrs_follow_base_times_multiplier(ranks, nproc, 0.5)
    for step in (1, 2, 4, 5):  # between syncs the replicas differ
        assert not torch.equal(ranks[0]["params_mid"][step], ranks[1]["params_mid"][step])
    for step in (3, 6):  # after a converge they are bit-identical
        for r in ranks[1:]:
            assert torch.equal(r["params_after"][step], ranks[0]["params_after"][step])


def test_shared_mode_keeps_ddp_gradient_allreduce(tmp_path):
    ranks, _ = run(
        tmp_path,
        "shared",
        2,
        "--hdet",
        "--hdet_gradient_sync",
        "shared",
        "--hdet_lr_spread",
        "0.5",
        "--hdet_explore_until",  # the spread at every step (the default ends it halfway)
        "1",
        "--hdet_sync_interval",
        "3",
        "--max_steps",
        "6",
        "--save_strategy",
        "no",
        "--logging_steps",
        "1000",
    )
    for r in ranks:
        assert r["is_ddp"]
        assert r["collectives"].get("gloo:all_reduce", 0) >= 6 + 2, r["collectives"]
    check_lrs_follow_base_times_multiplier(ranks, 2, 0.5)
    assert not torch.equal(ranks[0]["params_mid"][2], ranks[1]["params_mid"][2])  # different step sizes
    assert torch.equal(ranks[0]["params_after"][3], ranks[1]["params_after"][3])


def test_hdet_off_is_exactly_the_plain_trainer(tmp_path):
    flags = ["--max_steps", "5", "--save_strategy", "no", "--logging_steps", "1"]
    hdet_off, _ = run(tmp_path, "off", 2, *flags)
    plain, _ = run(tmp_path, "plain", 2, "--plain_trainer", *flags)
    losses = [[h["loss"] for h in r["log_history"] if "loss" in h] for r in (hdet_off[0], plain[0])]
    assert len(losses[0]) == 5 and losses[0] == losses[1]
    assert torch.equal(hdet_off[0]["final"], plain[0]["final"])
    assert hdet_off[0]["is_ddp"] and hdet_off[0]["engine"] is None


# The default (shared) and local mode with the DiLoCo outer step, whose anchor and momentum must resume too.
OUTER = ["--hdet_gradient_sync", "local", "--hdet_outer_lr", "0.7", "--hdet_outer_momentum", "0.9"]


# The default (shared, auto-LR) except that the early phase lasts to step 6 of 8 (by default it would end at
# step 2, before the controller acts): until then intervals alternate fan-out and offsets and the controller
# moves by the lower vote (its votes resume too), then the horizon alone; the save at step 3 lands inside an
# offsets interval. One run covers both phases of the default, with a vote at every converge (T 2 is shorter than
# the default interval: by default the controller would vote every 2nd converge, the VOTES case).
EARLY = ["--hdet_comparison_horizon_start", "0.75", "--hdet_controller_time_scale", "run"]
# The default (--hdet_controller_time_scale vote): T 2 in an 8-step run votes every 2nd converge (at step 4, the last
# before exploration ends), so the save at step 3 lands between a converge and the vote: the resumed run must
# continue the vote's window (its loss sums and the mark of the converge at step 2).
VOTES: list[str] = []


@pytest.mark.parametrize(
    "extra", [EARLY, OUTER, VOTES], ids=["default_both_phases", "local_outer", "votes_across_converges"]
)
def test_resume_mid_run_reproduces_the_uninterrupted_run(tmp_path, extra):
    # save_steps=3 is not on the sync grid (T=2): the save forces a converge, in both runs alike.
    flags = [
        *extra,
        "--hdet",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "2",
        "--max_steps",
        "8",
        "--save_strategy",
        "steps",
        "--save_steps",
        "3",
        "--logging_steps",
        "1000",
    ]
    full, full_dir = run(tmp_path, "full", 2, *flags)
    checkpoint = full_dir / "out" / "checkpoint-3"
    assert (checkpoint / "hdet_state_rank0.pt").is_file() and (checkpoint / "hdet_state_rank1.pt").is_file()
    resumed, _ = run(tmp_path, "resumed", 2, *flags, "--resume_from_checkpoint", str(checkpoint))
    for a, b in zip(full, resumed):
        assert torch.equal(a["final"], b["final"])
        assert a["lr_per_step"] == b["lr_per_step"]
        assert a["engine"]["trajectory"] == b["engine"]["trajectory"]
        assert a["lrs"][3:] == b["lrs"]  # the resumed run ran steps 4..8 at the same LRs
    assert any(t["controller_active"] for t in full[0]["engine"]["trajectory"])
    if extra is VOTES:  # one vote at step 4 (the controller moved there), none at the converge of step 2
        trajectory = {t["step"]: t for t in full[0]["engine"]["trajectory"]}
        assert trajectory[4]["controller_active"] and not trajectory[2]["controller_active"]
        assert trajectory[2]["multipliers"] == trajectory[4]["multipliers"]  # held until the vote
    if extra == EARLY:  # both kinds of interval voted, and the resumed run kept the votes
        votes = full[0]["engine"]["paired_votes"]
        assert None not in votes.values() and votes == resumed[0]["engine"]["paired_votes"]
    if extra == OUTER:
        # The outer step keeps the replicas bit-identical after every converge.
        for step in (2, 4, 6, 8):
            assert torch.equal(full[0]["params_after"][step], full[1]["params_after"][step])
        # The outer steps ran on real outer gradients (anchor - average != 0), identically on both ranks.
        momenta = [r["engine"]["outer_momenta"] for r in full]
        assert any(float(m.abs().max()) > 0 for m in momenta[0])
        assert all(torch.equal(a, b) for a, b in zip(*momenta))


def test_bf16_gradient_accumulation_clipping_and_eval(tmp_path):
    ranks, out = run(
        tmp_path,
        "bf16",
        2,
        "--hdet",
        "--hdet_sync_interval",
        "2",
        "--max_steps",
        "4",
        "--bf16",
        "--gradient_accumulation_steps",
        "2",
        "--max_grad_norm",
        "0.5",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "3",
        "--with_eval",
        "--save_strategy",
        "no",
        "--logging_steps",
        "1",
    )
    r = ranks[0]
    assert [t["step"] for t in r["engine"]["trajectory"]] == [2, 4]  # optimizer steps, not micro-batches
    assert len(r["lrs"]) == 4
    losses = [h["loss"] for h in r["log_history"] if "loss" in h]
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(losses)))
    evals = [h for h in r["log_history"] if "eval_loss" in h]
    assert 3 in [h["step"] for h in evals] and all(
        torch.isfinite(torch.tensor(h["eval_loss"])) for h in evals
    )
    # Evaluation at step 3 (mid-interval) averaged the replicas first.
    assert torch.equal(ranks[0]["params_after"][3], ranks[1]["params_after"][3])
    assert any("hdet/base_lr" in h for h in r["log_history"])


def test_probe_signal_and_synchronous_warmup(tmp_path):
    ranks, _ = run(
        tmp_path,
        "probe",
        2,
        "--hdet",
        "--hdet_gradient_sync",
        "local",
        "--hdet_sync_interval",
        "3",
        "--max_steps",
        "6",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "0",
        "--hdet_controller_signal",
        "probe",
        "--hdet_explore_until",  # the controller acts at every converge (the default stops it halfway)
        "1",
        "--hdet_sync_warmup_steps",
        "2",
        "--with_eval",
        "--save_strategy",
        "no",
        "--logging_steps",
        "1000",
    )
    trajectory = ranks[0]["engine"]["trajectory"]
    for sync in trajectory:
        probes = sync["probe_losses"]
        assert len(probes) == 2 and all(torch.isfinite(torch.tensor(probes)))
        assert probes[0] != probes[1]  # each replica scored on the same batch, with its own weights
        assert sync["controller_active"] and sync["weights"]
    # Gradients all-reduced at steps 1 and 2 (synchronous warm-up), then only the converges at 3 and 6.
    assert ranks[0]["collectives"] == {"gloo:all_reduce": 4}, ranks[0]["collectives"]


def test_cooldown_signal_scores_each_replica_and_leaves_training_untouched(tmp_path):
    """The cool-down runs on copies, with no gradient sync: with a controller that cannot move (lambda 0) the
    run is bit-identical to the train-loss signal's, with the same collectives; the scores are per replica."""
    flags = [
        "--hdet", "--hdet_sync_interval", "3", "--max_steps", "6", "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps", "0", "--hdet_controller_lr", "0", "--save_strategy", "no",
        "--logging_steps", "1000", "--hdet_explore_until", "1",  # scored at every converge
        # Step-size intervals only: in a horizon interval after the first converge the offsets are still zero
        # (no direction yet), so both replicas would rightly cool down alike from the base LR.
        "--hdet_comparison_horizon", "0",
    ]  # fmt: skip
    cooled, _ = run(tmp_path, "cool", 2, *flags, "--hdet_controller_signal", "cooldown_probe",
                    "--hdet_cooldown_steps", "2")  # fmt: skip
    plain, _ = run(tmp_path, "plain", 2, *flags, "--hdet_controller_signal", "train_loss")
    for a, b in zip(cooled, plain):
        assert torch.equal(a["final"], b["final"])
        assert a["collectives"] == b["collectives"]
    assert torch.equal(cooled[0]["final"], cooled[1]["final"])
    trajectory = cooled[0]["engine"]["trajectory"]
    assert [t["step"] for t in trajectory] == [3, 6]
    for sync in trajectory:
        probes = sync["probe_losses"]
        assert len(probes) == 2 and all(torch.isfinite(torch.tensor(probes)))
        assert probes[0] != probes[1]  # each replica cooled down from its own weights and LR
