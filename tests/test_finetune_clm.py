"""scripts/finetune_clm.py: --help, a real 2-process HDET run on the embedded task, local files, bad input."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import datasets
import pytest
from distributed import torchrun

from hdet_hf.testing.processes import offline_cpu_env

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "finetune_clm.py"
TINY = [
    "--config_overrides",
    "hidden_size=32,num_hidden_layers=1,intermediate_size=64,num_attention_heads=2,num_key_value_heads=1",
    "--report_to",
    "none",
    "--use_cpu",
    "--disable_tqdm",
    "true",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_script():
    spec = importlib.util.spec_from_file_location("finetune_clm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return load_script()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One fresh HDET_HF_CACHE for this module: the corpus and tokenizer are built once, then reused."""
    return tmp_path_factory.mktemp("hdet_cache")


def run_single(args: list[str], cache: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    env = offline_cpu_env()
    env["HDET_HF_CACHE"] = str(cache)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"finetune_clm.py failed (exit {proc.returncode}).\n--- stdout ---\n{proc.stdout[-6000:]}\n"
            f"--- stderr ---\n{proc.stderr[-12000:]}"
        )
    return proc


def test_help_lists_hdet_and_model_flags():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--hdet_lr_spread", "--model_name_or_path", "--train_file", "--config_overrides", "--hdet"):
        assert flag in proc.stdout


@pytest.mark.slow
def test_two_process_hdet_run_on_the_embedded_task(tmp_path, cache_dir, monkeypatch):
    # tests/distributed.torchrun passes os.environ on to the workers.
    monkeypatch.setenv("HDET_HF_CACHE", str(cache_dir))
    out = tmp_path / "out"
    proc = torchrun(
        SCRIPT,
        2,
        [
            "--output_dir",
            str(out),
            *TINY,
            "--block_size",
            "32",
            "--max_steps",
            "8",
            "--per_device_train_batch_size",
            "4",
            "--hdet",
            "--hdet_sync_interval",
            "2",
            "--eval_strategy",
            "no",
            "--do_eval",
            "--max_eval_samples",
            "16",
        ],
        launcher="torchrun",  # the script as the README launches it
    )
    assert any(cache_dir.glob("stdlib_docstrings_*")), "the corpus was not built in $HDET_HF_CACHE"

    schedule = json.loads((out / "hdet_schedule.json").read_text())
    assert schedule["world_size"] == 2 and schedule["sync_interval"] == 2
    assert [t["step"] for t in schedule["trajectory"]] == [2, 4, 6, 8]  # 8 steps / T=2
    assert len(schedule["lr_per_step"]) == 8
    for sync in schedule["trajectory"]:
        assert len(sync["losses"]) == 2 and all(math.isfinite(x) for x in sync["losses"])
        assert sum(sync["multipliers"]["lr"]) / 2 == pytest.approx(1.0)
    assert (out / "hdet_schedule.png").read_bytes()[:8] == PNG_MAGIC

    eval_results = json.loads((out / "eval_results.json").read_text())
    assert math.isfinite(eval_results["eval_loss"])
    assert eval_results["perplexity"] == pytest.approx(math.exp(eval_results["eval_loss"]), rel=1e-6)
    assert 0.0 <= eval_results["eval_accuracy"] <= 1.0 and eval_results["eval_samples"] == 16
    assert json.loads((out / "all_results.json").read_text())["perplexity"] == eval_results["perplexity"]
    assert (out / "trainer_state.json").is_file() and (out / "train_results.json").is_file()

    from huggingface_hub import ModelCard

    card_text = (out / "README.md").read_text()
    assert "## HDET schedule" in card_text and "hdet_schedule.png" in card_text
    assert "hdet" in ModelCard.load(out / "README.md").data.tags
    assert "trained from scratch" in card_text

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 1
    assert len(AutoTokenizer.from_pretrained(out)) == model.config.vocab_size

    # The main process prints the summary once.
    assert proc.stdout.count("*** finetune_clm summary ***") == 1
    assert f"perplexity: {eval_results['perplexity']:.2f}" in proc.stdout
    assert str(out / "hdet_schedule.json") in proc.stdout and "base LR: start" in proc.stdout


TRAIN_TEXT = "\n".join(
    f"Line {i}: the quick brown fox jumps over the lazy dog, and returns the sum of {i} and {i + 1}."
    for i in range(40)
)
VALID_TEXT = "\n".join(f"Validation line {i}: return a copy of the list, sorted in place." for i in range(8))


@pytest.mark.slow
def test_local_model_and_text_files_clip_block_size_and_resume(tmp_path, cache_dir):
    """The real-user path: --model_name_or_path (AutoModel/AutoTokenizer.from_pretrained) on local files."""
    from hdet_hf.examples.data import (
        build_default_model,
        build_stdlib_docstring_corpus,
        train_default_tokenizer,
    )

    tokenizer = train_default_tokenizer(build_stdlib_docstring_corpus(cache_dir), cache_dir=cache_dir)
    model = build_default_model(
        tokenizer,
        hidden_size=32,
        num_hidden_layers=1,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
    )
    model_dir = tmp_path / "tiny_model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    (tmp_path / "train.txt").write_text(TRAIN_TEXT)
    (tmp_path / "valid.txt").write_text(VALID_TEXT)
    out = tmp_path / "out"
    common = [
        "--model_name_or_path",
        str(model_dir),
        "--train_file",
        str(tmp_path / "train.txt"),
        "--validation_file",
        str(tmp_path / "valid.txt"),
        "--output_dir",
        str(out),
        "--block_size",
        "64",  # > max_position_embeddings=16: warn and clip, as run_clm does
        "--per_device_train_batch_size",
        "2",
        *TINY[2:],
    ]
    proc = run_single([*common, "--max_steps", "3"], cache_dir)
    logs = proc.stdout + proc.stderr
    assert "--block_size 64 is larger than the model's maximum length" in logs
    assert "Tokenizing and grouping into blocks of 16" in logs
    assert "demo defaults" not in logs  # they are for the embedded task only

    train = json.loads((out / "train_results.json").read_text())
    # About 1,200 tokens in 16-token blocks: the local file was used, not the 2,900-block embedded corpus.
    assert 10 < train["train_samples"] < 200
    eval_results = json.loads((out / "eval_results.json").read_text())
    assert math.isfinite(eval_results["eval_loss"]) and 0 < eval_results["eval_samples"] < 50
    assert not (out / "hdet_schedule.json").exists()  # no --hdet: a plain Trainer run
    assert "train.txt" in (out / "README.md").read_text()

    # Same output_dir, longer run: resumes from the last checkpoint instead of starting over.
    proc = run_single([*common, "--max_steps", "5", "--do_eval", "false"], cache_dir)
    assert "resuming training from" in proc.stdout + proc.stderr
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 5
    assert [h["step"] for h in state["log_history"] if "train_loss" in h] == [5]


# --------------------------------------------------------------------------------- in-process, no training
def test_defaults_apply_only_where_the_user_gave_nothing(script, tmp_path):
    parser = script.build_parser()
    (model_args, data_args, args), given, demo = script.parse_arguments(
        parser, ["--output_dir", str(tmp_path), "--max_steps", "7", "--use_cpu"]
    )
    assert args.do_train and args.do_eval  # the script's defaults
    assert args.max_steps == 7 and "max_steps" not in demo  # the user's value wins
    assert data_args.block_size == 128 and args.learning_rate == 2e-3 and args.hdet_sync_interval == 10
    assert model_args.model_name_or_path is None and data_args.uses_embedded_corpus

    (tmp_path / "t.txt").write_text("hello world\n")
    config = tmp_path / "args.json"
    config.write_text(
        json.dumps({"output_dir": str(tmp_path), "train_file": str(tmp_path / "t.txt"), "do_eval": False})
    )
    (_, data_args, args), given, demo = script.parse_arguments(parser, [str(config)])
    assert demo == [] and args.max_steps == -1 and data_args.block_size is None and args.learning_rate == 5e-5
    assert args.do_train and not args.do_eval

    config.write_text(json.dumps({"output_dir": str(tmp_path), "no_such_flag": 1}))
    with pytest.raises(ValueError, match="no_such_flag"):
        script.parse_arguments(parser, [str(config)])


def test_bad_input_errors(script, tmp_path):
    parser = script.build_parser()
    (tmp_path / "t.txt").write_text("hello\n")
    (tmp_path / "t.parquet").write_text("x")
    (tmp_path / "v.csv").write_text("text\nhello\n")
    base = ["--output_dir", str(tmp_path)]
    cases = [
        (
            ["--dataset_name", "wikitext", "--train_file", str(tmp_path / "t.txt")],
            ValueError,
            "either --dataset_name",
        ),
        (["--train_file", str(tmp_path / "missing.txt")], FileNotFoundError, "missing.txt does not exist"),
        (["--train_file", str(tmp_path / "t.parquet")], ValueError, "expected a .txt, .json"),
        (
            ["--train_file", str(tmp_path / "t.txt"), "--validation_file", str(tmp_path / "v.csv")],
            ValueError,
            "same format",
        ),
        (["--validation_split_percentage", "100"], ValueError, r"\[0, 100\)"),
        (["--block_size", "0"], ValueError, "positive integer --block_size"),
        (["--config_overrides", "hidden_size=32,oops"], ValueError, "key=value"),
        (["--hdet_lr_spread", "1.5"], ValueError, "--hdet_lr_spread"),
    ]
    for argv, error, match in cases:
        with pytest.raises(error, match=match):
            script.parse_arguments(parser, base + argv)
    with pytest.raises(SystemExit):  # argparse: unknown flag
        script.parse_arguments(parser, [*base, "--no_such_flag", "1"])

    lm = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"input_ids": [[1, 2]]})})
    with pytest.raises(ValueError, match="--validation_file, a --validation_split_percentage"):
        script.select_split(lm, "validation", None, 2, "--do_eval")
    empty = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"input_ids": []})})
    with pytest.raises(ValueError, match="no complete block of 64 tokens"):
        script.select_split(empty, "train", None, 64, "--do_train")


def test_dataset_folder_without_validation_split_is_split_by_percentage(script, tmp_path):
    folder = tmp_path / "my_dataset"
    folder.mkdir()
    (folder / "train.txt").write_text(TRAIN_TEXT)
    data_args = script.DataTrainingArguments(dataset_name=str(folder), validation_split_percentage=10)
    raw = script.load_raw_datasets(data_args, script.ModelArguments(cache_dir=str(tmp_path / "cache")))
    assert (len(raw["train"]), len(raw["validation"])) == (36, 4)
    assert raw["validation"][0]["text"].startswith("Line 0:")


def test_config_overrides_and_block_size_rules(script, caplog):
    parsed = script.parse_config_overrides(
        "hidden_size=32, attention_dropout=0.1,use_cache=false,hidden_act=gelu"
    )
    assert parsed == {"hidden_size": 32, "attention_dropout": 0.1, "use_cache": False, "hidden_act": "gelu"}

    tokenizer = SimpleNamespace(model_max_length=int(1e30))  # what tokenizers without a limit report
    config = SimpleNamespace(max_position_embeddings=512)
    assert script.resolve_block_size(None, tokenizer, config) == 512
    assert script.resolve_block_size(None, tokenizer, SimpleNamespace(max_position_embeddings=4096)) == 1024
    with caplog.at_level(logging.WARNING, logger="finetune_clm"):
        assert script.resolve_block_size(2048, tokenizer, config) == 512
    assert "Using --block_size 512" in caplog.text
