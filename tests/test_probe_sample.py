"""The shared probe's examples: spread over an ordered dataset, the same on every rank, left out of race batches."""

from types import MethodType, SimpleNamespace

import pytest
import torch
from datasets import Dataset

from hdet_hf import HDETConfig, probe_indices
from hdet_hf.probe_sample import DEFAULT_RACE_PROBE_SIZE, indices_without, race_probe_size
from hdet_hf.trainer import HDETTrainerMixin
from hdet_hf.trainer_race import _race_examples, run_start_race


def test_spread_indices_are_distinct_evenly_spaced_and_start_at_the_first_example():
    assert probe_indices(10, 5) == [0, 2, 4, 6, 8]
    assert probe_indices(1519, 32)[:3] == [0, 47, 94] and probe_indices(1519, 32)[-1] == 1471
    for n in (1, 7, 32, 33, 100, 1519):
        indices = probe_indices(n, 32)
        assert len(set(indices)) == len(indices) == min(n, 32) and indices == sorted(indices)
        assert indices[0] == 0 and indices[-1] < n
    assert probe_indices(10, 5, "first") == [0, 1, 2, 3, 4]
    assert probe_indices(3, 32) == probe_indices(3, 32, "first") == [0, 1, 2]  # a set smaller than the probe
    with pytest.raises(ValueError, match="sampling must be one of spread, first"):
        probe_indices(10, 5, "random")


def test_indices_without_the_probe_keep_the_rest_in_order_and_never_leave_nothing():
    assert indices_without(6, [0, 3]) == [1, 2, 4, 5]
    assert indices_without(3, [0, 1, 2]) == [0, 1, 2]  # all of it rather than nothing to train on


def _trainer(train, eval_dataset=None, **config):
    """Just what the probe and race helpers read from an HDETTrainer."""
    trainer = SimpleNamespace(
        args=SimpleNamespace(hdet_config=HDETConfig(**config), seed=0),
        train_dataset=train,
        eval_dataset=eval_dataset,
        _remove_unused_columns=lambda dataset, description=None: dataset,
        is_world_process_zero=lambda: True,
    )
    for name in ("_probe_dataset", "_probe_examples", "_race_probe_size", "_train_indices_without_probe"):
        setattr(trainer, name, MethodType(getattr(HDETTrainerMixin, name), trainer))
    return trainer


# A classification set sorted by label, as the benchmark's docstring task and many Hub datasets (IMDB) are.
SORTED = Dataset.from_dict({"x": list(range(800)), "labels": [i // 100 for i in range(800)]})


def test_the_race_probe_is_128_or_a_quarter_of_a_train_set_it_comes_from_and_a_set_size_as_it_is():
    assert race_probe_size(None, 32) == DEFAULT_RACE_PROBE_SIZE == 128  # from an eval set
    assert [race_probe_size(None, 32, n) for n in (10_000, 512, 511, 400, 128, 100, 10)] == [128, 128, 127, 100, 32, 32, 32]
    assert race_probe_size(None, 64, 100) == 64  # never below the controller's probe
    assert race_probe_size(200, 32, 100) == race_probe_size(200, 32) == 200  # a user's size is not capped


def test_the_default_probe_of_a_label_sorted_set_holds_every_label_and_first_only_one():
    spread = _trainer(SORTED)._probe_examples(32)
    assert len(spread) == 32 and {e["labels"] for e in spread} == set(range(8))
    assert [e["x"] for e in spread] == probe_indices(800, 32)
    first = _trainer(SORTED, probe_sampling="first")._probe_examples(32)
    assert {e["labels"] for e in first} == {0}  # the rule before session 50: one class
    # A plain list (no `select`) takes the same examples.
    assert _trainer(list(SORTED))._probe_examples(32) == spread
    # With an eval set the probe comes from it, spread the same way.
    held_out = Dataset.from_dict({"x": [1000 + i for i in range(64)], "labels": [i // 8 for i in range(64)]})
    assert [e["x"] for e in _trainer(SORTED, held_out)._probe_examples(32)] == [1000 + 2 * i for i in range(32)]


def test_race_batches_leave_out_the_probes_examples_when_the_probe_comes_from_the_train_set():
    probe = set(probe_indices(800, 32))
    trainer = _trainer(SORTED, auto_lr=True)
    drawn = {e["x"] for batch in _race_examples(trainer, 50, 12) for e in batch}
    assert len(drawn) == 600 and not drawn & probe  # 50 x 12 distinct examples, none of the probe's
    # With an eval set the probe is not trained on anyway: the race may draw any train example.
    with_eval = _trainer(SORTED, Dataset.from_dict({"x": [0], "labels": [0]}), auto_lr=True)
    assert _trainer(SORTED)._train_indices_without_probe(800) != with_eval._train_indices_without_probe(800)
    assert with_eval._train_indices_without_probe(800) == list(range(800))
    # The old rule left out the first probe_size examples, and draws the same batches as before session 50.
    first = _trainer(SORTED, auto_lr=True, probe_sampling="first", start_race_probe_size=32)
    generator = torch.Generator().manual_seed(40)  # --seed 0
    before = (32 + torch.randperm(800 - 32, generator=generator)).tolist()
    assert [[e["x"] for e in batch] for batch in _race_examples(first, 60, 12)] == [
        before[i * 12 : (i + 1) * 12] for i in range(60)
    ]


def test_an_empty_eval_set_gives_the_probe_from_the_train_set_and_the_race_leaves_it_out():
    # The probe falls back to the train set when the eval set cannot give a batch; the race must then not train on it.
    empty = Dataset.from_dict({"x": [], "labels": []})
    trainer = _trainer(SORTED, empty, auto_lr=True)
    assert [e["x"] for e in trainer._probe_examples(32)] == probe_indices(800, 32)
    assert not set(trainer._train_indices_without_probe(800)) & set(probe_indices(800, 32))
    drawn = {e["x"] for batch in _race_examples(trainer, 60, 12) for e in batch}
    assert not drawn & set(probe_indices(800, 32))
    # A dict of eval sets is read through its first one, as the probe does.
    assert _trainer(SORTED, {"a": empty}, auto_lr=True)._train_indices_without_probe(800) == (
        trainer._train_indices_without_probe(800)
    )


def test_the_race_scores_on_its_own_larger_probe_and_trains_on_none_of_its_examples():
    # Its tests are paired over the probe's examples, once per run: 128 by default, the controller's probe stays 32.
    requested = []

    class Asked(Exception):
        pass

    def probe_examples(size, needed_by=None):
        requested.append((size, needed_by))
        raise Asked

    trainer = _trainer(SORTED, auto_lr=True)
    trainer.hdet_engine = SimpleNamespace(world_size=2)
    trainer.accelerator = SimpleNamespace(unwrap_model=lambda model: model)
    trainer.model, trainer.optimizer = torch.nn.Linear(1, 1), None
    trainer._probe_examples = probe_examples
    with pytest.raises(Asked):
        run_start_race(trainer, 60)
    assert requested == [(128, "--hdet_start_race_steps")]
    # Unset, a train-set probe takes at most a quarter of the set (never fewer than the controller's 32); an eval
    # set's probe, or a size a user sets, is not capped.
    small = Dataset.from_dict({"x": list(range(400)), "labels": [i % 8 for i in range(400)]})
    assert _trainer(small, auto_lr=True)._race_probe_size() == 100
    assert _trainer(small, SORTED, auto_lr=True)._race_probe_size() == 128
    assert _trainer(small, auto_lr=True, start_race_probe_size=128)._race_probe_size() == 128
    assert _trainer(SORTED, auto_lr=True)._race_probe_size() == 128
    # From the train set, the race's batches leave out both probes' examples (the controller's 32 are among the 128
    # when spread; with another size, the union).
    for race_probe in (128, 100):
        trainer = _trainer(SORTED, auto_lr=True, start_race_probe_size=race_probe)
        drawn = {e["x"] for batch in _race_examples(trainer, 60, 12) for e in batch}
        assert not drawn & (set(probe_indices(800, race_probe)) | set(probe_indices(800, 32)))
    with pytest.raises(ValueError, match="--hdet_start_race_probe_size must be an integer >= 2"):
        HDETConfig(auto_lr=True, start_race_probe_size=1)


def test_a_train_set_too_small_for_the_race_says_so(caplog):
    # 800 examples less the race's 128-example probe leave 672: 60 steps of 12 repeat some (a warning, not an error).
    trainer = _trainer(SORTED, auto_lr=True)
    with caplog.at_level("WARNING", logger="hdet_hf.trainer_race"):
        _race_examples(trainer, 50, 12)
        assert not caplog.records
        _race_examples(trainer, 60, 12)
    assert "672 train examples to race on, fewer than its 60 steps x 12" in caplog.text
    caplog.clear()
    # The race's second layout (the pair on its own share) draws its batches quietly: one warning a race.
    with caplog.at_level("WARNING", logger="hdet_hf.trainer_race"):
        _race_examples(trainer, 60, 12, warn=False)
    assert not caplog.records
    # A small set: the unset race probe takes a quarter of it, at least the controller's 32 (here 32 of 100).
    tiny = Dataset.from_dict({"x": list(range(100)), "labels": [i % 8 for i in range(100)]})
    with caplog.at_level("WARNING", logger="hdet_hf.trainer_race"):
        _race_examples(_trainer(tiny, auto_lr=True), 10, 12)
    assert "68 train examples to race on, fewer than its 10 steps x 12" in caplog.text
    assert "The probes take 32 of the train set. An eval_dataset gives the probes their own examples." in caplog.text
    caplog.clear()
    # A set no larger than the probe a user asked for: the race trains on the probe's examples, and says so.
    with caplog.at_level("WARNING", logger="hdet_hf.trainer_race"):
        _race_examples(_trainer(tiny, auto_lr=True, start_race_probe_size=128), 10, 12)
    assert "100 train examples to race on (all of them, the probe's too" in caplog.text
    caplog.clear()
    # With an eval set nothing is left out, and nothing overlaps.
    with caplog.at_level("WARNING", logger="hdet_hf.trainer_race"):
        _race_examples(_trainer(tiny, SORTED, auto_lr=True), 10, 12)
    assert "100 train examples to race on, fewer" in caplog.text
