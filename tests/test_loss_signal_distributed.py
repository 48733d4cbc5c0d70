"""The controller compares replicas on their per-token mean loss, also with ragged labels (2 gloo processes)."""

import pytest
from distributed import load_ranks, torchrun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("mode", "accumulation", "mean_loss_model"),
    [("shared", 1, False), ("shared", 2, False), ("local", 1, False), ("shared", 2, True)],
)
def test_engine_sees_true_per_token_means_with_ragged_labels(tmp_path, mode, accumulation, mean_loss_model):
    """``mean_loss_model``: forward takes **kwargs but the loss ignores num_items_in_batch (BERT's heads)."""
    steps, interval = 6, 3
    torchrun(
        "loss_signal_worker.py",
        2,
        [
            "--output_dir", str(tmp_path / "out"), "--dump_dir", str(tmp_path / "dump"),
            "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", str(accumulation),
            "--max_steps", str(steps), "--learning_rate", "1e-2", "--use_cpu", "--report_to", "none",
            "--save_strategy", "no", "--disable_tqdm", "true", "--logging_steps", "1000",
            "--hdet", "--hdet_gradient_sync", mode, "--hdet_sync_interval", str(interval),
            "--hdet_lr_spread", "0.5", "--mean_loss_model", str(mean_loss_model),
        ],
    )  # fmt: skip
    ranks = load_ranks(tmp_path / "dump", 2)
    counts = [[count for _, count in r["steps"]] for r in ranks]
    assert counts[0] != counts[1], "the data must be ragged across ranks for this test to mean anything"
    if accumulation == 1 and not mean_loss_model:
        assert counts[0][1] == 0, "rank 0's second step has no labelled token"
    trajectory = ranks[0]["trajectory"]
    assert [entry["step"] for entry in trajectory] == [3, 6]
    for entry in trajectory:
        window = range(entry["step"] - interval, entry["step"])
        for rank, r in enumerate(ranks):
            total = sum(r["steps"][k][0] for k in window)
            items = sum(r["steps"][k][1] for k in window)
            assert entry["losses"][rank] == pytest.approx(total / items, rel=1e-5)
    for r in ranks:
        # The Trainer's own switch follows the model: scaling a plain mean by the process count is off.
        assert r["trainer_scales_loss"] is (not mean_loss_model)
        # A step with nothing labelled is skipped, not a divergence, and trains nothing into NaN.
        assert r["divergence_events"] == []
        assert r["final_finite"]
