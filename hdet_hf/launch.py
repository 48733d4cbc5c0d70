"""Run an unmodified Hugging Face training script with HDET, switched on by ``--hdet*`` flags.

The script must parse its `TrainingArguments` with `HfArgumentParser` and train with `transformers.Trainer`
(or `Seq2SeqTrainer`, or a subclass of either), as the official example scripts do::

    torchrun --nproc_per_node 4 -m hdet_hf.launch train.py --output_dir out --hdet --hdet_sync_interval 20
    accelerate launch --multi_gpu --num_processes 4 -m hdet_hf.launch train.py --output_dir out --hdet
    python -m hdet_hf.launch train.py --help      # the script's help, now listing the --hdet* flags
    torchrun --nproc_per_node 4 -m hdet_hf.launch -m trl.scripts.sft --output_dir out --hdet   # a module

``-m MODULE`` runs a module as ``python -m MODULE`` would, e.g. TRL's ``trl.scripts.sft`` (what ``trl sft`` runs;
the ``trl`` CLI itself rejects unknown flags such as ``--hdet``). Library classes defined while the script runs
(TRL's ``SFTConfig`` and ``SFTTrainer`` subclass ``TrainingArguments`` and ``Trainer``) get HDET the same way,
provided their module is first imported by the script, not before the launcher starts.

While the script runs, ``transformers.TrainingArguments``/``Seq2SeqTrainingArguments`` are the same classes
plus the ``--hdet*`` fields (`hdet_hf.training_args.with_hdet_arguments`), and ``transformers.Trainer``/
``Seq2SeqTrainer`` are `HDETTrainer`/`HDETSeq2SeqTrainer`, both at the package top and in their defining
modules. The script runs as ``python train.py`` would run it (``__name__ == "__main__"``, ``sys.argv``,
script folder first on ``sys.path``), so ``from transformers import Trainer`` and ``class MyTrainer(Trainer)``
in the script get the HDET classes. Without ``--hdet`` they behave exactly like the originals. The names
are restored afterwards; importing this module changes nothing.

Limits: the flags reach only `TrainingArguments` parsed from the command line by `HfArgumentParser`. If
``--hdet`` is given and the script builds no Trainer (a custom loop: use `hdet_hf.HDETAccelerate` there),
or builds one from `TrainingArguments` it did not parse (``TrainingArguments(...)`` in code), the launcher
stops with an error instead of training without HDET. ``--hdet`` set in a JSON/YAML config file instead of
on the command line still works, but is not checked that way.
"""

from __future__ import annotations

# Absolute imports only: the launcher may also be run by path (python path/to/hdet_hf/launch.py train.py).
import argparse
import contextlib
import importlib
import importlib.util
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import torch.distributed as dist
from transformers.hf_argparser import string_to_bool
from transformers.trainer import Trainer
from transformers.trainer_callback import TrainerCallback
from transformers.trainer_seq2seq import Seq2SeqTrainer
from transformers.training_args import TrainingArguments
from transformers.training_args_seq2seq import Seq2SeqTrainingArguments

from hdet_hf.process import finish_distributed, remember_backend
from hdet_hf.trainer import HDETTrainer, HDETTrainerMixin
from hdet_hf.training_args import HDETTrainingArguments, with_hdet_arguments

__all__ = [
    "HDETLaunchError",
    "HDETSeq2SeqTrainer",
    "HDETSeq2SeqTrainingArguments",
    "main",
    "patch_transformers",
]

PROG = "python -m hdet_hf.launch"

# Where the patched names live: the package top (lazy; `from transformers import Trainer` reads it) and the
# modules that define or re-export them.
PATCHED_MODULES = (
    "transformers",
    "transformers.trainer",
    "transformers.training_args",
    "transformers.trainer_seq2seq",
    "transformers.training_args_seq2seq",
)
PATCHED_NAMES = ("TrainingArguments", "Seq2SeqTrainingArguments", "Trainer", "Seq2SeqTrainer")


class HDETSeq2SeqTrainer(HDETTrainerMixin, Seq2SeqTrainer):
    """`transformers.Seq2SeqTrainer` with HDET; what ``Seq2SeqTrainer`` means in a script run by the launcher."""


# What `Seq2SeqTrainingArguments` is while a script runs (it pickles: see with_hdet_arguments).
HDETSeq2SeqTrainingArguments = with_hdet_arguments(Seq2SeqTrainingArguments)


class HDETLaunchError(RuntimeError):
    """``--hdet`` was given but cannot take effect in the launched script."""


def replacements() -> dict[type, type]:
    """Original transformers class -> the class scripts see while the launcher runs them."""
    return {
        TrainingArguments: HDETTrainingArguments,
        Seq2SeqTrainingArguments: HDETSeq2SeqTrainingArguments,
        Trainer: HDETTrainer,
        Seq2SeqTrainer: HDETSeq2SeqTrainer,
    }


class _RequireHDETArguments(TrainerCallback):
    """Added to every Trainer while a script runs with ``--hdet``: stops a Trainer whose arguments have
    HDET off, i.e. were not parsed from the command line, before it trains without HDET."""

    def __init__(self, script: str) -> None:
        self.script = script

    def on_init_end(self, args, state, control, **kwargs):
        if not getattr(args, "hdet", False):
            raise HDETLaunchError(
                f"--hdet was given, but {os.path.basename(self.script)} built a Trainer whose "
                f"{type(args).__name__} has hdet=False: it did not parse its TrainingArguments from the command "
                "line with HfArgumentParser (it builds them in code, e.g. TrainingArguments(...)), so the --hdet* "
                "flags never reached them. Parse TrainingArguments with HfArgumentParser, or set hdet=True "
                "(and the hdet_* fields) on hdet_hf.HDETTrainingArguments in the script and run it without "
                "hdet_hf.launch."
            )
        return control


@contextlib.contextmanager
def patch_transformers(require_hdet_in: str | None = None) -> Iterator[dict[type, type]]:
    """Within the block, the transformers Trainer and TrainingArguments classes (plus the Seq2Seq ones) are
    their HDET versions, wherever `PATCHED_MODULES` bind them; the originals come back on exit.

    ``require_hdet_in``: a script path; every Trainer built in the block must then have ``args.hdet`` set
    (see `_RequireHDETArguments`).

    Example:
        >>> import transformers
        >>> with patch_transformers():
        ...     transformers.Trainer.__name__, transformers.TrainingArguments.__name__
        ('HDETTrainer', 'HDETTrainingArguments')
        >>> transformers.Trainer.__name__
        'Trainer'
    """
    mapping = replacements()
    undo: list[tuple[Any, str, bool, Any]] = []  # (module, name, was bound in its __dict__, original)
    try:
        for module_name in PATCHED_MODULES:
            module = importlib.import_module(module_name)
            for name in PATCHED_NAMES:
                was_bound = name in vars(module)
                original = getattr(module, name, None)  # resolves the lazy package attribute
                if isinstance(original, type) and original in mapping:
                    undo.append((module, name, was_bound, original))
                    setattr(module, name, mapping[original])
        if require_hdet_in is not None:
            trainer_module = sys.modules["transformers.trainer"]
            callbacks = trainer_module.DEFAULT_CALLBACKS
            undo.append((trainer_module, "DEFAULT_CALLBACKS", True, callbacks))
            trainer_module.DEFAULT_CALLBACKS = [*callbacks, _RequireHDETArguments(require_hdet_in)]
        yield mapping
    finally:
        for module, name, was_bound, original in reversed(undo):
            if was_bound:
                setattr(module, name, original)
            else:  # leave the lazy package as it was; its next lookup returns the same original
                delattr(module, name)


@contextlib.contextmanager
def _as_main_script(script: str, script_args: Sequence[str], module: bool = False) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python script ...`` (or ``python -m module ...``, which puts the
    current folder first) sets them; runpy sets ``__main__`` and, for a module, ``sys.argv[0]``."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *script_args]
    folder = os.getcwd() if module else os.path.dirname(os.path.realpath(script))
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def hdet_requested(script_args: Sequence[str]) -> bool:
    """Whether ``script_args`` switch HDET on (``--hdet``, ``--hdet true``, ``--hdet=1``; last one wins).
    A malformed value counts as off here; the script's own parser reports it."""

    def lenient_bool(value: str) -> bool:
        try:
            return string_to_bool(value)
        except argparse.ArgumentTypeError:
            return False

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--hdet", type=lenient_bool, nargs="?", const=True, default=False)
    known, _ = parser.parse_known_args(list(script_args))
    return bool(known.hdet)


def _exit_code(code: Any) -> int:
    """The process exit status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _no_trainer_message(script: str, code: int, module: bool = False) -> str:
    name = script if module else os.path.basename(script)
    how = "finished" if code == 0 else f"exited with code {code}"
    message = (
        f"{PROG}: error: --hdet was given, but {name} {how} without constructing a transformers.Trainer, so HDET "
        "never ran. The launcher switches HDET on inside transformers.Trainer and Seq2SeqTrainer (and their "
        "subclasses) whose TrainingArguments are parsed from the command line with HfArgumentParser."
    )
    if code != 0:
        message += (
            f" If {name} rejected --hdet above (e.g. 'unrecognized arguments'), it does not parse "
            "TrainingArguments with HfArgumentParser, so the --hdet* flags cannot reach it."
        )
    return message + (
        " For a custom training loop, use hdet_hf.HDETAccelerate in the script and run it without "
        "hdet_hf.launch."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [-h] (script | -m MODULE) [script_args ...]",
        description="Run an unmodified Hugging Face training script (HfArgumentParser + transformers.Trainer)\n"
        "with Hyperparameter-Divergent Ensemble Training, switched on by --hdet* flags among the script's\n"
        "arguments. `python -m hdet_hf.launch SCRIPT --help` lists the script's flags, --hdet* included.\n"
        "-m MODULE runs a module as `python -m MODULE` would (e.g. TRL's trl.scripts.sft, which `trl sft` runs).",
        epilog="examples:\n"
        "  torchrun --nproc_per_node 4 -m hdet_hf.launch train.py --output_dir out --hdet --hdet_sync_interval 20\n"
        "  accelerate launch --multi_gpu --num_processes 4 -m hdet_hf.launch train.py --output_dir out --hdet\n"
        "  torchrun --nproc_per_node 4 -m hdet_hf.launch -m trl.scripts.sft --model_name_or_path M --dataset_name D \\\n"
        "      --output_dir out --use_peft --hdet\n"
        "  hdet-launch train.py --output_dir out   # one process; torchrun --no-python hdet-launch ... also works",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "script",
        help="path of the training script, run as `python SCRIPT ...` would run it; or `-m MODULE`, "
        "run as `python -m MODULE ...` would run it",
    )
    parser.add_argument(
        "script_args", nargs=argparse.REMAINDER, help="the script's arguments, --hdet* flags included"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``SCRIPT [ARGS...]`` (from ``argv``, default ``sys.argv[1:]``) with HDET patched in; return the
    exit status. With a process group still open after a successful run, end via `finish_distributed`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    module = None
    if argv[0].startswith("-m"):
        # -m MODULE / -mMODULE, as python accepts them; everything after the module is the module's.
        module = argv[0][2:] or (argv[1] if len(argv) > 1 else "")
        script_args = argv[2:] if argv[0] == "-m" else argv[1:]
        if not module:
            parser.print_usage(sys.stderr)
            print(f"{PROG}: error: -m needs a module name, e.g. -m trl.scripts.sft", file=sys.stderr)
            return 2
        script = module
    else:
        try:
            options = parser.parse_args(argv)
        except SystemExit as exit_:  # --help, or a usage error argparse already printed
            return _exit_code(exit_.code)
        script, script_args = options.script, options.script_args
        if not os.path.exists(script):
            hint = (
                f" (a module name? pass the script's path, e.g. train.py, or -m {script})"
                if not script.endswith(".py")
                else ""
            )
            parser.print_usage(sys.stderr)
            print(
                f"{PROG}: error: training script not found: {script} (looked for {os.path.abspath(script)}){hint}",
                file=sys.stderr,
            )
            return 2

    require_hdet = hdet_requested(script_args)
    trainers_before = HDETTrainerMixin.instances_created
    remember_backend()  # this run's group only: an earlier in-process run's Trainer must not decide how this one ends
    with patch_transformers(require_hdet_in=script if require_hdet else None):
        # Looked up inside the patch: finding a submodule imports its packages, and classes those define must
        # see the HDET versions.
        if module is not None and not _module_exists(module):
            print(
                f"{PROG}: error: no module named {module!r} (run as -m {module}); is its package installed in "
                f"this Python ({sys.executable})? For TRL: pip install 'hdet_hf[trl]'.",
                file=sys.stderr,
            )
            return 2
        with _as_main_script(script, script_args, module=module is not None):
            try:
                if module is not None:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as exit_:
                code = _exit_code(exit_.code)
    if require_hdet and HDETTrainerMixin.instances_created == trainers_before:
        print(_no_trainer_message(script, code, module=module is not None), file=sys.stderr)
        code = code or 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Only after success: after a failure other ranks may never reach finish_distributed's barrier. Also when the
    # script destroyed the group itself (TRL's scripts do): gloo can still abort at the interpreter's exit.
    if code == 0 and dist.is_available():
        finish_distributed(code)  # with gloo it ends the process here
    return code


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a relative name such as .sft
        return False
    except ModuleNotFoundError as error:  # a missing parent package; a dependency it lacks is its own error
        if error.name and (module == error.name or module.startswith(error.name + ".")):
            return False
        raise


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy, so the classes above are
    # `hdet_hf.launch.<name>` (picklable) whether started with -m or by path.
    from hdet_hf.launch import main as _main

    sys.exit(_main())
