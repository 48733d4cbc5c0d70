"""An offline domain-adaptation task for the quality benchmark: a pretrained LM fine-tuned on Python source code.

Task j of issue 10. Every other language-model task trains from scratch; fine-tuning a pretrained causal LM on
a new domain is what most users of the library do, and its LR behaves differently (a too-high LR first undoes
what pre-training learned). Everything is offline:

- The *pretrained* model is a tiny Llama trained here on the standard library's docstrings (English prose)
  with plain DDP (``scripts/pretrain_tiny_lm.py``; the same tokenizer as the docstring task).
- The *fine-tuning* text is the standard library's own source code (``.py`` files outside test folders):
  a different domain for the same tokenizer. Files are split into train and validation by a hash of their
  path, so the split does not depend on the order they are read in.

Files that share text (the codecs' mapping tables in ``encodings/``) put a few identical blocks on both sides: 32 of
the 1,693 validation blocks repeat a train block.

``MAX_FILES`` caps the corpus: 200 steps of 4 x 4 blocks of 128 tokens use ~0.4M tokens, far below what the
whole standard library holds, and a smaller corpus tokenizes in seconds.
"""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path
from typing import Any

__all__ = ["MAX_FILES", "load_code_task", "stdlib_code_files"]

MAX_FILES = 400
MAX_CHARS_PER_FILE = 20_000  # a few huge generated files would otherwise dominate the corpus


def _hash_unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") / 2**32


def stdlib_code_files(max_files: int = MAX_FILES) -> list[Path]:
    """Up to ``max_files`` standard-library ``.py`` files (no tests, no site-packages), picked by a hash of their
    relative path so that the choice is the same on every machine with the same Python."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in {"site-packages", "dist-packages"} or any("test" in part for part in rel.parts):
            continue
        files.append((_hash_unit(str(rel)), path))
    return [path for _, path in sorted(files)[:max_files]]


def load_code_task(
    tokenizer: Any, block_size: int = 128, validation_fraction: float = 0.1, max_files: int = MAX_FILES
) -> Any:
    """``DatasetDict(train, validation)`` of ``block_size`` blocks of the standard library's source code, tokenized
    with ``tokenizer`` (the pretrained model's)."""
    from datasets import Dataset, DatasetDict

    from hdet_hf.examples.data import group_texts_for_clm

    root = Path(sysconfig.get_paths()["stdlib"])
    split: dict[str, list[dict[str, str]]] = {"train": [], "validation": []}
    for path in stdlib_code_files(max_files):
        try:
            text = path.read_text(encoding="utf-8")[:MAX_CHARS_PER_FILE]
        except (UnicodeDecodeError, OSError):
            continue
        rel = str(path.relative_to(root))
        # A different hash than the one that picks files, so validation is not the lowest-hash files.
        name = "validation" if _hash_unit("validation:" + rel) < validation_fraction else "train"
        split[name].append({"text": text})
    corpus = DatasetDict({name: Dataset.from_list(rows) for name, rows in split.items()})
    return group_texts_for_clm(corpus, tokenizer, block_size)
