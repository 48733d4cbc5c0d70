"""The embedded offline default task: causal-LM fine-tuning on the Python standard library's docstrings.

Every machine that runs Python already holds a real English corpus: the docstrings of the standard
library. This module turns it into a `datasets.DatasetDict`, trains a small byte-level BPE tokenizer on it
and builds a tiny Llama from the shipped config, so examples, tests and benchmarks run with no download
from the Hugging Face Hub.

Measured on CPython 3.11.7 (Linux, 2 CPU cores): 3,577 documents / 1,398,245 characters from 452 files
(train 3,387 docs, validation 190), built and saved in about 4 s, reloaded in milliseconds. The
4,096-token tokenizer trains in about 0.4 s (~0.28 tokens per character). With `block_size=128` that
gives 2,915 train and 174 validation blocks (~373k train tokens). The default model
(`model_configs/tiny_llama.json`) has 3,950,848 parameters (embeddings tied). Other Python versions give a
somewhat different corpus, so caches are keyed by `major.minor`.

Caches are written to a temporary folder and renamed into place, so a crashed build never leaves a
half-written cache and concurrent builders (every process of a distributed launch) are safe: the first
rename wins and the others discard their identical copies.

Example:
    >>> from hdet_hf.examples.data import build_default_model, load_default_task
    >>> tokenizer, lm_datasets = load_default_task(block_size=128)
    >>> lm_datasets["train"].column_names
    ['input_ids', 'attention_mask', 'labels']
    >>> model = build_default_model(tokenizer, hidden_size=64, num_hidden_layers=2)
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import itertools
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import datasets
import transformers

__all__ = [
    "DEFAULT_MODEL_CONFIG_PATH",
    "build_default_model",
    "build_stdlib_docstring_corpus",
    "default_cache_dir",
    "group_texts_for_clm",
    "load_default_task",
    "train_default_tokenizer",
]

# Bump when the corpus/tokenizer recipe changes, so old caches are never reused for a new recipe.
_FORMAT_VERSION = 1

DEFAULT_MODEL_CONFIG_PATH: Path = Path(__file__).resolve().parent / "model_configs" / "tiny_llama.json"

# Directories of the stdlib that are not library documentation: tests, IDLE, vendored/legacy tools and
# generated tables (encodings is hundreds of near-identical "Python Character Mapping Codec" stubs).
_SKIPPED_DIRS = frozenset(
    {
        "__pycache__",
        "site-packages",
        "dist-packages",
        "test",
        "tests",
        "idlelib",
        "lib2to3",
        "ensurepip",
        "turtledemo",
        "lib-dynload",
        "pydoc_data",
        "encodings",
    }
)
_MIN_DOC_CHARS = 100
_VALIDATION_EVERY = 20  # ~5% of documents, chosen by a hash of the text, so the split is stable

# Llama's convention (unk=0, bos=1, eos=2); pad gets its own id so padding is never confused with eos.
_SPECIAL_TOKENS = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}


def default_cache_dir() -> Path:
    """Return the cache root: `$HDET_HF_CACHE` if set, else `~/.cache/hdet_hf`.

    Example:
        >>> default_cache_dir()  # doctest: +SKIP
        PosixPath('/root/.cache/hdet_hf')
    """
    env = os.environ.get("HDET_HF_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "hdet_hf"


def _resolve_cache_dir(cache_dir: str | os.PathLike[str] | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def _build_atomically(final: Path, build: Callable[[Path], None]) -> None:
    """Run `build(tmp_dir)` and rename `tmp_dir` to `final`; `final` exists only once it is complete."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process renamed its copy first. Builds are deterministic, so keep theirs.
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _local_main_process_first() -> Iterator[None]:
    """Let local rank 0 build caches while the other ranks of its node wait, then let them load.

    This talks to `torch.distributed` directly rather than creating an `accelerate.PartialState`: a data
    helper must not pick the process-group backend before the Trainer/Accelerator does (under torchrun on
    a CPU-only machine a bare `PartialState()` resolves to `DistributedType.NO`). An existing
    PartialState/Accelerator has already initialised `torch.distributed`, so it is covered. If no process
    group exists yet, nothing is synchronised; the atomic writes still keep concurrent builds correct,
    they only repeat work.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        yield
        return
    # Per node, not global: each node usually has its own disk; on a shared disk the rename settles it.
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    if local_rank != 0:
        dist.barrier()
    try:
        yield
    finally:
        # In `finally` so a failing main process releases the others instead of leaving them hanging.
        if local_rank == 0:
            dist.barrier()


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _iter_stdlib_sources(root: Path) -> Iterator[Path]:
    """Yield the stdlib's `.py` files in a deterministic (sorted) order, skipping non-library dirs."""
    for dirpath, dirnames, filenames in os.walk(root):
        # Sorting in place makes os.walk itself deterministic across file systems.
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS and not d.startswith("config-"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath) / name


def _docstrings_of(path: Path) -> list[str]:
    """Module/class/function docstrings of one file, in source order, parsed with `ast` (never imported)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old modules are irrelevant here
            tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                # ast.walk is breadth-first; sort by position so the order is the file's order.
                found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), doc.strip()))
    return [doc for _, _, doc in sorted(found)]


def _is_validation(text: str) -> bool:
    # sha1 rather than hash(): Python's str hash is salted per process.
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big") % _VALIDATION_EVERY == 0


def _collect_stdlib_docstrings(root: Path) -> datasets.DatasetDict:
    seen: set[str] = set()
    splits: dict[str, dict[str, list[str]]] = {
        "train": {"text": [], "source": []},
        "validation": {"text": [], "source": []},
    }
    for path in _iter_stdlib_sources(root):
        source = path.relative_to(root).as_posix()
        for doc in _docstrings_of(path):
            if len(doc) < _MIN_DOC_CHARS or doc in seen:
                continue
            seen.add(doc)
            split = splits["validation" if _is_validation(doc) else "train"]
            split["text"].append(doc)
            split["source"].append(source)
    if not splits["train"]["text"] or not splits["validation"]["text"]:
        raise RuntimeError(
            f"Expected Python standard library sources (.py files) under {root}, but found no docstrings; "
            "this Python may ship its stdlib zipped or stripped. Pass your own text dataset instead."
        )
    features = datasets.Features({"text": datasets.Value("string"), "source": datasets.Value("string")})
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(cols, features=features) for name, cols in splits.items()}
    )


def build_stdlib_docstring_corpus(cache_dir: str | os.PathLike[str] | None = None) -> datasets.DatasetDict:
    """Build (or load from cache) the stdlib docstring corpus with `train` and `validation` splits.

    Columns are `text` (one cleaned docstring) and `source` (its file, relative to the stdlib dir).
    Docstrings shorter than 100 characters and exact duplicates are dropped; about 1 in 20 documents, by
    a stable hash of its text, goes to `validation`. The result is deterministic for a given Python
    installation and is cached under `cache_dir` (default `$HDET_HF_CACHE` or `~/.cache/hdet_hf`) in a
    folder keyed by the format version and the Python `major.minor`.

    Example:
        >>> corpus = build_stdlib_docstring_corpus()
        >>> corpus["train"].column_names
        ['text', 'source']
        >>> len(corpus["train"]) > 1000
        True
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = _resolve_cache_dir(cache_dir) / f"stdlib_docstrings_v{_FORMAT_VERSION}_py{version}"
    with _local_main_process_first():
        if not target.is_dir():
            corpus = _collect_stdlib_docstrings(_stdlib_dir())
            _build_atomically(target, lambda tmp: corpus.save_to_disk(str(tmp)))
    return datasets.load_from_disk(str(target))


def _corpus_fingerprint(corpus: datasets.DatasetDict) -> str:
    """A content hash of the train texts: ties a tokenizer cache to the exact corpus it was trained on."""
    digest = hashlib.sha256()
    for text in corpus["train"]["text"]:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def _train_bpe(texts: list[str], vocab_size: int) -> transformers.PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    special = [_SPECIAL_TOKENS[k] for k in ("unk_token", "bos_token", "eos_token", "pad_token")]
    tok = Tokenizer(models.BPE(unk_token=_SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=special,
        # All 256 byte symbols up front: no text is ever out of vocabulary, whatever the corpus saw.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    bos, eos = _SPECIAL_TOKENS["bos_token"], _SPECIAL_TOKENS["eos_token"]
    # Prepend <s> like Llama; group_texts_for_clm appends </s> so documents stay separated.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A {eos} {bos} $B",
        special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))],
    )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **_SPECIAL_TOKENS)


def train_default_tokenizer(
    corpus: datasets.DatasetDict,
    vocab_size: int = 4096,
    cache_dir: str | os.PathLike[str] | None = None,
) -> transformers.PreTrainedTokenizerFast:
    """Train (or load from cache) a byte-level BPE tokenizer on `corpus["train"]["text"]`.

    Special tokens: `<unk>`=0, `<s>`=1 (bos, prepended by the tokenizer), `</s>`=2 (eos), `<pad>`=3.
    The cache folder is keyed by `vocab_size`, the format version and a hash of the training texts.

    Example:
        >>> tokenizer = train_default_tokenizer(build_stdlib_docstring_corpus(), vocab_size=4096)
        >>> tokenizer.decode(tokenizer("Return the sum.")["input_ids"], skip_special_tokens=True)
        'Return the sum.'
    """
    if not isinstance(vocab_size, int) or vocab_size <= 256 + len(_SPECIAL_TOKENS):
        raise ValueError(
            f"Expected vocab_size to be an integer > {256 + len(_SPECIAL_TOKENS)} (256 bytes + special "
            f"tokens), but got {vocab_size!r}."
        )
    if "train" not in corpus or "text" not in corpus["train"].column_names:
        raise ValueError(
            f"Expected a DatasetDict with a 'train' split that has a 'text' column, but got splits "
            f"{list(corpus)} (see build_stdlib_docstring_corpus)."
        )
    name = f"tokenizer_bpe{vocab_size}_v{_FORMAT_VERSION}_{_corpus_fingerprint(corpus)}"
    target = _resolve_cache_dir(cache_dir) / name
    with _local_main_process_first():
        if not target.is_dir():
            # list(): in datasets>=4 a column is a lazy Column object, not a list.
            tokenizer = _train_bpe(list(corpus["train"]["text"]), vocab_size)
            _build_atomically(target, lambda tmp: tokenizer.save_pretrained(str(tmp)))
    return transformers.PreTrainedTokenizerFast.from_pretrained(str(target))


def group_texts_for_clm(
    dataset: datasets.Dataset | datasets.DatasetDict,
    tokenizer: transformers.PreTrainedTokenizerBase,
    block_size: int,
    num_proc: int | None = None,
    text_column: str = "text",
) -> datasets.Dataset | datasets.DatasetDict:
    """Tokenize, concatenate and cut into `block_size` blocks for causal-LM training (as in run_clm.py).

    Each document becomes `<bos> tokens <eos>` (the eos only if the tokenizer has one); documents are
    concatenated and cut into blocks of exactly `block_size` tokens. The remainder of each map batch
    (1,000 documents) shorter than a block is dropped. Output columns: `input_ids`, `attention_mask`
    (all ones), `labels` (a copy of `input_ids`; the model shifts them).

    Example:
        >>> lm = group_texts_for_clm(corpus, tokenizer, block_size=128)  # doctest: +SKIP
        >>> len(lm["train"][0]["input_ids"])  # doctest: +SKIP
        128
    """
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"Expected a positive integer block_size, but got {block_size!r}.")
    splits = dataset.values() if isinstance(dataset, datasets.DatasetDict) else [dataset]
    for split in splits:
        if text_column not in split.column_names:
            raise ValueError(
                f"Expected a text column {text_column!r}, but the dataset has {split.column_names}; "
                "pass text_column=<name>."
            )
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def tokenize_and_group(batch: dict[str, list[Any]]) -> dict[str, list[list[int]]]:
        ids = tokenizer(batch[text_column])["input_ids"]
        flat = list(itertools.chain.from_iterable(doc + eos for doc in ids))
        usable = len(flat) // block_size * block_size
        blocks = [flat[i : i + block_size] for i in range(0, usable, block_size)]
        return {
            "input_ids": blocks,
            "attention_mask": [[1] * block_size for _ in blocks],
            "labels": [list(block) for block in blocks],
        }

    # One batched map does both steps, so the token lists are never materialised as a column.
    remove = dataset.column_names
    if isinstance(remove, dict):  # DatasetDict: same columns in every split
        remove = next(iter(remove.values()))
    return dataset.map(
        tokenize_and_group,
        batched=True,
        num_proc=num_proc,
        remove_columns=remove,
        desc=f"Tokenizing and grouping into blocks of {block_size}",
    )


def load_default_task(
    block_size: int = 128,
    vocab_size: int = 4096,
    cache_dir: str | os.PathLike[str] | None = None,
    num_proc: int | None = None,
) -> tuple[transformers.PreTrainedTokenizerFast, datasets.DatasetDict]:
    """Corpus + tokenizer + grouped `train`/`validation` blocks, all built offline and cached.

    Example:
        >>> tokenizer, lm_datasets = load_default_task(block_size=128)
        >>> sorted(lm_datasets)
        ['train', 'validation']
    """
    corpus = build_stdlib_docstring_corpus(cache_dir)
    tokenizer = train_default_tokenizer(corpus, vocab_size=vocab_size, cache_dir=cache_dir)
    # Main process first, so the tokenized blocks written to the datasets cache are made once per node.
    with _local_main_process_first():
        lm_datasets = group_texts_for_clm(corpus, tokenizer, block_size, num_proc=num_proc)
    return tokenizer, lm_datasets


def build_default_model(
    tokenizer: transformers.PreTrainedTokenizerBase, **config_overrides: Any
) -> transformers.LlamaForCausalLM:
    """A randomly initialised Llama from `DEFAULT_MODEL_CONFIG_PATH`, sized to `tokenizer` (no download).

    Vocab size and bos/eos/pad ids come from the tokenizer; `config_overrides` (any `LlamaConfig` field)
    are applied before the config is built, so derived fields such as `head_dim` follow them. The shipped
    config (hidden 256, 4 layers, 4 heads, 2 kv heads, intermediate 688, tied embeddings) has 3,950,848
    parameters with a 4,096-token vocabulary.

    Example:
        >>> model = build_default_model(tokenizer, hidden_size=64, num_hidden_layers=2)  # doctest: +SKIP
        >>> model.config.num_hidden_layers  # doctest: +SKIP
        2
    """
    with open(DEFAULT_MODEL_CONFIG_PATH, encoding="utf-8") as f:
        config_dict = json.load(f)
    # LlamaConfig silently stores unknown kwargs, so a typo (hidden_sise=64) would be ignored; catch it here.
    known = set(transformers.LlamaConfig().to_dict()) | {"attn_implementation"}
    unknown = sorted(set(config_overrides) - known)
    if unknown:
        raise ValueError(
            f"Unknown LlamaConfig field(s) {unknown} in config_overrides; expected fields of "
            "transformers.LlamaConfig such as hidden_size, num_hidden_layers, num_attention_heads, "
            "num_key_value_heads, intermediate_size, rope_parameters or attn_implementation."
        )
    config_dict.update(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config_dict.update(config_overrides)
    # from_dict on the merged dict rather than from_json_file + setattr: derived fields (head_dim) are
    # computed in __init__ and would keep the file's values if overrides were applied afterwards.
    config = transformers.LlamaConfig.from_dict(config_dict)
    return transformers.LlamaForCausalLM(config)
