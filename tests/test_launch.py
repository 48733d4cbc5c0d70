"""`hdet_hf.launch`: unmodified stock scripts (tests/stock_scripts) run with HDET switched on by flags."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
from pathlib import Path

import pytest
import transformers
from accelerate.state import AcceleratorState
from distributed import TRAINER_ARGS
from transformers import HfArgumentParser

from hdet_hf import HDETTrainer, HDETTrainingArguments, launch
from hdet_hf.testing.processes import offline_cpu_env, torchrun_command

STOCK = Path(__file__).parent / "stock_scripts"
ORIGINALS = {
    name: getattr(transformers, name)
    for name in ("Trainer", "TrainingArguments", "Seq2SeqTrainer", "Seq2SeqTrainingArguments")
}


@pytest.fixture
def clean_accelerate_state():
    """In-process runs may build a Trainer, which fixes Accelerate's process-wide state (device, CPU)."""
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


# ----------------------------------------------------------------------------- in-process: the launcher
def test_help_and_no_arguments_print_usage(capsys):
    assert launch.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m hdet_hf.launch")
    assert "torchrun --nproc_per_node 4 -m hdet_hf.launch train.py" in out
    assert "accelerate launch --multi_gpu --num_processes 4 -m hdet_hf.launch train.py" in out
    assert launch.main([]) == 2
    assert "usage: python -m hdet_hf.launch" in capsys.readouterr().err


def test_missing_script_is_a_clear_error(capsys, tmp_path):
    missing = tmp_path / "train.py"
    assert launch.main([str(missing), "--hdet"]) == 2
    assert f"error: training script not found: {missing}" in capsys.readouterr().err
    assert launch.main(["train", "--hdet"]) == 2
    assert "a module name? pass the script's path" in capsys.readouterr().err


def test_importing_changes_nothing_and_patch_is_undone():
    assert {name: getattr(transformers, name) for name in ORIGINALS} == ORIGINALS
    with launch.patch_transformers():
        from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, Trainer, TrainingArguments

        assert Trainer is HDETTrainer and transformers.trainer.Trainer is HDETTrainer
        assert TrainingArguments is HDETTrainingArguments is transformers.training_args.TrainingArguments
        assert Seq2SeqTrainer is launch.HDETSeq2SeqTrainer is transformers.trainer_seq2seq.Seq2SeqTrainer
        assert issubclass(Seq2SeqTrainer, ORIGINALS["Seq2SeqTrainer"])
        assert Seq2SeqTrainingArguments.__name__ == Seq2SeqTrainingArguments.__qualname__
        assert Seq2SeqTrainingArguments.__name__ == "HDETSeq2SeqTrainingArguments"
        (args,) = HfArgumentParser(Seq2SeqTrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", "out", "--hdet", "--hdet_sync_interval", "3", "--predict_with_generate"]
        )
        assert args.hdet and args.hdet_config.sync_interval == 3 and args.predict_with_generate
        # The Trainer saves its arguments with torch.save (training_args.bin): they must pickle.
        assert type(pickle.loads(pickle.dumps(args))) is Seq2SeqTrainingArguments
    assert {name: getattr(transformers, name) for name in ORIGINALS} == ORIGINALS
    assert transformers.trainer.Trainer is ORIGINALS["Trainer"]
    assert (
        transformers.training_args_seq2seq.Seq2SeqTrainingArguments is ORIGINALS["Seq2SeqTrainingArguments"]
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--hdet"], True),
        (["--hdet", "--hdet_sync_interval", "2"], True),
        (["--hdet=true"], True),
        (["--hdet", "no"], False),
        (["--hdet_lr_spread", "0.3"], False),
        (["--output_dir", "out"], False),
    ],
)
def test_hdet_requested(args, expected):
    assert launch.hdet_requested(args) is expected


def test_script_without_trainer_fails_only_with_hdet(capsys, tmp_path, clean_accelerate_state):
    script = str(STOCK / "no_trainer.py")
    assert launch.main([script, "--output_dir", str(tmp_path)]) == 0
    # Run as `python no_trainer.py` would: the script's folder first on sys.path.
    assert f"custom loop done with HDETTrainingArguments; sys.path[0]={STOCK}" in capsys.readouterr().out
    assert launch.main([script, "--output_dir", str(tmp_path), "--hdet"]) == 1
    err = capsys.readouterr().err
    assert "--hdet was given, but no_trainer.py finished without constructing a transformers.Trainer" in err
    assert "use hdet_hf.HDETAccelerate" in err


def test_script_rejecting_hdet_keeps_its_exit_code_and_explains(capsys, tmp_path, clean_accelerate_state):
    code = launch.main([str(STOCK / "argparse_script.py"), "--output_dir", str(tmp_path), "--hdet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --hdet" in err  # the script's own argparse
    assert "argparse_script.py exited with code 2 without constructing a transformers.Trainer" in err
    assert "does not parse TrainingArguments with HfArgumentParser" in err


def test_trainer_from_unparsed_arguments_with_hdet_stops_before_training(tmp_path, clean_accelerate_state):
    script = str(STOCK / "argparse_script.py")
    with pytest.raises(
        launch.HDETLaunchError, match="built a Trainer whose HDETTrainingArguments has hdet=False"
    ):
        launch.main([script, "--output_dir", str(tmp_path), "--ignore_unknown", "--hdet"])
    assert transformers.trainer.DEFAULT_CALLBACKS == [transformers.trainer_callback.DefaultFlowCallback]
    assert transformers.Trainer is ORIGINALS["Trainer"]


# ----------------------------------------------------------------------------- torchrun: a stock script
COMMON = [
    *TRAINER_ARGS,
    "--max_steps",
    "4",
    "--logging_steps",
    "1",
    "--save_strategy",
    "no",
]


def torchrun_stock(out: Path, *flags: str, launcher: bool = True, nproc: int = 2) -> dict:
    """``torchrun [-m hdet_hf.launch] stock_train.py`` on gloo/CPU; returns the script's result json.

    Run directly, a stock script may die at interpreter exit with SIGABRT inside gloo after finishing its
    work (see `hdet_hf.process.finish_distributed`; the launcher avoids it); that alone is tolerated."""
    program = ["-m", "hdet_hf.launch"] if launcher else []
    cmd = torchrun_command(
        [*program, str(STOCK / "stock_train.py")], nproc, ["--output_dir", str(out), *COMMON, *flags]
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=offline_cpu_env())
    result = out / "stock_result.json"
    if not launcher and not result.is_file() and re.search(r"SIGABRT|exitcode\s*:\s*-6", proc.stderr):
        # The same exit abort on one rank can make torchrun stop the other before it wrote its result (seen once in
        # CI, session 45: rank 1 SIGABRT, rank 0 SIGTERM): the run itself is fine; run it once more.
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=offline_cpu_env())
    gloo_exit_abort = (
        not launcher and result.is_file() and re.search(r"SIGABRT|exitcode\s*:\s*-6", proc.stderr)
    )
    if proc.returncode != 0 and not gloo_exit_abort:
        raise AssertionError(
            f"{' '.join(cmd[3:])}\nfailed (exit {proc.returncode}).\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return json.loads(result.read_text())


def losses(result: dict) -> list[float]:
    return [h["loss"] for h in result["log_history"] if "loss" in h]


@pytest.mark.slow
def test_hdet_flags_switch_on_hdet_in_a_stock_script_and_its_trainer_subclass(tmp_path):
    out = tmp_path / "hdet"
    result = torchrun_stock(out, "--subclass_trainer", "--hdet", "--hdet_sync_interval", "2")
    # `class StockTrainer(Trainer)` ran after the patch, so it subclasses HDETTrainer.
    assert result["trainer_class"] == "StockTrainer"
    assert result["trainer_mro"][:4] == ["StockTrainer", "HDETTrainer", "HDETTrainerMixin", "Trainer"]
    assert result["args_class"] == "HDETTrainingArguments"
    schedule = json.loads((out / "hdet_schedule.json").read_text())
    assert schedule["world_size"] == 2 and [t["step"] for t in schedule["trajectory"]] == [2, 4]
    assert any("hdet/base_lr" in h for h in result["log_history"])
    assert len(losses(result)) == 4
    assert (out / "training_args.bin").is_file()  # the patched arguments pickled


@pytest.mark.slow
def test_without_hdet_the_launcher_changes_nothing(tmp_path):
    launched = torchrun_stock(tmp_path / "launched")
    direct = torchrun_stock(tmp_path / "direct", launcher=False)
    assert (launched["trainer_class"], launched["args_class"]) == ("HDETTrainer", "HDETTrainingArguments")
    assert (direct["trainer_class"], direct["args_class"]) == ("Trainer", "TrainingArguments")
    assert len(losses(direct)) == 4 and losses(launched) == losses(direct)
    assert not (tmp_path / "launched" / "hdet_schedule.json").exists()
    assert not any("hdet/base_lr" in h for h in launched["log_history"])


def test_a_group_the_script_destroyed_still_ends_without_gloo_finalisation(monkeypatch):
    """TRL's stock scripts call `trainer.end()`, which destroys the process group before the launcher's exit; with
    gloo the process must still leave through ``os._exit`` (gloo can abort at interpreter exit and the launcher
    would report a finished run as failed: pytorch/pytorch#179291). The backend is the one a Trainer last saw."""
    import torch.distributed as dist

    from hdet_hf import process

    exits: list[int] = []
    monkeypatch.setattr(process.os, "_exit", exits.append)
    monkeypatch.setattr(process.atexit, "_run_exitfuncs", lambda: None)  # not this test process's handlers
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        process.remember_backend()  # what HDETTrainerMixin.__init__ does
    finally:
        dist.destroy_process_group()  # what trainer.end() does
    assert process._remembered_backend == "gloo"
    process.finish_distributed(3)
    assert exits == [3]
    process.remember_backend()  # no group now: forgotten, as launch.main does before each script
    process.finish_distributed(0)
    assert exits == [3]  # nothing to end: a normal return
