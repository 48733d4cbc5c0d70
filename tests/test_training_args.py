"""`HDETTrainingArguments` declares its ``hdet_*`` fields (visible to type checkers) with `HDETConfig`'s defaults and
help text, and optional (``X | None``) settings work through `HfArgumentParser`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from dataclasses import dataclass

import pytest
from transformers import HfArgumentParser, Seq2SeqTrainingArguments, TrainingArguments

import hdet_hf.training_args as training_args
from hdet_hf import HDETConfig, HDETTrainingArguments
from hdet_hf.training_args import hdet_argument_fields, hdet_field, with_hdet_arguments


def _declared_in_class_body() -> list[str]:
    """The annotated names written in ``class HDETTrainingArguments`` (what a type checker or IDE reads)."""
    tree = ast.parse(inspect.getsource(training_args))
    body = next(
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HDETTrainingArguments"
    ).body
    return [n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def test_every_config_field_is_declared_in_the_class_body_in_order():
    wanted = ["hdet", *(f"hdet_{name}" for name in HDETConfig.field_names())]
    declared = _declared_in_class_body()
    missing = [
        f"    hdet_{f.name}: {f.type} = hdet_field({f.name!r})"
        for f in dataclasses.fields(HDETConfig)
        if f"hdet_{f.name}" not in declared
    ]
    assert declared == wanted, "declare in HDETTrainingArguments (same order as HDETConfig):\n" + "\n".join(
        missing
    )


def test_declared_types_defaults_and_help_are_the_config_fields():
    declared_types = typing.get_type_hints(HDETTrainingArguments)
    config_types = typing.get_type_hints(HDETConfig)
    declared = {f.name: f for f in dataclasses.fields(HDETTrainingArguments)}
    for f in dataclasses.fields(HDETConfig):
        flag = declared[f"hdet_{f.name}"]
        assert declared_types[flag.name] == config_types[f.name], flag.name
        assert flag.default == f.default, flag.name
        # Help text and choices: one source (a `bool | None` flag adds the argparse settings of a bare flag).
        added = {"nargs": "?", "const": True} if config_types[f.name] == bool | None else {}
        assert dict(flag.metadata) == {**f.metadata, **added}, flag.name


def test_other_bases_get_the_same_typed_fields():
    generated = with_hdet_arguments(Seq2SeqTrainingArguments)
    ours = typing.get_type_hints(HDETTrainingArguments)
    theirs = typing.get_type_hints(generated)
    names = [name for name, _, _ in hdet_argument_fields()]
    assert names == ["hdet", *(f"hdet_{name}" for name in HDETConfig.field_names())]
    assert {n: theirs[n] for n in names} == {n: ours[n] for n in names}
    (args,) = HfArgumentParser(generated).parse_args_into_dataclasses(
        ["--output_dir", "out", "--hdet", "--hdet_sync_interval", "7", "--predict_with_generate"]
    )
    assert (args.hdet_config.sync_interval, args.predict_with_generate) == (7, True)


def test_hdet_field_refuses_a_name_the_config_lacks():
    with pytest.raises(ValueError, match="HDETConfig has no field 'sync_intervall'.*sync_interval"):
        hdet_field("sync_intervall")


# A config that adds an optional setting, declared the way HDETTrainingArguments declares its fields.
@dataclass
class _ConfigWithOptional(HDETConfig):
    probe_every: int | None = dataclasses.field(
        default=None, metadata={"help": "Score the probe every N converges; unset: every converge."}
    )


@dataclass
class _ArgsWithOptional(TrainingArguments):
    hdet_probe_every: int | None = hdet_field("probe_every", _ConfigWithOptional)


def test_an_optional_setting_validates_none_and_its_type():
    assert _ConfigWithOptional().probe_every is None
    assert _ConfigWithOptional(probe_every=3).probe_every == 3
    with pytest.raises(ValueError, match="--hdet_probe_every must be a number, but got 'often'"):
        _ConfigWithOptional(probe_every="often")


@pytest.mark.parametrize("make_class", ["declared", "copied onto another base"])
def test_an_optional_flag_parses_to_none_or_its_value(make_class):
    cls = _ArgsWithOptional
    if make_class != "declared":
        # What with_hdet_arguments does for TRL's configs: copy the fields with their resolved types.
        cls = dataclasses.make_dataclass(
            "Copied", hdet_argument_fields(_ArgsWithOptional), bases=(TrainingArguments,)
        )
        assert typing.get_type_hints(cls)["hdet_probe_every"] == int | None
    parser = HfArgumentParser(cls)
    (unset,) = parser.parse_args_into_dataclasses(["--output_dir", "out"])
    (given,) = parser.parse_args_into_dataclasses(["--output_dir", "out", "--hdet_probe_every", "5"])
    assert (unset.hdet_probe_every, given.hdet_probe_every) == (None, 5)
    help_text = {a.dest: a.help for a in parser._actions}["hdet_probe_every"]
    assert help_text == "Score the probe every N converges; unset: every converge."


@pytest.mark.parametrize("base", [TrainingArguments, Seq2SeqTrainingArguments])
def test_an_optional_switch_takes_the_bare_flag_true_false_or_nothing(base):
    # `--hdet_start_race_lowers` is `bool | None` (unset: the default's behaviour); HfArgumentParser alone would
    # make it take a value, as transformers' own --tf32 does.
    cls = HDETTrainingArguments if base is TrainingArguments else with_hdet_arguments(base)
    parser = HfArgumentParser(cls)
    common = ["--output_dir", "out", "--hdet", "--hdet_auto_lr"]
    for flags, value in [([], None), (["--hdet_start_race_lowers"], True), (["--hdet_start_race_lowers", "false"], False),
                         (["--hdet_start_race_lowers", "true"], True)]:  # fmt: skip
        (args,) = parser.parse_args_into_dataclasses([*common, *flags])
        assert args.hdet_start_race_lowers is value and args.hdet_config.start_race_lowers is value, flags
