"""`HDETTrainingArguments`: `transformers.TrainingArguments` plus one ``--hdet_<name>`` flag per `HDETConfig` field.

The HDET fields are generated from `HDETConfig` (name, type, default and help text), so the flags, the
Python API and the docs cannot disagree.

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
import importlib
import warnings
from typing import Any

from transformers import TrainingArguments

from .config import HDETConfig
from .process import accelerator_available, launched_world_size

__all__ = ["HDETTrainingArguments", "with_hdet_arguments"]

UNSUPPORTED_BACKENDS = ("fsdp", "deepspeed")


def _hdet_fields() -> list[tuple[str, Any, dataclasses.Field]]:
    # Resolve the string annotations of HDETConfig (it uses `from __future__ import annotations`) into
    # the real types HfArgumentParser needs.
    types = {"float": float, "int": int, "bool": bool, "str": str}
    generated = [
        (
            "hdet",
            bool,
            dataclasses.field(
                default=False,
                metadata={
                    "help": "Enable Hyperparameter-Divergent Ensemble Training. Off: HDETTrainer behaves exactly "
                    "like transformers.Trainer."
                },
            ),
        )
    ]
    for f in dataclasses.fields(HDETConfig):
        generated.append(
            (
                f"hdet_{f.name}",
                types[str(f.type)],
                dataclasses.field(default=f.default, metadata=dict(f.metadata)),
            )
        )
    return generated


def _check_hdet_arguments(self: Any) -> None:
    # Validate the HDET fields even when --hdet is off, so a typo is not silently ignored.
    self.hdet_config = HDETConfig(
        **{name: getattr(self, f"hdet_{name}") for name in HDETConfig.field_names()}
    )
    if not self.hdet:
        return
    for backend in UNSUPPORTED_BACKENDS:
        if getattr(self, backend, None):
            raise ValueError(
                f"--hdet does not support --{backend} yet: HDET averages whole replicas, which needs every rank "
                f"to hold all parameters. Drop --{backend} (plain data parallel), or drop --hdet."
            )
    if self.hdet_config.base_schedule == "trainer" and str(self.lr_scheduler_type) in (
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
    if self.hdet_config.base_schedule == "one_cycle" and str(self.lr_scheduler_type) not in (
        "linear",
        "SchedulerType.LINEAR",
    ):
        warnings.warn(
            f"--lr_scheduler_type {self.lr_scheduler_type} is ignored because --hdet_base_schedule is one_cycle; "
            "pass --hdet_base_schedule trainer to keep it.",
            stacklevel=2,
        )
    if self.hdet_config.gradient_sync == "local":
        # No DDP wrapper in local mode, hence no DDP buffer broadcast either: buffers are handled at converges.
        self.ddp_broadcast_buffers = False
        # The Trainer all-gathers token counts every step to normalise the loss across devices, because DDP
        # averages gradients. Local replicas step on their own gradients, so that per-step collective
        # would be the only communication left between converges, and is not needed.
        self.average_tokens_across_devices = False


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
    ``transformers.TrainingArguments`` (and the Seq2Seq one) is bound to the generated class itself."""
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
        _check_hdet_arguments(self)

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        # The generated class cannot be imported by name, so pickle "with_hdet_arguments(base)" plus the
        # fields. A subclass of it defined in user code can be imported: it pickles the default way.
        if type(self) is not generated:
            return super(generated, self).__reduce_ex__(protocol)
        return _new_hdet_arguments, (base.__module__, base.__qualname__), self.__dict__

    generated = dataclasses.make_dataclass(
        f"HDET{base.__name__}" if base is not TrainingArguments else "HDETTrainingArguments",
        _hdet_fields(),
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


HDETTrainingArguments = with_hdet_arguments(TrainingArguments)
HDETTrainingArguments.__doc__ += "\n\n" + __doc__.split("Example:", 1)[1].join(["Example:", ""])
