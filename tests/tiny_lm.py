"""A tiny causal LM, its tokenizer and a text dataset, all built offline (for the TRL / PEFT tests).

`save_tiny_lm(folder)` writes what ``--model_name_or_path`` needs (config, weights, tokenizer), so stock scripts
such as TRL's ``sft.py`` load it with ``from_pretrained`` exactly as they would load a Hub model.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
WORDS = (
    "the a cat dog bird fish sat ran flew swam on in under over mat log tree pond red blue green small big "
    "quick slow happy sad and then again today"
).split()


def tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over `WORDS` plus the four special tokens (ids 0-3)."""
    vocab = {token: i for i, token in enumerate(SPECIAL.values())}
    vocab.update({word: len(vocab) + i for i, word in enumerate(WORDS)})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL["unk_token"]))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, **SPECIAL)


def model(seed: int = 0, vocab_size: int = len(SPECIAL) + len(WORDS)) -> LlamaForCausalLM:
    """Hidden 16, 2 layers: a few thousand parameters, the same weights for the same seed."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    return LlamaForCausalLM(config)


def texts(count: int, seed: int = 0) -> list[str]:
    """Short sentences with some structure (subject verb preposition object), so the loss can fall."""
    g = torch.Generator().manual_seed(seed)
    subjects, verbs, preps, objects = WORDS[2:6], WORDS[6:10], WORDS[10:14], WORDS[14:18]
    pick = lambda words: words[int(torch.randint(len(words), (1,), generator=g))]  # noqa: E731
    return [f"the {pick(subjects)} {pick(verbs)} {pick(preps)} the {pick(objects)}" for _ in range(count)]


def save_tiny_lm(folder: str | Path, seed: int = 0) -> Path:
    """Model and tokenizer, saved like a Hub checkpoint."""
    folder = Path(folder)
    model(seed).save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return folder


def save_text_dataset(folder: str | Path, count: int = 64) -> Path:
    """A local dataset folder (``train.jsonl`` with a ``text`` column) that ``load_dataset(folder)`` reads."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
        for text in texts(count):
            f.write(json.dumps({"text": text}) + "\n")
    return folder
