"""The start race under torchrun (2 gloo processes, HDETTrainer, a tiny Llama): what it changes and what it leaves."""

import pytest
import torch
from distributed import load_ranks, torchrun

pytestmark = pytest.mark.slow

COMMON = [
    "--per_device_train_batch_size", "4", "--report_to", "none", "--use_cpu", "--seed", "0", "--disable_tqdm",
    "true", "--hdet", "--hdet_auto_lr", "--hdet_sync_interval", "3", "--max_steps", "6", "--save_strategy", "no",
    "--logging_steps", "1000", "--with_eval",
]  # fmt: skip
# One share for every copy, a quarter of the global batch: the race before session 56 (BENCHMARKS.md item 58).
QUARTER = ["--hdet_start_race_batch_share", "0.25", "--hdet_start_race_lower_batch_share", "0.25"]


def run(tmp_path, name, *flags, nproc=2, profile=True):
    out = tmp_path / name
    args = ["--output_dir", str(out / "out"), "--dump_dir", str(out / "dump"), *COMMON, *flags]
    args += ["--profile_race"] if profile else []
    torchrun("trainer_worker.py", nproc, args)
    return load_ranks(out / "dump", nproc)


def race_record(rank):
    return rank["engine"]["extra"]["start_race"]


def test_a_race_that_does_not_raise_leaves_the_run_bit_identical(tmp_path):
    plain = run(tmp_path, "plain", "--learning_rate", "1e-2")
    raced = run(
        tmp_path, "raced", "--learning_rate", "1e-2", "--hdet_start_race_steps", "4",
        "--hdet_start_race_significance", "1e9",
    )  # fmt: skip
    record = race_record(raced[0])
    assert record == race_record(raced[1])  # one decision, taken alike on every rank
    assert record["scale"] == 1.0 and record["steps"] == 4
    assert record["probe_size"] == 16  # the eval set's 16 examples: fewer than the 128 the race asks for
    assert record["multipliers"] == pytest.approx([1.0, 10 ** (1 / 3), 10 ** (2 / 3), 10.0])
    # The copies raced apart: each trained at its own LR (two per replica, one after the other), so their probe
    # losses differ.
    assert len(set(record["probe_losses"])) == 4
    # The race's only collective is the one that gathers the probe losses: no gradient all-reduce while racing.
    for rank in raced:
        assert rank["race_collectives"] == {"gloo:all_reduce": 1}, rank["race_collectives"]
    # Weights, optimizer state and random streams were put back: the run is the one without a race, bit for bit.
    for p, r in zip(plain, raced):
        assert torch.equal(p["final"], r["final"])
        assert p["lr_per_step"] == r["lr_per_step"]
    assert "start_race" not in plain[0]["engine"]["extra"]


def test_a_race_from_far_below_starts_the_run_at_the_winner(tmp_path):
    plain = run(tmp_path, "plain", "--learning_rate", "1e-4")
    raced = run(tmp_path, "raced", "--learning_rate", "1e-4", "--hdet_start_race_steps", "8")
    record = race_record(raced[0])
    assert record["winner"] == 3 and record["scale"] == 10.0 and record["multipliers"][3] == pytest.approx(10.0)
    assert record["gap"] >= 2.0 * record["standard_error"] > 0
    assert record["start_came_last"] and record["falls_to_winner"]
    assert record["raise_to"] == "largest"  # the default reaches the rule through the Trainer's config
    # The copy one step below the start must do worse than the start: by default the two race on a quarter of the
    # global batch (half of one process's batch here), the candidates on half (BENCHMARKS.md item 58).
    assert record["below_multiplier"] == pytest.approx(10 ** (-1 / 3))
    assert record["below_probe_loss"] > record["lower_start_probe_loss"]
    assert (record["copy_batch"], record["lower_copy_batch"]) == (4, 2)
    # The outcome is logged at step 0, where report_to backends see it.
    logged = [h for h in raced[0]["log_history"] if "hdet/start_race_scale" in h]
    assert len(logged) == 1 and logged[0]["hdet/start_race_scale"] == 10.0 and logged[0]["step"] == 0
    probe_keys = sorted(k for k in logged[0] if "probe_loss" in k)
    assert probe_keys == ["hdet/start_race_probe_loss_below"] + [
        f"hdet/start_race_probe_loss_candidate{c}" for c in range(4)
    ] + ["hdet/start_race_probe_loss_initial", "hdet/start_race_probe_loss_lower_start"]
    assert logged[0]["hdet/start_race_probe_loss_lower_start"] == pytest.approx(record["lower_start_probe_loss"])
    # The initial weights' probe loss: what every copy started from, above every raced copy's here (far below).
    assert logged[0]["hdet/start_race_probe_loss_initial"] == pytest.approx(record["initial_probe_loss"])
    assert record["initial_probe_loss"] > max(record["probe_losses"])
    probe_keys = [k for k in probe_keys if "candidate" in k]
    assert [logged[0][k] for k in probe_keys] == pytest.approx(record["probe_losses"])
    assert logged[0]["hdet/start_race_probe_loss_below"] == pytest.approx(record["below_probe_loss"])
    # The base LR starts at 10x the schedule (both runs: the same schedule, controller not yet moving).
    assert raced[0]["lr_per_step"][0] == pytest.approx([10 * x for x in plain[0]["lr_per_step"][0]])
    assert not torch.equal(plain[0]["final"], raced[0]["final"])


def assert_groups_race_as_one_rank_on_their_batch(grouped_ranks, alone, rounds, steps):
    """Ranks that trained each copy in groups, each on its share of the copy's batch, took the decision a rank alone
    on the whole batch took: one decision alike on every rank, the same probe losses up to float rounding (the mean of
    the members' mean gradients is the whole batch's), and besides the gather of the probe losses one gradient average
    per race step and round, inside each group only."""
    grouped = race_record(grouped_ranks[0])
    assert all(race_record(rank) == grouped for rank in grouped_ranks)
    assert grouped["probe_losses"] == pytest.approx(alone["probe_losses"], rel=1e-5, abs=1e-6)
    assert grouped["below_probe_loss"] == pytest.approx(alone["below_probe_loss"], rel=1e-5, abs=1e-6)
    assert grouped["scale"] == alone["scale"] and len(set(grouped["probe_losses"])) == 4
    for rank in grouped_ranks:
        assert rank["race_collectives"] == {"gloo:all_reduce": 1 + rounds * steps}, rank["race_collectives"]


def test_the_decision_does_not_depend_on_the_number_of_replicas(tmp_path):
    # The same global batch of 8 on 2 processes (4 each) and on 4 (2 each), the default shares (BENCHMARKS.md item
    # 58): the candidates on half of it (one process's 4 examples at 2, a pair's 2 + 2 at 4, their gradients
    # averaged: the same mean gradient up to float rounding), the start and the copy below it on a quarter (2
    # examples: half of one process's batch at 2, one process's at 4: the same computation, bit for bit).
    flags = ["--learning_rate", "1e-3", "--hdet_start_race_steps", "3"]
    two_ranks = run(tmp_path, "two", *flags)
    four_ranks = run(tmp_path, "four", *flags, "--per_device_train_batch_size", "2", nproc=4)
    two, four = race_record(two_ranks[0]), race_record(four_ranks[0])
    assert all(race_record(rank) == two for rank in two_ranks) and all(race_record(r) == four for r in four_ranks)
    assert four["probe_losses"] == pytest.approx(two["probe_losses"], rel=1e-5, abs=1e-6)
    assert len(set(two["probe_losses"])) == 4  # four different copies
    assert (four["below_probe_loss"], four["lower_start_probe_loss"]) == (
        two["below_probe_loss"],
        two["lower_start_probe_loss"],
    )
    # The pair's start trained on another batch than the candidates' start: another copy, another loss.
    assert two["lower_start_probe_loss"] != two["probe_losses"][0]
    assert two["scale"] == four["scale"] and two["lowered"] == four["lowered"]
    assert (two["copy_batch"], two["lower_copy_batch"]) == (four["copy_batch"], four["lower_copy_batch"]) == (4, 2)
    # At 2 processes one gather; at 4 also a gradient average per step in each of the candidates' 2 rounds.
    assert all(rank["race_collectives"] == {"gloo:all_reduce": 1} for rank in two_ranks)
    assert all(rank["race_collectives"] == {"gloo:all_reduce": 1 + 2 * 3} for rank in four_ranks)


def test_from_8_processes_pairs_of_ranks_race_each_copy_on_a_quarter_of_the_global_batch(tmp_path):
    # One share for every copy (a quarter: the race as it was before session 56). The same global batch of 16 on 4
    # processes (4 each) and on 8 (2 each). At 4 each copy trains on one replica's batch of 4; at 8 two ranks train
    # each copy together on 2 examples each, their gradients averaged: the same 4 examples per step and the same
    # mean gradient, so the same probe losses up to float rounding and the same decision. Before session 48 a copy on
    # 8 processes trained on one replica's 2 examples (BENCHMARKS.md item 50).
    flags = ["--learning_rate", "1e-3", "--hdet_start_race_steps", "3", *QUARTER]
    four = race_record(run(tmp_path, "four", *flags, nproc=4)[0])
    eight_ranks = run(tmp_path, "eight", *flags, "--per_device_train_batch_size", "2", nproc=8)
    # 5 copies over 4 pairs: two rounds of 3 steps.
    assert_groups_race_as_one_rank_on_their_batch(eight_ranks, four, rounds=2, steps=3)
    assert four["lower_start_probe_loss"] is None  # one share: the candidates' start decides both ways
    # Without the pairs (one rank's 2 examples per copy step) the copies train on other batches: the test can fail.
    alone = race_record(run(tmp_path, "alone", *flags, "--per_device_train_batch_size", "2", nproc=4)[0])
    assert alone["probe_losses"] != pytest.approx(four["probe_losses"], rel=1e-5, abs=1e-6)


def test_on_half_the_global_batch_pairs_of_ranks_race_each_copy_at_4_processes(tmp_path):
    # One share for every copy, half. The same global batch of 8 on 2 processes (4 each) and on 4 (2 each): one
    # replica's 4 examples at 2 processes, a pair's 2 + 2 at 4, their gradients averaged. The same examples per
    # step and the same mean gradient, so the same probe losses up to float rounding and the same decision.
    flags = ["--learning_rate", "1e-3", "--hdet_start_race_steps", "3", "--hdet_start_race_lower_batch_share", "0.5"]
    two = race_record(run(tmp_path, "two", *flags)[0])
    four_ranks = run(tmp_path, "four", *flags, "--per_device_train_batch_size", "2", nproc=4)
    # 5 copies over 2 pairs: three rounds of 3 steps.
    assert_groups_race_as_one_rank_on_their_batch(four_ranks, two, rounds=3, steps=3)
    assert two["copy_batch"] == race_record(four_ranks[0])["copy_batch"] == 4  # the record says what a copy trained on
    # On a quarter (each rank alone on its 2 examples) the copies train on other batches: the test can fail.
    quarter = run(tmp_path, "quarter", *flags[:4], *QUARTER, "--per_device_train_batch_size", "2", nproc=4)
    assert race_record(quarter[0])["probe_losses"] != pytest.approx(two["probe_losses"], rel=1e-5, abs=1e-6)
    assert race_record(quarter[0])["copy_batch"] == 2


def test_a_race_step_takes_the_runs_batch_with_gradient_accumulation(tmp_path):
    # With --gradient_accumulation_steps 2 and a per-device batch of 2, a race step trains on the replica's batch of 4
    # (two micro-batches of 2, their mean losses averaged), as one of 4 without accumulation does: the same examples,
    # the same mean gradient, so the same probe losses up to float rounding. Before session 45 the race stepped on the
    # micro-batch alone (half the batch, twice as many steps' worth of different examples).
    flags = ["--learning_rate", "1e-3", "--hdet_start_race_steps", "3"]
    whole = race_record(run(tmp_path, "whole", *flags, profile=False)[0])
    accumulated = race_record(
        run(tmp_path, "accumulated", *flags, "--per_device_train_batch_size", "2",
            "--gradient_accumulation_steps", "2", profile=False)[0]
    )  # fmt: skip
    assert accumulated["probe_losses"] == pytest.approx(whole["probe_losses"], rel=1e-5, abs=1e-6)
    micro = race_record(run(tmp_path, "micro", *flags, "--per_device_train_batch_size", "2", profile=False)[0])
    assert micro["probe_losses"] != pytest.approx(whole["probe_losses"], rel=1e-5, abs=1e-6)


def test_without_an_eval_set_the_race_scores_on_a_quarter_of_a_small_train_set_and_a_set_size_as_given(tmp_path):
    # 200 train examples and no eval set: unset --hdet_start_race_probe_size takes min(128, max(32, 200 // 4)) = 50
    # of them (`probe_sample.race_probe_size`), on every rank alike; a size the user sets is not capped.
    flags = ["--learning_rate", "1e-2", "--hdet_start_race_steps", "3", "--with_eval", "false", "--num_samples", "200"]
    capped = run(tmp_path, "capped", *flags, profile=False)
    record = race_record(capped[0])
    assert record == race_record(capped[1]) and record["probe_size"] == 50
    assert len(record["probe_losses"]) == 4  # it raced
    given = run(tmp_path, "given", *flags, "--hdet_start_race_probe_size", "80", profile=False)
    assert race_record(given[0])["probe_size"] == race_record(given[1])["probe_size"] == 80
    # Scored on other examples (and trained on what the larger probe leaves of the set), the copies' losses differ.
    assert race_record(given[0])["probe_losses"] != record["probe_losses"]


def test_unset_the_race_runs_on_runs_long_enough(tmp_path):
    # The default (no flag) races DEFAULT_START_RACE_STEPS (60) steps on a run of 120 steps or more; the 6-step runs
    # above show that a shorter one does not race ("start_race" absent from the plain runs' records).
    raced = run(tmp_path, "default", "--learning_rate", "1e-4", "--max_steps", "120", profile=False)
    record = race_record(raced[0])
    assert record["steps"] == 60 and record == race_record(raced[1])
    assert record["scale"] > 1.0  # far below: the default's race raises, as the 8-step one above


def test_a_start_that_collapses_is_lowered_one_step_by_default(tmp_path):
    # At LR 1 the tiny Llama's start copy ends above the initial weights' probe loss (it diverges) while the copy
    # one step below (x 0.464) learns: the run starts there (unset --hdet_start_race_lowers). With
    # --hdet_start_race_lowers false the same race leaves the start alone. 16 steps: in 8 the copy below removes 9 %
    # of the initial loss, under the tenth a lowering needs (`start_race.LOWER_MIN_PROGRESS`); in 16, 30 %.
    flags = ["--learning_rate", "1.0", "--hdet_start_race_steps", "16"]
    lowered = run(tmp_path, "lowered", *flags)
    record = race_record(lowered[0])
    assert record == race_record(lowered[1])
    assert record["lowered"] and record["scale"] == pytest.approx(10 ** (-1 / 3))
    assert record["probe_losses"][0] > record["initial_probe_loss"] > record["below_probe_loss"]
    assert record["below_probe_loss"] < 0.9 * record["initial_probe_loss"]
    # The copy below is raced with the candidates (5 copies, 3 rounds on 2 replicas): still one collective.
    for rank in lowered:
        assert rank["race_collectives"] == {"gloo:all_reduce": 1}, rank["race_collectives"]
    logged = next(h for h in lowered[0]["log_history"] if "hdet/start_race_scale" in h)
    assert logged["hdet/start_race_probe_loss_initial"] == pytest.approx(record["initial_probe_loss"])
    kept = run(tmp_path, "kept", *flags, "--hdet_start_race_lowers", "false", profile=False)
    assert race_record(kept[0])["scale"] == 1.0 and not race_record(kept[0])["lowered"]
    assert race_record(kept[0])["below_probe_loss"] is None  # raise only: no copy below when it does not raise
    assert lowered[0]["lr_per_step"][0] == pytest.approx([x * record["scale"] for x in kept[0]["lr_per_step"][0]])


def test_a_race_through_a_compute_loss_that_gathers_runs_in_step_and_leaves_its_totals(tmp_path):
    # TRL's SFTTrainer gathers across processes in every compute_loss call. On one share, 5 copies on 2 replicas
    # leave replica 1 a third round with no copy of its own; a raise-only race that would raise races the start and
    # the copy below it (by default on their own share) after the candidates: every replica must train and score as
    # often as the others, or the race hangs (it did, on TRL's SFT script, before session 43's fix). The race's calls
    # must not stay in the trainer's running totals either.
    flags = ["--hdet_start_race_steps", "3", "--gathering_loss"]
    one_share = ["--hdet_start_race_lower_batch_share", "0.5"]
    lowering = run(tmp_path, "lowering", "--learning_rate", "1e-2", *flags, *one_share, profile=False)
    raising = run(tmp_path, "raising", "--learning_rate", "1e-4", *flags, "--hdet_start_race_lowers", "false",
                  profile=False)  # fmt: skip
    for ranks in (lowering, raising):
        record = race_record(ranks[0])
        assert record == race_record(ranks[1]) and record["below_probe_loss"] is not None
        for rank in ranks:
            # The 6 training steps' calls only, each gathering 1 from each of 2 processes.
            assert rank["train_loss_calls"] == [2] * 6 and rank["total_train_tokens"] == 12
    assert race_record(raising[0])["scale"] > 1.0  # it raised, so it raced the copy below on its own
