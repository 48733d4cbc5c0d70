#!/usr/bin/env python
"""Fine-tune a causal language model with `HDETTrainer`, in the style of HF's `run_clm.py`.

Every ``--hdet*`` flag of `HDETTrainingArguments` works; without ``--hdet`` this is a plain `Trainer` run.
With no model and no data it trains the embedded offline demo: a tiny Llama (`hdet_hf.examples.data`) on the Python
standard library's docstrings, nothing downloaded. Pass ``--model_name_or_path``/``--config_name`` and
``--dataset_name`` or ``--train_file``/``--validation_file`` for real work, as with run_clm.

Two differences from run_clm:
- ``--do_train`` and ``--do_eval`` default to true (pass ``--do_train false`` to only evaluate).
- The embedded demo (no model, config, dataset or files given) fills in settings you did not pass:
  ``--block_size 128 --max_steps 100 --learning_rate 2e-3 --logging_steps 10
  --hdet_sync_interval 10``; anything you pass wins. With 4 processes x 8 blocks that is 3,200 blocks
  (1.1 epochs of the 2,915 training blocks). Measured with ``--hdet`` on a 2-core CPU that other jobs
  were loading (load average 10-12): 3 min 44 s end to end (3 min 4 s training, 4 s evaluating the 174
  validation blocks; 2 min 42 s of CPU time in all), eval loss 6.20, perplexity 493.

Example (CPU, 4 gloo processes; with --hdet no ACCELERATE_USE_CPU=1 is needed, see accelerate_configs/README.md):

    accelerate launch --config_file accelerate_configs/cpu_4proc.yaml \\
        scripts/finetune_clm.py --output_dir out/demo --hdet --hdet_auto_lr

    # a Hub model on your own text files, 8 GPUs:
    accelerate launch --config_file accelerate_configs/gpu_1node_8.yaml scripts/finetune_clm.py \\
        --model_name_or_path gpt2 --train_file train.txt --validation_file valid.txt --block_size 512 \\
        --per_device_train_batch_size 8 --learning_rate 5e-5 --output_dir out/gpt2 --hdet

A single ``.json`` argument is read as a config file with the same keys as the flags. The run writes
the model, tokenizer, ``train_results.json``/``eval_results.json``/``all_results.json``,
``trainer_state.json`` and a model card (``README.md``); with ``--hdet`` also ``hdet_schedule.json`` and
``hdet_schedule.png``. A run whose ``--output_dir`` holds ``checkpoint-*`` folders resumes from the last
one unless ``--overwrite_output_dir`` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import datasets
import numpy as np
import torch
import transformers
from datasets import load_dataset
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    HfArgumentParser,
    default_data_collator,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from hdet_hf import HDETSchedule, HDETTrainer, HDETTrainingArguments
from hdet_hf.examples.data import (
    build_default_model,
    build_stdlib_docstring_corpus,
    group_texts_for_clm,
    load_default_task,
    train_default_tokenizer,
)
from hdet_hf.examples.metrics import load_metric
from hdet_hf.process import finish_distributed
from hdet_hf.schedule_metadata import PLOT_FILENAME, SCHEDULE_FILENAME

logger = logging.getLogger(__name__)

DATA_EXTENSIONS = {"txt": "text", "text": "text", "json": "json", "jsonl": "json", "csv": "csv"}

# What the flags default to in this script (unlike run_clm, training and evaluation are on by default).
SCRIPT_DEFAULTS: dict[str, Any] = {"do_train": True, "do_eval": True}

# Settings the embedded demo uses when the user passed neither a model nor data and did not set them:
# small enough that `accelerate launch` with 4 CPU processes on 2 busy cores finishes in under 4 minutes.
DEMO_DEFAULTS: dict[str, Any] = {
    "block_size": 128,  # the corpus' measured default in hdet_hf.examples.data: 2,915 train / 174 validation blocks
    "max_steps": 100,  # 1.1 epochs with 4 processes x 8 blocks; HF's 3 epochs (273 steps) take ~3x longer
    "learning_rate": 2e-3,  # a from-scratch 4M-parameter Llama; HF's 5e-5 is a fine-tuning LR
    "logging_steps": 10,  # HF's 500 would log nothing in a 100-step run
    "hdet_sync_interval": 10,  # 10 syncs, so the schedule plot has something to show
}


@dataclass
class ModelArguments:
    """Which model, config and tokenizer to fine-tune (or train from scratch)."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Model checkpoint (Hub id or local folder) for weight initialization. Leave unset to train "
            "the embedded tiny Llama (hdet_hf/examples/model_configs/tiny_llama.json) from scratch, offline."
        },
    )
    config_name: str | None = field(
        default=None,
        metadata={
            "help": "Config name or path if not the same as --model_name_or_path. Without "
            "--model_name_or_path the model is built from this config with random weights."
        },
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "Tokenizer name or path if not the same as --model_name_or_path. Without either, the "
            "embedded 4,096-token BPE tokenizer trained on the stdlib docstrings is used."
        },
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "Override config fields, e.g. hidden_size=32,num_hidden_layers=1,attention_dropout=0.1. "
            "Applies to the embedded Llama and to --config_name/--model_name_or_path configs (with a "
            "pretrained checkpoint, only fields that do not change weight shapes, such as dropouts)."
        },
    )
    cache_dir: str | None = field(
        default=None,
        metadata={"help": "Where to store models and datasets downloaded from the Hub."},
    )
    model_revision: str = field(
        default="main",
        metadata={"help": "Model version to use: a branch name, tag name or commit id."},
    )
    token: str | None = field(
        default=None,
        metadata={"help": "Hub token for private models/datasets (default: the one from `hf auth login`)."},
    )
    trust_remote_code: bool = field(
        default=False,
        metadata={
            "help": "Allow models defined by code on the Hub. Only for repositories you trust: their code "
            "runs on your machine."
        },
    )
    torch_dtype: str | None = field(
        default=None,
        metadata={
            "help": "Load the model in this dtype. 'auto' takes it from the checkpoint's weights.",
            "choices": ["auto", "bfloat16", "float16", "float32"],
        },
    )

    def __post_init__(self) -> None:
        if self.config_overrides is not None:
            parse_config_overrides(self.config_overrides)  # fail on a malformed string before any work


@dataclass
class DataTrainingArguments:
    """Which data to train and evaluate on, and how to cut it into blocks."""

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Dataset to use, via datasets.load_dataset (a Hub id or a local dataset folder). Leave it "
            "and --train_file unset for the embedded offline corpus (Python stdlib docstrings)."
        },
    )
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "Configuration name of --dataset_name."}
    )
    train_file: str | None = field(
        default=None,
        metadata={"help": "Training data: a .txt (one document per line), .json/.jsonl or .csv file."},
    )
    validation_file: str | None = field(
        default=None,
        metadata={"help": "Evaluation data, same formats as --train_file (perplexity is measured on it)."},
    )
    text_column_name: str | None = field(
        default=None,
        metadata={"help": "Column holding the text (default: 'text' if present, else the first column)."},
    )
    validation_split_percentage: int = field(
        default=5,
        metadata={
            "help": "Percentage of the train split held out for evaluation when the data has no validation "
            "split; 0 for none."
        },
    )
    block_size: int | None = field(
        default=None,
        metadata={
            "help": "Tokens per training block after concatenating the documents. Default: the model's "
            "maximum (at most 1024); 128 for the embedded demo. Clipped to the model's maximum."
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use at most this many training blocks (debugging, quick runs)."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Use at most this many evaluation blocks (debugging, quick runs)."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Number of processes for tokenization (datasets.map num_proc)."}
    )
    overwrite_cache: bool = field(
        default=False,
        metadata={
            "help": "Recompute tokenized and grouped data instead of reusing the datasets cache (the raw "
            "corpus and tokenizer caches of the embedded task are deterministic and kept)."
        },
    )
    keep_linebreaks: bool = field(
        default=True, metadata={"help": "Keep line breaks when reading .txt files."}
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Train from scratch even if --output_dir holds checkpoint-* folders (by default the run "
            "resumes from the last one). Kept from run_clm; transformers 5 dropped it from TrainingArguments."
        },
    )

    def __post_init__(self) -> None:
        if self.dataset_name is not None and (
            self.train_file is not None or self.validation_file is not None
        ):
            raise ValueError(
                f"Expected either --dataset_name or --train_file/--validation_file, but got both "
                f"(--dataset_name {self.dataset_name}, --train_file {self.train_file}, --validation_file "
                f"{self.validation_file}). Drop one of them."
            )
        extensions = set()
        for flag in ("train_file", "validation_file"):
            path = getattr(self, flag)
            if path is None:
                continue
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--{flag} {path} does not exist (or is not a file).")
            extension = path.rsplit(".", 1)[-1].lower() if "." in os.path.basename(path) else ""
            if extension not in DATA_EXTENSIONS:
                raise ValueError(
                    f"--{flag} {path}: expected a .txt, .json, .jsonl or .csv file, but got "
                    f"'{extension or 'no extension'}'."
                )
            extensions.add(DATA_EXTENSIONS[extension])
        if len(extensions) > 1:
            raise ValueError(
                f"Expected --train_file and --validation_file in the same format, but got {sorted(extensions)}."
            )
        if not 0 <= self.validation_split_percentage < 100:
            raise ValueError(
                f"--validation_split_percentage must be in [0, 100), but got {self.validation_split_percentage}."
            )
        for flag in ("block_size", "max_train_samples", "max_eval_samples"):
            value = getattr(self, flag)
            if value is not None and value < 1:
                raise ValueError(f"Expected a positive integer --{flag}, but got {value}.")

    @property
    def uses_files(self) -> bool:
        return self.train_file is not None or self.validation_file is not None

    @property
    def uses_embedded_corpus(self) -> bool:
        return self.dataset_name is None and not self.uses_files


# ------------------------------------------------------------------------------------------- arguments
def build_parser() -> HfArgumentParser:
    parser = HfArgumentParser(
        (ModelArguments, DataTrainingArguments, HDETTrainingArguments),
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    parser.set_defaults(**SCRIPT_DEFAULTS)  # so --help shows the script's defaults
    return parser


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in the help text (as HfArgumentParser does) and the module docstring kept as written."""


_UNSET = object()


def parse_arguments(
    parser: HfArgumentParser, argv: list[str]
) -> tuple[tuple[ModelArguments, DataTrainingArguments, HDETTrainingArguments], dict[str, Any], list[str]]:
    """Parse flags (or a single .json file) and fill in the script's and the demo's defaults.

    Returns the three argument dataclasses, the settings the user gave, and the demo defaults applied.
    Defaults only apply to settings the user did not give, so those must be known: every field starts
    as a sentinel in the namespace, and argparse overwrites only the given ones.
    """
    if len(argv) == 1 and argv[0].endswith(".json"):
        with open(os.path.abspath(argv[0]), encoding="utf-8") as f:
            given = json.load(f)
        if not isinstance(given, dict):
            raise ValueError(
                f"Expected a JSON object of flag names to values in {argv[0]}, but got {type(given).__name__}."
            )
    else:
        names = [f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init]
        namespace = parser.parse_args(argv, namespace=argparse.Namespace(**dict.fromkeys(names, _UNSET)))
        given = {k: v for k, v in vars(namespace).items() if v is not _UNSET}
    defaults = dict(SCRIPT_DEFAULTS)
    sources = ("model_name_or_path", "config_name", "dataset_name", "train_file", "validation_file")
    demo = [] if any(given.get(k) for k in sources) else [k for k in DEMO_DEFAULTS if k not in given]
    defaults.update({k: DEMO_DEFAULTS[k] for k in demo})
    if "dataloader_pin_memory" not in given and not torch.cuda.is_available():
        # Pinned memory only helps copies to a GPU; on CPU the DataLoader warns about it in every process.
        defaults["dataloader_pin_memory"] = False
    return parser.parse_dict({**defaults, **given}), given, demo


def parse_config_overrides(overrides: str) -> dict[str, Any]:
    """``"hidden_size=32,attention_dropout=0.1,use_cache=false"`` -> ``{"hidden_size": 32, ...}``."""
    parsed: dict[str, Any] = {}
    for item in overrides.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"--config_overrides expects comma-separated key=value pairs such as "
                f"hidden_size=32,num_hidden_layers=1, but got the item {item!r} in {overrides!r}."
            )
        parsed[key.strip()] = _parse_scalar(value.strip())
    return parsed


def _parse_scalar(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


# ------------------------------------------------------------------------------------------- model
def load_tokenizer_and_model(model_args: ModelArguments):
    """(tokenizer, model, whether the tokenizer is the embedded one, so `load_default_task` can be used)."""
    hub_kwargs = {
        "cache_dir": model_args.cache_dir,
        "revision": model_args.model_revision,
        "token": model_args.token,
        "trust_remote_code": model_args.trust_remote_code,
    }
    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    if tokenizer_source:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, **hub_kwargs)
    else:
        tokenizer = train_default_tokenizer(build_stdlib_docstring_corpus())
    overrides = parse_config_overrides(model_args.config_overrides) if model_args.config_overrides else {}
    dtype = model_args.torch_dtype
    if not (model_args.model_name_or_path or model_args.config_name):
        if overrides:
            logger.info(f"Overriding the embedded Llama config: {overrides}")
        model = build_default_model(tokenizer, **overrides)
        if dtype not in (None, "auto"):
            model = model.to(getattr(torch, dtype))
        return tokenizer, model, tokenizer_source is None

    config = AutoConfig.from_pretrained(model_args.config_name or model_args.model_name_or_path, **hub_kwargs)
    if overrides:
        logger.info(f"Overriding config: {model_args.config_overrides}")
        config.update_from_string(model_args.config_overrides)
    if model_args.model_name_or_path:
        model = AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path,
            config=config,
            dtype=dtype if dtype in (None, "auto") else getattr(torch, dtype),
            **hub_kwargs,
        )
    else:
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=model_args.trust_remote_code)
        if dtype not in (None, "auto"):
            model = model.to(getattr(torch, dtype))
        n_params = sum({p.data_ptr(): p.numel() for p in model.parameters()}.values())
        logger.info(f"Training a new model from scratch: {n_params / 2**20:.2f}M parameters")
    # Resize only when needed, to avoid index errors (as run_clm does).
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    return tokenizer, model, False


def resolve_block_size(requested: int | None, tokenizer, config) -> int:
    """run_clm's rule: default to the model's maximum (at most 1024); warn and clip a larger request."""
    limits = [tokenizer.model_max_length]
    max_positions = getattr(config, "max_position_embeddings", None)
    if isinstance(max_positions, int) and max_positions > 0:
        limits.append(max_positions)
    limit = min(limits)
    if requested is None:
        if limit > 1024:
            logger.warning(
                f"The model accepts {limit} tokens; using --block_size 1024. Pass --block_size to change it."
            )
        return min(limit, 1024)
    if requested > limit:
        logger.warning(
            f"--block_size {requested} is larger than the model's maximum length ({limit} tokens: tokenizer "
            f"model_max_length {tokenizer.model_max_length}, max_position_embeddings {max_positions}). "
            f"Using --block_size {limit}."
        )
    return min(requested, limit)


# ------------------------------------------------------------------------------------------- data
def load_raw_datasets(data_args: DataTrainingArguments, model_args: ModelArguments) -> datasets.DatasetDict:
    hub_kwargs = {"cache_dir": model_args.cache_dir, "token": model_args.token}
    if data_args.dataset_name is not None:
        # datasets >= 4 runs no dataset scripts, so there is no trust_remote_code to pass here.
        builder, builder_kwargs = data_args.dataset_name, {"name": data_args.dataset_config_name}
    else:
        data_files = {}
        if data_args.train_file is not None:
            data_files["train"] = data_args.train_file
        if data_args.validation_file is not None:
            data_files["validation"] = data_args.validation_file
        path = data_args.train_file or data_args.validation_file
        builder = DATA_EXTENSIONS[path.rsplit(".", 1)[-1].lower()]
        builder_kwargs = {"data_files": data_files}
        if builder == "text":
            builder_kwargs["keep_linebreaks"] = data_args.keep_linebreaks
    raw = load_dataset(builder, **builder_kwargs, **hub_kwargs)
    if "validation" not in raw and "train" in raw and data_args.validation_split_percentage > 0:
        pct = data_args.validation_split_percentage
        raw["validation"] = load_dataset(builder, split=f"train[:{pct}%]", **builder_kwargs, **hub_kwargs)
        raw["train"] = load_dataset(builder, split=f"train[{pct}%:]", **builder_kwargs, **hub_kwargs)
    return raw


def load_lm_datasets(data_args, model_args, training_args, tokenizer, block_size, embedded_tokenizer):
    """Tokenized `train`/`validation` splits cut into `block_size` blocks (`hdet_hf.examples.data.group_texts_for_clm`)."""
    if data_args.overwrite_cache:
        # group_texts_for_clm has no load_from_cache_file switch; this makes every map of this run recompute.
        datasets.disable_caching()
    if data_args.uses_embedded_corpus and embedded_tokenizer:
        _, lm_datasets = load_default_task(
            block_size=block_size, num_proc=data_args.preprocessing_num_workers
        )
        return lm_datasets
    if data_args.uses_embedded_corpus:  # a user model/tokenizer on the embedded corpus
        raw = build_stdlib_docstring_corpus()
    else:
        with training_args.main_process_first(desc="loading the dataset"):
            raw = load_raw_datasets(data_args, model_args)
    splits = datasets.DatasetDict({k: raw[k] for k in ("train", "validation") if k in raw})
    if not splits:
        raise ValueError(f"Expected a 'train' or 'validation' split in the dataset, but it has {list(raw)}.")
    columns = next(iter(splits.values())).column_names
    text_column = data_args.text_column_name or ("text" if "text" in columns else columns[0])
    with training_args.main_process_first(desc="tokenizing and grouping"):
        return group_texts_for_clm(
            splits,
            tokenizer,
            block_size,
            num_proc=data_args.preprocessing_num_workers,
            text_column=text_column,
        )


def select_split(lm_datasets, name: str, max_samples: int | None, block_size: int, flag: str):
    if name not in lm_datasets:
        raise ValueError(
            f"{flag} needs a '{name}' split, but the data has {list(lm_datasets)}. "
            + (
                "Pass --validation_file, a --validation_split_percentage > 0, or --do_eval false."
                if name == "validation"
                else "Pass --train_file or a dataset with a train split, or --do_train false."
            )
        )
    dataset = lm_datasets[name]
    if len(dataset) == 0:
        raise ValueError(
            f"The '{name}' split has no complete block of {block_size} tokens. Pass a smaller --block_size or "
            "more data."
        )
    if max_samples is not None:
        dataset = dataset.select(range(min(max_samples, len(dataset))))
    return dataset


# ------------------------------------------------------------------------------------------- metrics
def preprocess_logits_for_metrics(logits, labels):
    if isinstance(logits, tuple):  # some models return extra tensors; logits always come first
        logits = logits[0]
    return logits.argmax(dim=-1)


def make_compute_metrics(accuracy_metric):
    def compute_metrics(eval_preds):
        preds, labels = eval_preds
        # Position i predicts token i + 1: shift like run_clm.
        labels = np.asarray(labels)[:, 1:].reshape(-1)
        preds = np.asarray(preds)[:, :-1].reshape(-1)
        return {"accuracy": accuracy_metric.compute(predictions=preds, references=labels)["accuracy"]}

    return compute_metrics


def last_checkpoint_to_resume(training_args, data_args) -> str | None:
    if training_args.resume_from_checkpoint is not None:
        if not os.path.isdir(training_args.resume_from_checkpoint):
            raise FileNotFoundError(
                f"--resume_from_checkpoint {training_args.resume_from_checkpoint} is not a folder; pass a "
                f"checkpoint-* folder written by a previous run."
            )
        return training_args.resume_from_checkpoint
    if (
        not training_args.do_train
        or data_args.overwrite_output_dir
        or not os.path.isdir(training_args.output_dir)
    ):
        return None
    last = get_last_checkpoint(training_args.output_dir)
    if last is not None:
        logger.info(
            f"Checkpoint detected, resuming training from {last}. To start over, pass --overwrite_output_dir "
            "or another --output_dir."
        )
    return last


def print_summary(training_args, eval_metrics: dict[str, float] | None) -> None:
    lines = ["", "*** finetune_clm summary ***", f"output dir: {training_args.output_dir}"]
    if eval_metrics:
        line = f"eval loss: {eval_metrics['eval_loss']:.4f} | perplexity: {eval_metrics['perplexity']:.2f}"
        if "eval_accuracy" in eval_metrics:
            line += f" | next-token accuracy: {eval_metrics['eval_accuracy']:.4f}"
        lines.append(line)
    schedule_path = os.path.join(training_args.output_dir, SCHEDULE_FILENAME)
    if training_args.hdet and training_args.do_train and os.path.isfile(schedule_path):
        schedule = HDETSchedule.from_pretrained(training_args.output_dir)
        plot_path = os.path.join(training_args.output_dir, PLOT_FILENAME)
        lines.append(
            f"HDET schedule: {schedule_path} ({schedule.num_converges} converges, {schedule.world_size} ranks)"
        )
        if os.path.isfile(plot_path):
            lines.append(f"HDET plot: {plot_path}")
        # Recomputed from the saved per-step table rather than read from `schedule.summary`, whose "final" can
        # hold the LR the scheduler set after the last step (a step that never ran).
        lr = schedule.compute_summary().get("lr")
        if lr:
            lines.append(
                f"base LR: start {lr['start']:.3g} -> final {lr['final']:.3g} (min {lr['min']:.3g}, max {lr['max']:.3g})"
            )
    print("\n".join(lines), flush=True)


# ------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, float] | None:
    """Run the script with ``argv`` (default ``sys.argv[1:]``); returns the eval metrics, if evaluated."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    (model_args, data_args, training_args), given, demo = parse_arguments(parser, argv)

    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    if training_args.should_log:
        transformers.utils.logging.set_verbosity_info()  # log_level defaults to passive: info on the main process
    log_level = training_args.get_process_log_level()
    logger.setLevel(log_level)
    datasets.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()

    # Reading .device sets up torch.distributed, which the data helpers' main-process-first barriers need.
    logger.warning(
        f"Process rank: {training_args.process_index} of {training_args.world_size}, device: "
        f"{training_args.device}, distributed: {training_args.parallel_mode.value == 'distributed'}, "
        f"HDET: {training_args.hdet}"
    )
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size == 1:
        message = (
            f"Launched with {launched} processes but the Trainer sees 1, so every process would train alone "
            "on all the data. On a CPU-only machine set ACCELERATE_USE_CPU=1 or pass --use_cpu."
        )
        if training_args.hdet:  # HDET needs the ranks to see each other; a run like this explores nothing
            raise RuntimeError(message)
        logger.warning(message)
    if demo:
        logger.info("Embedded demo defaults: " + ", ".join(f"--{k} {DEMO_DEFAULTS[k]}" for k in demo))
    logger.info(f"Training/evaluation parameters {training_args}")

    set_seed(training_args.seed)
    last_checkpoint = last_checkpoint_to_resume(training_args, data_args)

    tokenizer, model, embedded_tokenizer = load_tokenizer_and_model(model_args)
    block_size = resolve_block_size(data_args.block_size, tokenizer, model.config)
    lm_datasets = load_lm_datasets(
        data_args, model_args, training_args, tokenizer, block_size, embedded_tokenizer
    )

    train_dataset = eval_dataset = accuracy_metric = perplexity_metric = None
    if training_args.do_train:
        train_dataset = select_split(
            lm_datasets, "train", data_args.max_train_samples, block_size, "--do_train"
        )
    do_eval = training_args.do_eval
    if do_eval and "validation" not in lm_datasets and "do_eval" not in given:
        logger.warning("No validation data, so no evaluation (default --do_eval true).")
        do_eval = False
    if do_eval:
        eval_dataset = select_split(
            lm_datasets, "validation", data_args.max_eval_samples, block_size, "--do_eval"
        )
        with training_args.main_process_first(desc="loading metrics"):
            accuracy_metric = load_metric("token_accuracy", keep_in_memory=True)
            perplexity_metric = load_metric("lm_perplexity", keep_in_memory=True)

    trainer = HDETTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=default_data_collator,  # blocks have equal length: no padding collator needed
        compute_metrics=make_compute_metrics(accuracy_metric) if do_eval else None,
        preprocess_logits_for_metrics=preprocess_logits_for_metrics if do_eval else None,
    )

    if training_args.do_train:
        train_result = trainer.train(resume_from_checkpoint=last_checkpoint)
        trainer.save_model()  # saves the tokenizer too
        metrics = train_result.metrics
        metrics["train_samples"] = len(train_dataset)
        trainer.log_metrics("train", metrics)
        trainer.save_metrics("train", metrics)
        trainer.save_state()

    eval_metrics = None
    if do_eval:
        logger.info("*** Evaluate ***")
        eval_metrics = trainer.evaluate()
        eval_metrics["eval_samples"] = len(eval_dataset)
        perplexity = perplexity_metric.compute(losses=[eval_metrics["eval_loss"]])["perplexity"]
        eval_metrics["perplexity"] = perplexity if math.isfinite(perplexity) else float("inf")
        trainer.log_metrics("eval", eval_metrics)
        trainer.save_metrics("eval", eval_metrics)

    card = {"tasks": "text-generation"}
    if model_args.model_name_or_path:
        card["finetuned_from"] = model_args.model_name_or_path
    if data_args.dataset_name is not None:
        card["dataset_tags"] = data_args.dataset_name
        card["dataset"] = " ".join(filter(None, [data_args.dataset_name, data_args.dataset_config_name]))
        if data_args.dataset_config_name is not None:
            card["dataset_args"] = data_args.dataset_config_name
    else:
        # Local data: name it, and give empty tags so the card does not list a bogus Hub dataset.
        card["dataset"] = (
            "Python standard library docstrings (hdet_hf.examples.data)"
            if data_args.uses_embedded_corpus
            else ", ".join(
                os.path.basename(p) for p in (data_args.train_file, data_args.validation_file) if p
            )
        )
        card["dataset_tags"], card["dataset_args"] = [], []
    if not model_args.model_name_or_path:
        # TrainingSummary takes a config's `_name_or_path` that is not a folder as the base model; a model
        # trained from scratch has '' (or its --config_name) there, which would render "a fine-tuned version
        # of []()". A folder makes the card say "trained from scratch". Not saved in config.json.
        model.config._name_or_path = training_args.output_dir
    if training_args.do_train:
        trainer.create_model_card(**card)
        if training_args.push_to_hub:
            trainer.push_to_hub(**card)

    if trainer.is_world_process_zero():
        print_summary(training_args, eval_metrics)
    return eval_metrics


if __name__ == "__main__":
    main()
    finish_distributed()
