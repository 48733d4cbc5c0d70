"""HDETTrainer in one process (cheap edge cases; the distributed behaviour is in test_trainer_distributed)."""

import json
import logging

import pytest
import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM

from hdet_hf import HDETTrainer, HDETTrainingArguments


def tiny_trainer(tmp_path, **kwargs):
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=32,
            hidden_size=8,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    )
    ids = torch.randint(0, 32, (32, 8)).tolist()
    args = HDETTrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        per_device_train_batch_size=4,
        hdet=True,
        **kwargs,
    )
    return HDETTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({"input_ids": ids, "labels": ids})
    )


@pytest.mark.filterwarnings("ignore:HDET runs on a single process")
@pytest.mark.parametrize("warmup_steps", [1, 2])
def test_short_one_cycle_warmup_and_summary_of_the_steps_that_ran(tmp_path, warmup_steps):
    trainer = tiny_trainer(tmp_path, max_steps=10, warmup_steps=warmup_steps, hdet_sync_interval=5)
    trainer.train()
    schedule = json.loads((tmp_path / "hdet_schedule.json").read_text())
    assert len(schedule["lr_per_step"]) == 10
    assert schedule["summary"]["lr"]["final"] == schedule["lr_per_step"][-1][0]
    assert [t["step"] for t in schedule["trajectory"]] == [5, 10]


@pytest.mark.filterwarnings("ignore:HDET runs on a single process")
def test_trainer_push_to_hub_sends_schedule_and_plot_and_replay_reproduces_it(tmp_path, caplog):
    """`Trainer.push_to_hub` through a fake Hub (HTTP only): JSON, PNG and the card go up; the downloaded
    schedule replays the recorded base LRs exactly on a fresh single-device optimizer."""
    from fake_hub import fake_hub

    from hdet_hf import HDETSchedule

    caplog.set_level(logging.INFO, logger="hdet_hf.trainer")
    with fake_hub() as hub:
        out = tmp_path / "out"
        trainer = tiny_trainer(
            out,
            max_steps=12,
            hdet_sync_interval=4,
            hdet_auto_lr=True,
            hdet_auto_lr_warmup_steps=0,
            push_to_hub=True,
            hub_model_id="hdet-tiny",
            hub_token=hub.token,
        )
        trainer.train()
        trainer.push_to_hub()
        repo_id = f"{hub.user}/hdet-tiny"
        sent = hub.files(repo_id)
        for name in ("hdet_schedule.json", "hdet_schedule.png"):
            assert sent[name] == (out / name).read_bytes()
        card = sent["README.md"].decode()
        assert "## HDET schedule" in card and "- hdet" in card
        schedule = HDETSchedule.from_pretrained(repo_id, cache_dir=tmp_path / "cache", token=hub.token)

    recorded = schedule.lr_per_step
    assert len(recorded) == 12 and len(schedule.trajectory) == 3
    # The LR the controller settled on is named in the card and in the end-of-training log.
    found = schedule.final_scale()
    assert found is not None and f"The controller ended at {found:.3g}x the configured learning rate" in card
    logged = [r.getMessage() for r in caplog.records if "the controller ended at" in r.getMessage()]
    assert logged == [
        f"HDET: the controller ended at {found:.3g}x --learning_rate ({trainer.args.learning_rate * found:.3g}): "
        "a plain run at that LR trains at the peak it settled on (BENCHMARKS.md, 'The controller', reading 43, "
        "says how close to a sweep's best LR that was per task)."
    ]
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW([{"params": [model.weight]}, {"params": [model.bias]}], lr=1.0)
    replay = schedule.as_lr_scheduler(optimizer)
    for step in range(12):
        assert [g["lr"] for g in optimizer.param_groups] == recorded[step]
        optimizer.step()
        replay.step()


@pytest.mark.filterwarnings("ignore:HDET runs on a single process")
@pytest.mark.parametrize("log_level", ["info", "warning"])
def test_hdet_log_lines_follow_the_trainers_verbosity(tmp_path, log_level):
    """The Trainer sets transformers' verbosity from --log_level; our INFO lines (the start race's decision, why no
    race ran) take the same level, so HF's example scripts show them on the main process and hide them elsewhere."""
    from transformers.utils import logging as transformers_logging

    before = transformers_logging.get_verbosity()
    try:
        tiny_trainer(tmp_path, max_steps=2, log_level=log_level)
        expected = logging.INFO if log_level == "info" else logging.WARNING
        assert transformers_logging.get_verbosity() == expected
        assert logging.getLogger("hdet_hf").getEffectiveLevel() == expected
        assert logging.getLogger("hdet_hf.trainer_race").isEnabledFor(logging.INFO) == (log_level == "info")
    finally:
        transformers_logging.set_verbosity(before)
        logging.getLogger("hdet_hf").setLevel(logging.NOTSET)


@pytest.mark.filterwarnings("ignore:HDET runs on a single process")
def test_a_level_the_user_gave_our_logger_is_kept(tmp_path):
    """A user who set the "hdet_hf" logger's level keeps it whatever --log_level says; a level the Trainer set before
    follows the next Trainer's verbosity."""
    from transformers.utils import logging as transformers_logging

    before = transformers_logging.get_verbosity()
    hdet_logger = logging.getLogger("hdet_hf")
    try:
        tiny_trainer(tmp_path / "first", max_steps=2, log_level="info")
        assert hdet_logger.level == logging.INFO
        tiny_trainer(tmp_path / "second", max_steps=2, log_level="warning")
        assert hdet_logger.level == logging.WARNING  # ours: it follows
        hdet_logger.setLevel(logging.DEBUG)
        tiny_trainer(tmp_path / "third", max_steps=2, log_level="warning")
        assert hdet_logger.level == logging.DEBUG  # the user's: kept
    finally:
        transformers_logging.set_verbosity(before)
        hdet_logger.setLevel(logging.NOTSET)
