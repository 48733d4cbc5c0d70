"""`HDETTrainingArguments`: `transformers.TrainingArguments` plus one ``--hdet_<name>`` flag per `HDETConfig` field.

Each ``hdet_<name>`` field is declared on the class with its type, so type checkers and IDEs see it; its
default and help text are read from the `HDETConfig` field of the same name (`hdet_field`), the one place they
are written. ``tests/test_training_args.py`` checks that the declared names, order and types match
`HDETConfig`, so the flags, the Python API and the docs cannot disagree. `with_hdet_arguments` copies the same
fields onto other argument classes (Seq2SeqTrainingArguments, TRL's configs).

Example:
    >>> from transformers import HfArgumentParser
    >>> from hdet_hf import HDETTrainingArguments
    >>> (args,) = HfArgumentParser(HDETTrainingArguments).parse_args_into_dataclasses(
    ...     ["--output_dir", "out", "--hdet", "--hdet_lr_spread", "0.3", "--hdet_sync_interval", "20"]
    ... )
    >>> args.hdet_config.sync_interval
    20
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
import warnings
from typing import Any

from transformers import TrainingArguments

from .config import HDETConfig
from .process import accelerator_available, launched_world_size

__all__ = ["HDETTrainingArguments", "with_hdet_arguments", "hdet_field", "hdet_argument_fields"]

UNSUPPORTED_BACKENDS = ("fsdp", "deepspeed")

HDET_HELP = (
    "Enable Hyperparameter-Divergent Ensemble Training. Off: HDETTrainer behaves exactly like transformers.Trainer."
)


@functools.cache
def _config_fields(config: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(config)}


def _copy_field(source: dataclasses.Field) -> Any:
    # A new Field each time: dataclasses writes the owner's name into a Field, so two classes cannot share one.
    metadata = dict(source.metadata)
    if source.type in ("bool | None", bool | None) and source.default is None:
        # HfArgumentParser makes a `bool | None` flag take a value (`--flag true`, as transformers' --tf32); the
        # metadata's argparse settings let the bare flag mean true as it does for a plain bool.
        metadata.update(nargs="?", const=True)
    if source.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=source.default_factory, metadata=metadata)
    return dataclasses.field(default=source.default, metadata=metadata)


def hdet_field(name: str, config: type = HDETConfig) -> Any:
    """The dataclass field behind ``--hdet_<name>``: the default and help text of ``config``'s field ``name``.

    ``config`` is `HDETConfig`, or a subclass of it that adds settings.

    Example:
        >>> hdet_field("sync_interval").default
        0.03
    """
    fields = _config_fields(config)
    if name not in fields:
        raise ValueError(
            f"{config.__name__} has no field {name!r}, so there is no --hdet_{name} to declare; "
            f"expected one of {', '.join(fields)}."
        )
    return _copy_field(fields[name])


@dataclasses.dataclass
class HDETTrainingArguments(TrainingArguments):
    """`transformers.TrainingArguments` plus the ``--hdet*`` flags: ``hdet`` switches HDET on, and each
    ``hdet_<name>`` is `HDETConfig`'s ``name`` (same default, same help text). ``args.hdet_config`` holds the
    validated `HDETConfig` (validated also with ``hdet=False``, so a typo is never silently ignored).

    Example:
        >>> args = HDETTrainingArguments(output_dir="out", hdet=True, hdet_sync_interval=20)
        >>> args.hdet_sync_interval, args.hdet_config.sync_interval, args.hdet_config.lr_spread
        (20, 20, 0.25)
    """

    hdet: bool = dataclasses.field(default=False, metadata={"help": HDET_HELP})
    hdet_lr_spread: float = hdet_field("lr_spread")
    hdet_sync_interval: float = hdet_field("sync_interval")
    hdet_comparison_horizon: float | None = hdet_field("comparison_horizon")
    hdet_comparison_horizon_start: float = hdet_field("comparison_horizon_start")
    hdet_early_comparison: str = hdet_field("early_comparison")
    hdet_lr_fan_out_scale: float = hdet_field("lr_fan_out_scale")
    hdet_gradient_sync: str = hdet_field("gradient_sync")
    hdet_auto_lr: bool = hdet_field("auto_lr")
    hdet_auto_lr_warmup_steps: float = hdet_field("auto_lr_warmup_steps")
    hdet_controller_temperature: float = hdet_field("controller_temperature")
    hdet_controller_temperature_mode: str = hdet_field("controller_temperature_mode")
    hdet_controller_noise_floor: str = hdet_field("controller_noise_floor")
    hdet_controller_abstain_within_noise: str = hdet_field("controller_abstain_within_noise")
    hdet_controller_lr: float = hdet_field("controller_lr")
    hdet_controller_momentum: float = hdet_field("controller_momentum")
    hdet_controller_update: str = hdet_field("controller_update")
    hdet_controller_time_scale: str = hdet_field("controller_time_scale")
    hdet_keep_fan_out_between_votes: bool = hdet_field("keep_fan_out_between_votes")
    hdet_controller_raise_gain: float = hdet_field("controller_raise_gain")
    hdet_controller_two_replica_cut_gain: float = hdet_field("controller_two_replica_cut_gain")
    hdet_controller_signal_combination: str = hdet_field("controller_signal_combination")
    hdet_controller_floor_after_peak: bool = hdet_field("controller_floor_after_peak")
    hdet_controller_line_search_threshold: float = hdet_field("controller_line_search_threshold")
    hdet_controller_line_search_max_raise: float = hdet_field("controller_line_search_max_raise")
    hdet_controller_line_search_breaks_ties: bool = hdet_field("controller_line_search_breaks_ties")
    hdet_controller_line_search_centre: bool = hdet_field("controller_line_search_centre")
    hdet_controller_line_search_until_bend: bool = hdet_field("controller_line_search_until_bend")
    hdet_controller_max_factor: float = hdet_field("controller_max_factor")
    hdet_start_race_steps: int | None = hdet_field("start_race_steps")
    hdet_start_race_lowers: bool | None = hdet_field("start_race_lowers")
    hdet_start_race_raise_to: str = hdet_field("start_race_raise_to")
    hdet_start_race_raise_on: str = hdet_field("start_race_raise_on")
    hdet_start_race_stall_ceiling: bool | None = hdet_field("start_race_stall_ceiling")
    hdet_start_race_significance: float = hdet_field("start_race_significance")
    hdet_start_race_probe_size: int | None = hdet_field("start_race_probe_size")
    hdet_start_race_batch_share: float = hdet_field("start_race_batch_share")
    hdet_start_race_lower_batch_share: float = hdet_field("start_race_lower_batch_share")
    hdet_lr_groups: bool = hdet_field("lr_groups")
    hdet_weight_decay_spread: float = hdet_field("weight_decay_spread")
    hdet_weight_decay_auto: bool = hdet_field("weight_decay_auto")
    hdet_dropout_spread: float = hdet_field("dropout_spread")
    hdet_dropout_auto: bool = hdet_field("dropout_auto")
    hdet_dropout_base: float = hdet_field("dropout_base")
    hdet_label_smoothing_spread: float = hdet_field("label_smoothing_spread")
    hdet_label_smoothing_auto: bool = hdet_field("label_smoothing_auto")
    hdet_attention_temperature_spread: float = hdet_field("attention_temperature_spread")
    hdet_attention_temperature_auto: bool = hdet_field("attention_temperature_auto")
    hdet_seed: int = hdet_field("seed")
    hdet_controller_signal: str = hdet_field("controller_signal")
    hdet_averaged_probe_share: float = hdet_field("averaged_probe_share")
    hdet_probe_size: int = hdet_field("probe_size")
    hdet_probe_sampling: str = hdet_field("probe_sampling")
    hdet_cooldown_steps: int = hdet_field("cooldown_steps")
    hdet_cooldown_batch_size: int = hdet_field("cooldown_batch_size")
    hdet_cooldown_lr: str = hdet_field("cooldown_lr")
    hdet_explore_until: float = hdet_field("explore_until")
    hdet_sync_warmup_steps: float = hdet_field("sync_warmup_steps")
    hdet_divergence_factor: float = hdet_field("divergence_factor")
    hdet_outer_lr: float = hdet_field("outer_lr")
    hdet_outer_momentum: float = hdet_field("outer_momentum")
    hdet_average_optimizer_state: bool = hdet_field("average_optimizer_state")
    hdet_bucket_size_mb: float = hdet_field("bucket_size_mb")
    hdet_base_schedule: str = hdet_field("base_schedule")
    hdet_converge_weights: str = hdet_field("converge_weights")
    hdet_hsdp_shard_size: int = hdet_field("hsdp_shard_size")

    def __post_init__(self) -> None:
        _see_cpu_launch(self)
        super().__post_init__()
        self.hdet_config: HDETConfig = _check_hdet_arguments(self)


def hdet_argument_fields(cls: type = HDETTrainingArguments) -> list[tuple[str, Any, Any]]:
    """``(name, type, field)`` of every field ``cls`` adds to `TrainingArguments` (the ``hdet*`` ones), with
    the annotations resolved into real types (``int | None`` included), as `dataclasses.make_dataclass` takes
    them."""
    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    types = typing.get_type_hints(cls)
    return [
        (f.name, types[f.name], _copy_field(f)) for f in dataclasses.fields(cls) if f.name not in inherited
    ]


def _check_hdet_arguments(self: Any) -> HDETConfig:
    """The validated `HDETConfig` of these arguments, after the checks that need the Trainer's own flags."""
    # Validate the HDET fields even when --hdet is off, so a typo is not silently ignored.
    config = HDETConfig(**{name: getattr(self, f"hdet_{name}") for name in HDETConfig.field_names()})
    if not self.hdet:
        return config
    for backend in UNSUPPORTED_BACKENDS:
        if getattr(self, backend, None):
            raise ValueError(
                f"--hdet does not run with --{backend}: HDET averages replicas, and a model sharded over every "
                "process leaves no replicas to average. For a model that does not fit on one device use HDET's "
                f"HSDP route instead: drop --{backend} and pass --hdet_hsdp_shard_size N (FSDP2 inside each group "
                "of N processes, one ensemble member per group; see the README). Or drop --hdet."
            )
    if config.base_schedule == "trainer" and str(self.lr_scheduler_type) in (
        "reduce_lr_on_plateau",
        "SchedulerType.REDUCE_ON_PLATEAU",
    ):
        # It steps on evaluation metrics, not per optimizer step; HDET sets each rank's LR every step.
        raise ValueError(
            "--lr_scheduler_type reduce_lr_on_plateau cannot be HDET's base schedule (--hdet_base_schedule "
            "trainer): it changes the LR only when given an evaluation metric, while HDET sets every rank's LR "
            "at every optimizer step. Use --hdet_base_schedule one_cycle, or another --lr_scheduler_type "
            "(e.g. cosine)."
        )
    if config.base_schedule == "one_cycle" and str(self.lr_scheduler_type) not in (
        "linear",
        "SchedulerType.LINEAR",
    ):
        warnings.warn(
            f"--lr_scheduler_type {self.lr_scheduler_type} is ignored because --hdet_base_schedule is one_cycle; "
            "pass --hdet_base_schedule trainer to keep it.",
            stacklevel=2,
        )
    if config.gradient_sync == "local":
        # No DDP wrapper in local mode, hence no DDP buffer broadcast either: buffers are handled at converges.
        self.ddp_broadcast_buffers = False
        # The Trainer all-gathers token counts every step to normalise the loss across devices, because DDP
        # averages gradients. Local replicas step on their own gradients, so that per-step collective
        # would be the only communication left between converges, and is not needed.
        self.average_tokens_across_devices = False
    return config


def _see_cpu_launch(self: Any) -> None:
    """On a machine without GPUs, make the Trainer see the processes ``torchrun``/``accelerate launch`` started.

    Accelerate picks the CPU multi-process backend (gloo) only when asked (``use_cpu`` or
    ``ACCELERATE_USE_CPU``); the torchrun path of ``accelerate launch`` does not pass a config's ``use_cpu`` on.
    Without it each process runs as "rank 0 of 1" and trains alone on all the data. With ``--hdet`` that
    silently explores nothing, so we set ``use_cpu`` here, before the Trainer sets up its devices.
    """
    if getattr(self, "hdet", False) and not self.use_cpu and launched_world_size() > 1:
        if not accelerator_available():
            self.use_cpu = True


# One generated class per base: asking twice gives the same class, and unpickling can find it again.
_GENERATED: dict[type, type] = {}


def _new_hdet_arguments(base_module: str, base_qualname: str) -> Any:
    """Pickle's constructor for an instance of ``with_hdet_arguments(base)``; pickle then restores its fields.

    ``base`` is looked up by name, not pickled by reference: while `hdet_hf.launch` runs a script, the name
    ``transformers.TrainingArguments`` (and the Seq2Seq one) is bound to its HDET class itself."""
    base: Any = importlib.import_module(base_module)
    for part in base_qualname.split("."):
        base = getattr(base, part)
    cls = base if base in _GENERATED.values() else with_hdet_arguments(base)
    return cls.__new__(cls)


def with_hdet_arguments(base: type[TrainingArguments]) -> type[TrainingArguments]:
    """A dataclass that extends ``base`` (TrainingArguments or a subclass such as Seq2SeqTrainingArguments or
    TRL's SFTConfig) with the ``--hdet*`` fields and their validation. `hdet_hf.launch` uses it on stock scripts.

    Instances pickle (the Trainer saves them as ``training_args.bin`` with every checkpoint), also in a process
    that never called this function, as long as ``base`` itself can be imported.

    Example:
        >>> import pickle
        >>> from transformers import Seq2SeqTrainingArguments
        >>> Args = with_hdet_arguments(Seq2SeqTrainingArguments)
        >>> args = Args(output_dir="out", hdet=True, predict_with_generate=True)
        >>> type(pickle.loads(pickle.dumps(args))) is Args is with_hdet_arguments(Seq2SeqTrainingArguments)
        True
    """
    if base in _GENERATED:
        return _GENERATED[base]

    def __post_init__(self: Any) -> None:
        _see_cpu_launch(self)
        base.__post_init__(self)
        self.hdet_config = _check_hdet_arguments(self)

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        # The generated class cannot be imported by name, so pickle "with_hdet_arguments(base)" plus the
        # fields. A subclass of it defined in user code can be imported: it pickles the default way.
        if type(self) is not generated:
            return super(generated, self).__reduce_ex__(protocol)
        return _new_hdet_arguments, (base.__module__, base.__qualname__), self.__dict__

    generated = dataclasses.make_dataclass(
        f"HDET{base.__name__}",
        hdet_argument_fields(HDETTrainingArguments),
        bases=(base,),
        namespace={
            "__post_init__": __post_init__,
            "__reduce_ex__": __reduce_ex__,
            "__doc__": f"{base.__name__} plus the `--hdet*` flags (one per HDETConfig field, same help text).",
            "__module__": __name__,
        },
    )
    _GENERATED[base] = generated
    return generated


# The declared class is the HDET version of TrainingArguments itself: it pickles by name, and checkpoints
# pickled when it was generated (through `_new_hdet_arguments`) load into it.
_GENERATED[TrainingArguments] = HDETTrainingArguments
