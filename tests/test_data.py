"""Tests for the offline default task (hdet_hf.examples.data) and the shipped evaluate metrics
(hdet_hf.examples.metrics).

Everything builds into pytest tmp dirs; nothing is downloaded. Numbers asserted below were measured on
CPython 3.11 (3,577 docs, 1.40M chars, ~0.28 tokens/char) and are checked with a wide margin so other
Python versions pass.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import datasets
import pytest
import torch

from hdet_hf.examples import data as hdata
from hdet_hf.examples.data import (
    DEFAULT_MODEL_CONFIG_PATH,
    build_default_model,
    build_stdlib_docstring_corpus,
    group_texts_for_clm,
    load_default_task,
    train_default_tokenizer,
)

# Where hdet_hf was imported from (the checkout or site-packages), for the offline subprocess.
PACKAGE_PARENT = Path(hdata.__file__).parent.parent


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hdet_cache")


@pytest.fixture(scope="session")
def corpus(cache_dir: Path) -> datasets.DatasetDict:
    return build_stdlib_docstring_corpus(cache_dir)


@pytest.fixture(scope="session")
def tokenizer(corpus: datasets.DatasetDict, cache_dir: Path):
    return train_default_tokenizer(corpus, vocab_size=4096, cache_dir=cache_dir)


def _no_temp_leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name]


# ---------------------------------------------------------------- corpus


def test_corpus_is_a_real_nontrivial_corpus(corpus: datasets.DatasetDict) -> None:
    assert sorted(corpus) == ["train", "validation"]
    for split in corpus.values():
        assert split.column_names == ["text", "source"]
    texts = list(corpus["train"]["text"]) + list(corpus["validation"]["text"])
    # Measured 3,577 docs / 1,398,245 chars on 3.11; the margin covers other Python versions.
    assert len(texts) > 2000
    assert sum(map(len, texts)) > 1_000_000
    assert min(map(len, texts)) >= 100
    assert len(set(texts)) == len(texts), "exact duplicates must be dropped"
    # ~5% validation (1 in 20 by hash), disjoint from train.
    assert 0.02 < len(corpus["validation"]) / len(texts) < 0.09
    assert not set(corpus["train"]["text"]) & set(corpus["validation"]["text"])
    sources = set(corpus["train"]["source"])
    assert all(s.endswith(".py") and not s.startswith("/") for s in sources)
    skipped = {"test", "tests", "idlelib", "site-packages", "lib2to3", "ensurepip", "turtledemo"}
    assert not any(skipped & set(s.split("/")) for s in sources)
    assert "json/__init__.py" in sources  # a module every CPython has, with long docstrings
    assert any("JSON" in t for t in texts)


def test_corpus_is_deterministic_and_reloads_from_cache(
    corpus: datasets.DatasetDict, cache_dir: Path, tmp_path: Path
) -> None:
    fresh = build_stdlib_docstring_corpus(tmp_path)  # a second, independent build
    for name in ("train", "validation"):
        assert fresh[name].to_dict() == corpus[name].to_dict()
    version = f"py{sys.version_info.major}.{sys.version_info.minor}"
    folders = [p.name for p in tmp_path.iterdir()]
    assert len(folders) == 1 and version in folders[0] and "_v" in folders[0]
    assert _no_temp_leftovers(tmp_path) == []


def test_cached_corpus_is_reused_not_rebuilt(
    corpus: datasets.DatasetDict, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_rebuild(root: Path) -> datasets.DatasetDict:
        raise AssertionError("the cache should have been loaded")

    monkeypatch.setattr(hdata, "_collect_stdlib_docstrings", must_not_rebuild)
    again = build_stdlib_docstring_corpus(cache_dir)
    assert again["validation"].to_dict() == corpus["validation"].to_dict()
    assert len(again["train"]) == len(corpus["train"])


def test_cache_dir_defaults_to_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HDET_HF_CACHE", str(tmp_path / "from_env"))
    assert hdata.default_cache_dir() == tmp_path / "from_env"


def test_atomic_build_leaves_nothing_when_the_build_crashes(tmp_path: Path) -> None:
    target = tmp_path / "cache"

    def crash(tmp: Path) -> None:
        (tmp / "half_written.arrow").write_text("partial")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError, match="mid-build"):
        hdata._build_atomically(target, crash)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_build_keeps_the_first_copy_when_builders_race(tmp_path: Path) -> None:
    target = tmp_path / "cache"

    def slow_builder(tmp: Path) -> None:
        (tmp / "who").write_text("second")
        # Another process finishes first while this one is still writing.
        hdata._build_atomically(target, lambda t: (t / "who").write_text("first"))

    hdata._build_atomically(target, slow_builder)  # must not raise
    assert (target / "who").read_text() == "first"
    assert _no_temp_leftovers(tmp_path) == []


def _main_first_worker(rank: int, world_size: int, init_file: str, marker: str, out_dir: str) -> None:
    import torch.distributed as dist

    os.environ["LOCAL_RANK"] = str(rank)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        with hdata._local_main_process_first():
            if rank == 0:
                time.sleep(1.0)  # rank 1 would see no marker if it did not wait
                Path(marker).write_text("built")
            seen = Path(marker).exists()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"saw_cache": seen}))
    finally:
        dist.destroy_process_group()


def test_local_main_process_builds_first_with_real_processes(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    torch.multiprocessing.spawn(
        _main_first_worker, args=(2, str(tmp_path / "init"), str(marker), str(tmp_path)), nprocs=2, join=True
    )
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results == [{"saw_cache": True}, {"saw_cache": True}]


# ---------------------------------------------------------------- tokenizer


def test_tokenizer_round_trips_and_has_special_tokens(tokenizer, corpus: datasets.DatasetDict) -> None:
    assert len(tokenizer) == 4096
    assert (tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert tokenizer.pad_token_id == 3
    sentence = "Return a new dict, ignoring  NaN values;\n\tnaïve café — 日本 🎉."
    ids = tokenizer(sentence)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == sentence
    # Learned merges, not bytes: measured ~0.28 tokens per character on the validation split.
    val = list(corpus["validation"]["text"])
    n_tokens = sum(len(x) for x in tokenizer(val)["input_ids"])
    assert n_tokens / sum(map(len, val)) < 0.4


def test_tokenizer_is_cached_and_deterministic(
    tokenizer, corpus: datasets.DatasetDict, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retrained = train_default_tokenizer(corpus, vocab_size=4096, cache_dir=tmp_path)
    assert retrained.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    assert any(p.name.startswith("tokenizer_bpe4096_") for p in cache_dir.iterdir())

    def must_not_retrain(texts: list[str], vocab_size: int):
        raise AssertionError("the cached tokenizer should have been loaded")

    monkeypatch.setattr(hdata, "_train_bpe", must_not_retrain)
    cached = train_default_tokenizer(corpus, vocab_size=4096, cache_dir=cache_dir)
    assert cached.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_tokenizer_rejects_a_vocab_smaller_than_the_byte_alphabet(corpus: datasets.DatasetDict) -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        train_default_tokenizer(corpus, vocab_size=100)


# ---------------------------------------------------------------- grouping


def test_group_texts_makes_exact_blocks_of_the_token_stream(tokenizer, corpus: datasets.DatasetDict) -> None:
    block = 64
    val = corpus["validation"]  # < 1000 docs: one map batch, so only the final remainder is dropped
    lm = group_texts_for_clm(val, tokenizer, block_size=block)
    assert lm.column_names == ["input_ids", "attention_mask", "labels"]
    stream = [t for ids in tokenizer(list(val["text"]))["input_ids"] for t in ids + [tokenizer.eos_token_id]]
    assert len(lm) == len(stream) // block
    rows = lm[:]
    for input_ids, mask, labels in zip(
        rows["input_ids"], rows["attention_mask"], rows["labels"], strict=True
    ):
        assert len(input_ids) == block
        assert labels == input_ids
        assert mask == [1] * block
    flat = [t for row in rows["input_ids"] for t in row]
    assert flat == stream[: len(flat)]


def test_group_texts_validates_its_inputs(tokenizer, corpus: datasets.DatasetDict) -> None:
    with pytest.raises(ValueError, match="block_size"):
        group_texts_for_clm(corpus["validation"], tokenizer, block_size=0)
    with pytest.raises(ValueError, match="text_column"):
        group_texts_for_clm(corpus["validation"], tokenizer, block_size=8, text_column="body")


def test_load_default_task(cache_dir: Path) -> None:
    tokenizer, lm = load_default_task(block_size=32, cache_dir=cache_dir)
    assert sorted(lm) == ["train", "validation"]
    assert len(lm["train"]) > 5000  # 1.4M chars / ~3.5 chars per token / 32
    assert {len(x) for x in lm["validation"]["input_ids"]} == {32}
    assert len(tokenizer) == 4096


# ---------------------------------------------------------------- model


def test_default_model_config_is_shipped_and_measured(tokenizer) -> None:
    assert DEFAULT_MODEL_CONFIG_PATH.is_file()
    model = build_default_model(tokenizer)
    assert sum(p.numel() for p in model.parameters()) == 3_950_848
    assert model.config.tie_word_embeddings


def test_default_model_builds_with_overrides_and_trains(tokenizer, corpus: datasets.DatasetDict) -> None:
    torch.manual_seed(0)
    model = build_default_model(tokenizer, hidden_size=64, num_hidden_layers=2, intermediate_size=128)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim) == (64, 2, 16)
    assert cfg.vocab_size == len(tokenizer)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (1, 2, 3)
    batch = group_texts_for_clm(corpus["validation"], tokenizer, block_size=32)[:4]
    out = model(input_ids=torch.tensor(batch["input_ids"]), labels=torch.tensor(batch["labels"]))
    # Random init predicts ~uniformly: loss near ln(4096) = 8.3.
    assert math.isfinite(out.loss.item()) and 6.0 < out.loss.item() < 11.0
    out.loss.backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


def test_default_model_rejects_unknown_overrides(tokenizer) -> None:
    with pytest.raises(ValueError, match="hidden_sise"):
        build_default_model(tokenizer, hidden_sise=64)


# ---------------------------------------------------------------- metrics

_METRIC_SCRIPT = textwrap.dedent(
    """
    import json
    from hdet_hf.examples.metrics import load_metric

    ppl = load_metric("lm_perplexity")
    out = {"weighted": ppl.compute(losses=[1.0, 3.0], num_tokens=[1, 3]),
           "unweighted": ppl.compute(losses=[1.0, 3.0])}
    ppl.add_batch(losses=[1.0], num_tokens=[1])
    ppl.add_batch(losses=[3.0], num_tokens=[3])
    out["accumulated"] = ppl.compute()
    acc = load_metric("token_accuracy")
    out["accuracy"] = acc.compute(predictions=[5, 6, 7, 8, 9], references=[5, 0, 7, -100, -100])
    print(json.dumps(out))
    """
)


def test_metrics_load_offline_and_compute_the_right_numbers(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_EVALUATE_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf_home"),  # empty caches: nothing may come from an earlier download
        HF_ENDPOINT="http://127.0.0.1:9",  # and any attempt to reach the Hub fails fast
        PYTHONPATH=os.pathsep.join([str(PACKAGE_PARENT), *sys.path]),
    )
    proc = subprocess.run(
        [sys.executable, "-c", _METRIC_SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["weighted"]["loss"] == pytest.approx(2.5)
    assert out["weighted"]["perplexity"] == pytest.approx(math.exp(2.5))
    assert out["unweighted"]["loss"] == pytest.approx(2.0)
    assert out["unweighted"]["perplexity"] == pytest.approx(math.exp(2.0))
    assert out["accumulated"] == out["weighted"]
    assert out["accuracy"] == {"accuracy": pytest.approx(2 / 3), "num_tokens": 3}


def test_load_metric_rejects_unknown_names() -> None:
    from hdet_hf.examples.metrics import AVAILABLE_METRICS, load_metric

    with pytest.raises(ValueError, match="lm_perplexity.*token_accuracy"):
        load_metric("nope")
    assert set(AVAILABLE_METRICS) == {"lm_perplexity", "token_accuracy"}
