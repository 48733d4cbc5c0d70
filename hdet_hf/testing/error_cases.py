"""Every invalid input we try, with the message it must produce: the one list behind the tests and the docs.

`tests/test_reliability.py` runs each case and asserts it raises the expected error whose message matches
``match`` (the flag or argument, the value, and the fix), and that nothing under the run's working folder
changed. `scripts/make_error_table.py` runs the same cases and writes the real messages to
`docs/invalid_inputs.md`; a test regenerates that table in memory and compares it with the committed file.

Every case gets ``workdir``, a folder made by `prepare_workdir`: ``out/`` holds a pre-existing file and a
real checkpoint (``checkpoint-2``, written by a run without ``--hdet``), and every case that starts a run uses
``out`` as its ``--output_dir``. ``hdet/checkpoint-2`` is a checkpoint of an HDET run (the flags of `train`
with ``--hdet_sync_interval 2``), and ``damaged/<what>/checkpoint-2`` are copies of it with one file missing,
truncated or edited. The cases that need a training run to find the problem (run-length checks,
the probe signal, resuming a non-HDET checkpoint) call `HDETTrainer.train()` in this process with a tiny
model; a callback fails the case if a training step ever begins.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import IterableDataset
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, TrainerCallback

from hdet_hf import (
    HDETAccelerate,
    HDETConfig,
    HDETSchedule,
    HDETTrainer,
    HDETTrainingArguments,
    OneCycleAutoLR,
)
from hdet_hf.engine import HDETEngine
from hdet_hf.hyperparameters import Hyperparameter
from hdet_hf.schedule_metadata import ReplayLR

__all__ = ["ErrorCase", "Outcome", "CASES", "prepare_workdir", "run_case", "snapshot"]

TMP = "<tmp>"  # how the working folder is written in recorded messages


@dataclass(frozen=True)
class ErrorCase:
    """One invalid input: ``run(workdir)`` must raise ``error`` with a message matching ``match`` (re.search)."""

    id: str
    where: str  # which entry point: flags, HDETConfig, train(), OneCycleAutoLR, ...
    shown: str  # the input as a user writes it (shown in the docs table)
    run: Callable[[Path], Any]
    match: str
    error: type[BaseException] = ValueError


@dataclass(frozen=True)
class Outcome:
    case: ErrorCase
    error: str | None  # name of the exception raised, None if nothing was raised
    message: str  # its message, with the working folder written as <tmp>
    disk_unchanged: bool


# --------------------------------------------------------------------------------------------- helpers
TRAIN_FLAGS = [
    "--use_cpu",
    "--report_to",
    "none",
    "--per_device_train_batch_size",
    "2",
    "--max_steps",
    "4",
    "--learning_rate",
    "1e-2",
    # A run that started would write checkpoint-2 over the pre-existing one.
    "--save_strategy",
    "steps",
    "--save_steps",
    "2",
    "--logging_steps",
    "1",
    "--disable_tqdm",
    "true",
]


def parse(workdir: Path, *flags: str):
    """``HfArgumentParser(HDETTrainingArguments)`` on a command line, as a training script does."""
    parser = HfArgumentParser(HDETTrainingArguments, prog="train.py")
    (args,) = parser.parse_args_into_dataclasses(["--output_dir", str(workdir / "out"), *flags])
    return args


def tiny_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
    )
    return LlamaForCausalLM(config)


def tiny_rows(n: int = 8) -> list[dict[str, list[int]]]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 32, (n, 8), generator=g).tolist()
    return [{"input_ids": row, "labels": row} for row in ids]


class Unsized(IterableDataset):
    """A streaming dataset: no ``__len__``, so no probe batch can be drawn from it."""

    def __iter__(self):
        while True:
            yield from tiny_rows()


class RefuseToStep(TrainerCallback):
    """An invalid input must be refused before the first step: fail loudly if one begins."""

    def on_step_begin(self, args, state, control, **kwargs):
        raise AssertionError("a training step began although the input is invalid")


def train(
    workdir: Path,
    *flags: str,
    hdet: bool = True,
    dataset: str = "sized",
    eval_dataset: str | None = None,
    resume: str | None = None,
    refuse: bool = True,
    output: str = "out",
):
    """A single-process `HDETTrainer.train()` on a tiny model; with ``refuse`` a first step fails the case."""
    args = parse(workdir, *(["--hdet"] if hdet else []), *TRAIN_FLAGS, *flags, "--output_dir", str(workdir / output))
    data = Unsized() if dataset == "unsized" else tiny_rows()
    evaluation = {"empty": [], "sized": tiny_rows(4)}.get(eval_dataset) if eval_dataset else None
    callbacks = [RefuseToStep()] if refuse else []
    trainer = HDETTrainer(
        model=tiny_model(), args=args, train_dataset=data, eval_dataset=evaluation, callbacks=callbacks
    )
    trainer.train(resume_from_checkpoint=str(workdir / resume) if resume else None)
    return trainer


# ``damaged/<name>/checkpoint-2``: a copy of the HDET checkpoint with one change.
def _drop_optimizer(folder: Path) -> None:
    (folder / "hdet_optimizer_rank0.pt").unlink()


def _truncate_state(folder: Path) -> None:
    path = folder / "hdet_state_rank0.pt"
    path.write_bytes(path.read_bytes()[:100])


def _edit_state(**changes: Any) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "hdet_state_rank0.pt"
        torch.save({**torch.load(path, weights_only=True), **changes}, path)

    return edit


DAMAGED = {
    "no_optimizer": _drop_optimizer,
    "truncated": _truncate_state,
    "world_size_0": _edit_state(world_size=0),
    "negative_scale": _edit_state(controllers={"lr": {"scale": -2.0, "velocity": 0.0}}),
}


def prepare_workdir(workdir: Path) -> dict[str, str]:
    """``out/notes.txt`` and ``out/checkpoint-2`` (a real checkpoint of a run without --hdet); returns a snapshot."""
    out = workdir / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "notes.txt").write_text(
        "written before the run; a run that refuses to start must leave it alone\n"
    )
    with _quiet():
        train(workdir, "--max_steps", "2", hdet=False, refuse=False)
        train(workdir, "--hdet_sync_interval", "2", output="hdet", refuse=False)
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    for name, damage in DAMAGED.items():
        folder = workdir / "damaged" / name / "checkpoint-2"
        shutil.copytree(workdir / "hdet" / "checkpoint-2", folder)
        damage(folder)
    return snapshot(workdir)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file's SHA-256 and every folder under ``folder``: equal snapshots mean byte-identical trees."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }


@contextlib.contextmanager
def _quiet():
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
        warnings.simplefilter("ignore")
        yield


def run_case(case: ErrorCase, workdir: Path) -> Outcome:
    """Run one case; record what it raised, with the working folder written as <tmp>, and whether disk changed."""
    before = snapshot(workdir)
    error: str | None = None
    message = ""
    try:
        with _quiet():
            case.run(workdir)
    except Exception as exc:  # every error is recorded; the caller checks it
        error, message = type(exc).__name__, str(exc)
    message = " ".join(message.replace(str(workdir), TMP).split())
    return Outcome(case, error, message, snapshot(workdir) == before)


# ------------------------------------------------------------------------------------------- the cases
def _flags(*flags: str, match: str, hdet: bool = True) -> ErrorCase:
    line = [*(["--hdet"] if hdet else []), *flags]
    return ErrorCase(
        id="flags: " + " ".join(line),
        where="flags",
        shown=" ".join(line),
        run=lambda workdir: parse(workdir, *line),
        match=match,
    )


def _config(shown: str, match: str, **kwargs: Any) -> ErrorCase:
    return ErrorCase(
        id=f"HDETConfig: {shown}",
        where="HDETConfig",
        shown=f"HDETConfig({shown})",
        run=lambda workdir: HDETConfig(**kwargs),
        match=match,
    )


def _train(
    shown: str, *flags: str, match: str, error: type[BaseException] = ValueError, **kw: Any
) -> ErrorCase:
    return ErrorCase(
        id=f"train(): {shown}",
        where="HDETTrainer.train()",
        shown=shown,
        run=lambda workdir: train(workdir, *flags, **kw),
        match=match,
        error=error,
    )


def _optimizer(groups: int = 1) -> torch.optim.Optimizer:
    layers = [torch.nn.Linear(2, 1) for _ in range(groups)]
    return torch.optim.SGD([{"params": layer.parameters()} for layer in layers], lr=0.1)


def _one_cycle(shown: str, match: str, **kwargs: Any) -> ErrorCase:
    return ErrorCase(
        id=f"OneCycleAutoLR: {shown}",
        where="OneCycleAutoLR",
        shown=f"OneCycleAutoLR(optimizer, {shown})",
        run=lambda workdir: OneCycleAutoLR(_optimizer(), **kwargs),
        match=match,
    )


def _schedule_dict(**changes: Any) -> dict[str, Any]:
    data = HDETSchedule(world_size=2, total_steps=2, sync_interval=1, lr_per_step=[[1e-3], [5e-4]]).to_dict()
    data.update(changes)
    return {k: v for k, v in data.items() if v is not _DROP}


_DROP = object()


def _engine() -> HDETEngine:
    model = torch.nn.Linear(2, 1)
    return HDETEngine(HDETConfig(sync_interval=2), model, torch.optim.SGD(model.parameters(), lr=0.1), 4)


def _accelerate(total_steps: int, **config: Any) -> HDETAccelerate:
    from accelerate import Accelerator

    return HDETAccelerate(Accelerator(cpu=True), HDETConfig(**config), total_steps=total_steps)


def _prepare_frozen() -> None:
    model = torch.nn.Linear(2, 1).requires_grad_(False)
    _accelerate(4, sync_interval=2).prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))


def _add_hyperparameter_late() -> None:
    engine = _engine()
    engine.end_step()
    engine.add_hyperparameter(Hyperparameter("router_aux_loss", spread=0.5, base=0.01, setter=print))


def _replay_past_end() -> None:
    scheduler = ReplayLR(_optimizer(), [[0.1]], hold_last=False)
    for _ in range(2):
        scheduler.step()


def _replay_resume_other_table() -> None:
    state = ReplayLR(_optimizer(), [[0.1]] * 5).state_dict()
    ReplayLR(_optimizer(), [[0.1]] * 3).load_state_dict(state)


def _engine_state(**changes: Any) -> None:
    engine = _engine()
    engine.load_state_dict({**engine.state_dict(), **changes})


CASES: list[ErrorCase] = [
    # --- every --hdet_* flag with a constraint, as a training script's command line -----------------------
    _flags("--hdet_lr_spread", "1.0", match=r"--hdet_lr_spread must be in \[0, 1\), but got 1.0.*Use e\.g\."),
    _flags("--hdet_lr_spread", "-0.1", match=r"--hdet_lr_spread must be in \[0, 1\), but got -0.1"),
    _flags("--hdet_lr_spread", "2", match=r"--hdet_lr_spread must be in \[0, 1\), but got 2", hdet=False),
    _flags("--hdet_sync_interval", "0", match=r"--hdet_sync_interval must be a whole number of optimizer steps >= 1 or a fraction.*but got 0"),
    _flags(
        "--hdet_sync_interval", "-3", match=r"--hdet_sync_interval must be a whole number of optimizer steps >= 1 or a fraction.*but got -3"
    ),
    _flags(
        "--hdet_auto_lr", "--hdet_lr_spread", "0", match=r"--hdet_auto_lr needs a spread.*--hdet_lr_spread"
    ),
    _flags(
        "--hdet_auto_lr_warmup_steps", "2.5", match=r"--hdet_auto_lr_warmup_steps must be an integer.*got 2.5"
    ),
    _flags(
        "--hdet_auto_lr_warmup_steps", "-1", match=r"--hdet_auto_lr_warmup_steps must be an integer.*got -1"
    ),
    _flags("--hdet_sync_warmup_steps", "1.5", match=r"--hdet_sync_warmup_steps must be an integer.*got 1.5"),
    _flags("--hdet_sync_warmup_steps", "nan", match=r"--hdet_sync_warmup_steps must be an integer.*got nan"),
    _flags(
        "--hdet_controller_temperature", "0", match=r"--hdet_controller_temperature must be a positive.*got 0"
    ),
    _flags(
        "--hdet_controller_temperature", "-1", match=r"--hdet_controller_temperature must be a positive.*-1"
    ),
    _flags(
        "--hdet_controller_temperature", "inf", match=r"--hdet_controller_temperature must be a positive.*inf"
    ),
    _flags("--hdet_controller_lr", "-0.5", match=r"--hdet_controller_lr must be >= 0, but got -0.5"),
    _flags("--hdet_outer_lr", "0", match=r"--hdet_outer_lr must be a positive finite number, but got 0"),
    _flags("--hdet_outer_momentum", "1.0", match=r"--hdet_outer_momentum must be in \[0, 1\), but got 1.0"),
    _flags(
        "--hdet_comparison_horizon", "2.5", match=r"--hdet_comparison_horizon must be 0 \(one interval\).*got 2.5"
    ),
    _flags(
        "--hdet_comparison_horizon", "0.1", "--hdet_auto_lr", "--hdet_gradient_sync", "local",
        match=r"--hdet_comparison_horizon is only supported in plain shared mode.*--hdet_gradient_sync local",
    ),  # fmt: skip
    _flags(
        "--hdet_comparison_horizon", "0.1",
        match=r"--hdet_comparison_horizon 0.1 changes how the LR controller compares.*--hdet_auto_lr is off",
    ),  # fmt: skip
    _flags(
        "--hdet_comparison_horizon_start", "1.5",
        match=r"--hdet_comparison_horizon_start must be an integer number of steps >= 1 or a fraction.*got 1.5",
    ),  # fmt: skip
    _flags(
        "--hdet_controller_momentum", "1.0", match=r"--hdet_controller_momentum must be in \[0, 1\).*got 1.0"
    ),
    _flags(
        "--hdet_controller_momentum", "-0.1", match=r"--hdet_controller_momentum must be in \[0, 1\).*-0.1"
    ),
    _flags(
        "--hdet_controller_raise_gain", "0.5", match=r"--hdet_controller_raise_gain must be a finite number >= 1.*got 0.5"
    ),
    _flags(
        "--hdet_controller_two_replica_cut_gain", "0", match=r"--hdet_controller_two_replica_cut_gain must be a number in \(0, 1\].*got 0"
    ),
    _flags(
        "--hdet_controller_line_search_threshold",
        "-1",
        match=r"--hdet_controller_line_search_threshold must be a finite number >= 0 \(0 = off\).*got -1",
    ),
    _flags(
        "--hdet_controller_line_search_max_raise",
        "1.0",
        match=r"--hdet_controller_line_search_max_raise must be a finite number > 1.*got 1.0",
    ),
    _flags(
        "--hdet_lr_fan_out_scale", "0", match=r"--hdet_lr_fan_out_scale must be in \(0, 1\], but got 0.0"
    ),
    _flags(
        "--hdet_averaged_probe_share", "1.5", match=r"--hdet_averaged_probe_share must be in \(0, 1\], but got 1.5"
    ),
    _flags(
        "--hdet_controller_max_factor",
        "1.0",
        match=r"--hdet_controller_max_factor must be a finite number > 1",
    ),
    _flags(
        "--hdet_controller_max_factor", "inf", match=r"--hdet_controller_max_factor must be a finite.*got inf"
    ),
    _flags(
        "--hdet_divergence_factor", "0.5", match=r"--hdet_divergence_factor must be 0 \(off\) or.*got 0.5"
    ),
    _flags(
        "--hdet_divergence_factor", "1.0", match=r"--hdet_divergence_factor must be 0 \(off\) or.*got 1.0"
    ),
    _flags("--hdet_divergence_factor", "-2", match=r"--hdet_divergence_factor must be 0 \(off\) or.*got -2"),
    _flags("--hdet_bucket_size_mb", "0", match=r"--hdet_bucket_size_mb must be > 0 MiB and finite, but got 0"),
    _flags("--hdet_bucket_size_mb", "inf", match=r"--hdet_bucket_size_mb must be > 0 MiB and finite, but got inf"),
    _flags(
        "--hdet_seed",
        str(2**64),
        match=r"--hdet_seed must be an integer in \[-2\*\*63, 2\*\*63\), but got 18446744073709551616",
    ),
    _flags(
        "--hdet_base_schedule",
        "trainer",
        "--lr_scheduler_type",
        "reduce_lr_on_plateau",
        "--eval_strategy",
        "steps",
        match=r"--lr_scheduler_type reduce_lr_on_plateau cannot be HDET's base schedule.*--hdet_base_schedule one_cycle",
    ),
    _flags("--hdet_probe_size", "0", match=r"--hdet_probe_size must be a positive integer, but got 0"),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_steps",
        "-1",
        match=r"--hdet_start_race_steps must be an integer >= 0 \(0: no race; unset: the default\), but got -1",
    ),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_probe_size",
        "1",
        match=r"--hdet_start_race_probe_size must be an integer >= 2 \(the race's tests need a standard error\), "
        r"but got 1",
    ),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_batch_share",
        "0",
        match=r"--hdet_start_race_batch_share is the share of the global batch a start-race copy trains on, in "
        r"\(0, 1\], but got 0.0",
    ),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_lower_batch_share",
        "1.5",
        match=r"--hdet_start_race_lower_batch_share is the share of the global batch a start-race copy trains on, "
        r"in \(0, 1\], but got 1.5",
    ),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_significance",
        "-1",
        match=r"--hdet_start_race_significance must be a finite number >= 0, but got -1.0",
    ),
    _flags(
        "--hdet_start_race_steps",
        "60",
        match=r"--hdet_start_race_steps sets where the auto-LR controller starts, but --hdet_auto_lr is off",
    ),
    _flags(
        "--hdet_start_race_lowers",
        match=r"--hdet_start_race_lowers lets the start race lower the start LR, but --hdet_auto_lr is off",
    ),
    _flags(
        "--hdet_auto_lr",
        "--hdet_start_race_lowers",
        "--hdet_start_race_steps",
        "0",
        match=r"--hdet_start_race_lowers lets the start race lower the start LR, but --hdet_start_race_steps is 0",
    ),
    _flags(
        "--hdet_explore_until",
        "1.5",
        match=r"--hdet_explore_until must be a fraction of the run in \(0, 1\] or an integer step >= 1, but got 1.5",
    ),
    _flags("--fsdp", "full_shard", match=r"--hdet does not run with --fsdp.*--hdet_hsdp_shard_size N"),
    _flags(
        "--hdet_weight_decay_spread",
        "1.0",
        match=r"--hdet_weight_decay_spread must be in \[0, 1\), but got 1.0",
    ),
    _flags("--hdet_dropout_spread", "-0.2", match=r"--hdet_dropout_spread must be in \[0, 1\), but got -0.2"),
    _flags(
        "--hdet_label_smoothing_spread", "1.5", match=r"--hdet_label_smoothing_spread must be in \[0, 1\)"
    ),
    _flags(
        "--hdet_attention_temperature_spread",
        "1.0",
        match=r"--hdet_attention_temperature_spread must be in \[0, 1\)",
    ),
    _flags(
        "--hdet_weight_decay_auto", match=r"--hdet_weight_decay_auto needs --hdet_weight_decay_spread > 0"
    ),
    _flags("--hdet_dropout_auto", match=r"--hdet_dropout_auto needs --hdet_dropout_spread > 0"),
    _flags(
        "--hdet_label_smoothing_auto",
        match=r"--hdet_label_smoothing_auto needs --hdet_label_smoothing_spread > 0",
    ),
    _flags(
        "--hdet_attention_temperature_auto",
        match=r"--hdet_attention_temperature_auto needs --hdet_attention_temperature_spread > 0",
    ),
    _flags("--hdet_dropout_base", "1.0", match=r"--hdet_dropout_base must be in \[0, 1\), but got 1.0"),
    _flags(
        "--hdet_dropout_spread",
        "0.5",
        match=r"--hdet_dropout_spread needs --hdet_gradient_sync local: --hdet_gradient_sync shared \(the default\)"
        r".*Add --hdet_gradient_sync local",
    ),
    _flags(
        "--hdet_gradient_sync",
        "shared",
        "--hdet_label_smoothing_spread",
        "0.5",
        "--hdet_attention_temperature_spread",
        "0.5",
        match=r"--hdet_label_smoothing_spread, --hdet_attention_temperature_spread need --hdet_gradient_sync local",
    ),
    # --- the same validation through the Python API ----------------------------------------------------
    ErrorCase(
        id="HDETTrainingArguments(hdet_sync_interval=0)",
        where="HDETTrainingArguments",
        shown='HDETTrainingArguments(output_dir="out", hdet=True, hdet_sync_interval=0)',
        run=lambda workdir: HDETTrainingArguments(
            output_dir=str(workdir / "out"), hdet=True, hdet_sync_interval=0, use_cpu=True
        ),
        match=r"--hdet_sync_interval must be a whole number of optimizer steps >= 1 or a fraction.*but got 0",
    ),
    _config(
        'gradient_sync="sometimes"',
        r"--hdet_gradient_sync must be one of local, shared",
        gradient_sync="sometimes",
    ),
    _config(
        'start_race_raise_to="max"',
        r"--hdet_start_race_raise_to must be one of winner, largest, but got 'max'",
        start_race_raise_to="max",
    ),
    _config(
        "auto_lr=True, start_race_stall_ceiling=True, start_race_steps=0",
        r"--hdet_start_race_stall_ceiling caps the controller where the start race saw a copy stall, but this run "
        r"has no race",
        auto_lr=True,
        start_race_stall_ceiling=True,
        start_race_steps=0,
    ),
    _config(
        'probe_sampling="random"',
        r"--hdet_probe_sampling must be one of spread, first, but got 'random'",
        probe_sampling="random",
    ),
    _config(
        'start_race_raise_on="trend"',
        r"--hdet_start_race_raise_on must be one of start_last, two_steps, but got 'trend'",
        start_race_raise_on="trend",
    ),
    _config(
        'early_comparison="both"',
        r"--hdet_early_comparison must be one of lower_of_both, one_interval, but got 'both'",
        early_comparison="both",
    ),
    _config(
        'controller_signal_combination="median"',
        r"--hdet_controller_signal_combination must be one of mean, agree, agree_mean, but got 'median'",
        controller_signal_combination="median",
    ),
    _config(
        'controller_update="sgd"',
        r"--hdet_controller_update must be one of multiplicative, additive",
        controller_update="sgd",
    ),
    _config(
        'controller_time_scale="step"',
        r"--hdet_controller_time_scale must be one of run, converge, vote, but got 'step'",
        controller_time_scale="step",
    ),
    _config(
        'controller_noise_floor="sometimes"',
        r"--hdet_controller_noise_floor must be one of two_replicas, always, off, but got 'sometimes'",
        controller_noise_floor="sometimes",
    ),
    _config(
        'controller_abstain_within_noise="cuts"',
        r"--hdet_controller_abstain_within_noise must be one of off, raises, always, but got 'cuts'",
        controller_abstain_within_noise="cuts",
    ),
    _config(
        'controller_temperature_mode="auto"',
        r"--hdet_controller_temperature_mode must be one of adaptive, fixed",
        controller_temperature_mode="auto",
    ),
    _config(
        'controller_signal="eval_loss"',
        r"--hdet_controller_signal must be one of train_loss, probe",
        controller_signal="eval_loss",
    ),
    _config(
        'converge_weights="best"',
        r"--hdet_converge_weights must be one of uniform, fitness, but got 'best'",
        converge_weights="best",
    ),
    _config(
        'converge_weights="fitness", hsdp_shard_size=2',
        r"--hdet_converge_weights fitness is not supported with --hdet_hsdp_shard_size yet",
        converge_weights="fitness",
        hsdp_shard_size=2,
    ),
    _config(
        'base_schedule="cosine"',
        r"--hdet_base_schedule must be one of one_cycle, trainer",
        base_schedule="cosine",
    ),
    _config('lr_spread="0.5"', r"--hdet_lr_spread must be a number, but got '0.5'", lr_spread="0.5"),
    _config(
        "sync_interval=2.5",
        r"--hdet_sync_interval must be a whole number of optimizer steps >= 1 or a fraction.*but got 2.5",
        sync_interval=2.5,
    ),
    _config(
        "sync_interval=True",
        r"--hdet_sync_interval must be a number, but got True",
        sync_interval=True,
    ),
    _config("probe_size=3.0", r"--hdet_probe_size must be a positive integer, but got 3.0", probe_size=3.0),
    _config("cooldown_steps=0", r"--hdet_cooldown_steps must be a positive integer, but got 0", cooldown_steps=0),
    _config(
        "cooldown_batch_size=-1",
        r"--hdet_cooldown_batch_size must be an integer >= 0 \(0: --hdet_probe_size\), but got -1",
        cooldown_batch_size=-1,
    ),
    _config(
        'cooldown_lr="own"', r"--hdet_cooldown_lr must be one of base, replica, but got 'own'", cooldown_lr="own"
    ),
    _config(
        'auto_lr_warmup_steps=float("inf")',
        r"--hdet_auto_lr_warmup_steps must be an integer.*got inf",
        auto_lr_warmup_steps=math.inf,
    ),
    _config(
        'bucket_size_mb=float("nan")',
        r"--hdet_bucket_size_mb must be > 0 MiB and finite, but got nan",
        bucket_size_mb=math.nan,
    ),
    ErrorCase(
        id="check_run_length(0)",
        where="HDETConfig",
        shown="HDETConfig().check_run_length(0)",
        run=lambda workdir: HDETConfig().check_run_length(0),
        match=r"Expected positive integer total_steps, but got 0",
    ),
    # --- problems that need the run length or the data: found by train() before the first step -----------
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 10",
        "--hdet_sync_interval",
        "10",
        match=r"--hdet_sync_interval 10 is longer than the run \(4 optimizer steps\).*--hdet_sync_interval <= 1",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_auto_lr --hdet_auto_lr_warmup_steps 4",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "4",
        match=r"--hdet_auto_lr_warmup_steps 4.0 ends at or after the last step \(4\).*Use a fraction",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_auto_lr --hdet_auto_lr_warmup_steps 0.9",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "0.9",
        match=r"--hdet_auto_lr_warmup_steps 0.9 ends at or after the last step \(4\)",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_auto_lr --hdet_auto_lr_warmup_steps 3",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_auto_lr_warmup_steps",
        "3",
        match=r"--hdet_explore_until 0.5 \(step 2 of 4\).*no converge falls between.*would never run",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_auto_lr --hdet_controller_signal probe, streaming train set, no eval set",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_controller_signal",
        "probe",
        dataset="unsized",
        match=r"--hdet_controller_signal probe draws its shared probe batch from the eval_dataset, else the "
        r"train_dataset, but there is no eval_dataset and the train_dataset has no length.*train_loss",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_auto_lr --hdet_controller_signal probe, streaming train set, empty "
        "eval set",
        "--hdet_sync_interval",
        "2",
        "--hdet_auto_lr",
        "--hdet_controller_signal",
        "probe",
        dataset="unsized",
        eval_dataset="empty",
        match=r"but the eval_dataset is empty and the train_dataset has no length \(a streaming dataset\)",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2, resume_from_checkpoint=<checkpoint of a run without --hdet>",
        "--hdet_sync_interval",
        "2",
        resume="out/checkpoint-2",
        error=FileNotFoundError,
        match=r"Checkpoint <tmp>/out/checkpoint-2 has no HDET state.*Resume it without --hdet",
    ),
    _train(
        "--max_steps 4 (no --hdet), resume_from_checkpoint=<checkpoint of an HDET run>",
        resume="hdet/checkpoint-2",
        hdet=False,
        match=r"Checkpoint <tmp>/hdet/checkpoint-2 was written by an HDET run.*Resume it with --hdet and the same",
    ),
    _train(
        "--hdet --max_steps 6 --hdet_sync_interval 2, resume_from_checkpoint=<checkpoint of a 4-step run>",
        "--hdet_sync_interval",
        "2",
        "--max_steps",
        "6",
        resume="hdet/checkpoint-2",
        match=r"Checkpoint <tmp>/hdet/checkpoint-2 was saved by a run of 4 optimizer steps, but this run has 6.*"
        r"Resume with --max_steps 4",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_lr_spread 0.5, resume_from_checkpoint=<saved with "
        "spread 0.25>",
        "--hdet_sync_interval",
        "2",
        "--hdet_lr_spread",
        "0.5",
        resume="hdet/checkpoint-2",
        match=r"hdet_state_rank0.pt was saved with --hdet_lr_spread 0.25, but this run has --hdet_lr_spread 0.5\. "
        r"HDET cannot change these settings",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --weight_decay 0.1 --hdet_weight_decay_spread 0.5, "
        "resume_from_checkpoint=<saved without a weight decay spread>",
        "--hdet_sync_interval",
        "2",
        "--weight_decay",
        "0.1",
        "--hdet_weight_decay_spread",
        "0.5",
        resume="hdet/checkpoint-2",
        match=r"was saved with --hdet_weight_decay_spread 0.0, but this run has --hdet_weight_decay_spread 0.5",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2, resume_from_checkpoint=<HDET checkpoint without "
        "hdet_optimizer_rank0.pt>",
        "--hdet_sync_interval",
        "2",
        resume="damaged/no_optimizer/checkpoint-2",
        error=FileNotFoundError,
        match=r"Checkpoint <tmp>/damaged/no_optimizer/checkpoint-2 is incomplete: hdet_optimizer_rank0.pt missing",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2, resume_from_checkpoint=<HDET checkpoint with a truncated "
        "hdet_state_rank0.pt>",
        "--hdet_sync_interval",
        "2",
        resume="damaged/truncated/checkpoint-2",
        match=r"Checkpoint file <tmp>/damaged/truncated/checkpoint-2/hdet_state_rank0.pt could not be read.*damaged "
        r"or truncated",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2, resume_from_checkpoint=<hdet_state_rank0.pt edited: "
        "world_size 0>",
        "--hdet_sync_interval",
        "2",
        resume="damaged/world_size_0/checkpoint-2",
        match=r"hdet_state_rank0.pt: field 'world_size' must be an integer >= 1, but got 0",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2, resume_from_checkpoint=<hdet_state_rank0.pt edited: "
        "controller scale -2>",
        "--hdet_sync_interval",
        "2",
        resume="damaged/negative_scale/checkpoint-2",
        match=r"hdet_state_rank0.pt: field \"controllers\['lr'\].scale\" must be a finite number > 0.*but got -2.0",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_weight_decay_spread 0.5 (--weight_decay 0)",
        "--hdet_sync_interval",
        "2",
        "--hdet_weight_decay_spread",
        "0.5",
        match=r"--hdet_weight_decay_spread explores nothing: every param group has weight_decay 0.*--weight_decay",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_gradient_sync local --hdet_dropout_spread 0.5 "
        "(model dropout 0)",
        "--hdet_sync_interval",
        "2",
        "--hdet_gradient_sync",
        "local",
        "--hdet_dropout_spread",
        "0.5",
        match=r"--hdet_dropout_spread 0.5 explores nothing: LlamaForCausalLM has dropout 0 everywhere.*"
        r"--hdet_dropout_base 0.1",
    ),
    _train(
        "--hdet --max_steps 4 --hdet_sync_interval 2 --hdet_gradient_sync local --hdet_label_smoothing_spread 0.5 "
        "(--label_smoothing_factor 0)",
        "--hdet_sync_interval",
        "2",
        "--hdet_gradient_sync",
        "local",
        "--hdet_label_smoothing_spread",
        "0.5",
        match=r"--hdet_label_smoothing_spread explores nothing: --label_smoothing_factor is 0.*"
        r"--label_smoothing_factor 0.1",
    ),
    ErrorCase(
        id="Hyperparameter: spread",
        where="Hyperparameter",
        shown='Hyperparameter("router_aux_loss", spread=1.5, base=0.01, setter=set_coef)',
        run=lambda workdir: Hyperparameter("router_aux_loss", spread=1.5, base=0.01, setter=print),
        match=r"Expected spread for 'router_aux_loss' in \[0, 1\), but got 1.5",
    ),
    ErrorCase(
        id="Hyperparameter: no setter",
        where="Hyperparameter",
        shown='Hyperparameter("router_aux_loss", spread=0.5)',
        run=lambda workdir: Hyperparameter("router_aux_loss", spread=0.5),
        match=r"Hyperparameter 'router_aux_loss' needs a base value and a setter",
    ),
    ErrorCase(
        id="engine: add_hyperparameter after the first step",
        where="HDETEngine",
        shown="engine.add_hyperparameter(...) after engine.end_step()",
        run=lambda workdir: _add_hyperparameter_late(),
        match=r"add_hyperparameter must happen before the first optimizer step",
        error=RuntimeError,
    ),
    # --- OneCycleAutoLR (drop-in for the paper's scheduler) -------------------------------------------------
    _one_cycle(
        "max_lr=0.1", r"You must define either total_steps OR \(epochs AND steps_per_epoch\)", max_lr=0.1
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=-5",
        r"Expected positive integer total_steps, but got -5",
        max_lr=0.1,
        total_steps=-5,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=2.5",
        r"Expected positive integer total_steps, but got 2.5",
        max_lr=0.1,
        total_steps=2.5,
    ),
    _one_cycle(
        "max_lr=0.1, epochs=0, steps_per_epoch=10",
        r"Expected positive integer epochs, but got 0",
        max_lr=0.1,
        epochs=0,
        steps_per_epoch=10,
    ),
    _one_cycle(
        "max_lr=0.1, epochs=2, steps_per_epoch=-1",
        r"Expected positive integer steps_per_epoch, but got -1",
        max_lr=0.1,
        epochs=2,
        steps_per_epoch=-1,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=100, enable_auto_lr=True",
        r"auto_lr_warmup_steps=100000 is not before the end of the run \(total_steps=100\).*auto_lr_warmup_steps=0.1",
        max_lr=0.1,
        total_steps=100,
        enable_auto_lr=True,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=100, ensemble_lr_spread_ratio=0.5, model_sync_interval=10, enable_auto_lr=True, "
        "auto_lr_warmup_steps=60",
        r"No converge falls between the end of auto_lr_warmup_steps=60.*explore_until=1.0 to explore to the last",
        max_lr=0.1,
        total_steps=100,
        ensemble_lr_spread_ratio=0.5,
        model_sync_interval=10,
        enable_auto_lr=True,
        auto_lr_warmup_steps=60,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=100, explore_until=1.5",
        r"explore_until must be a fraction of the run in \(0, 1\] or an integer step >= 1, but got 1.5",
        max_lr=0.1,
        total_steps=100,
        explore_until=1.5,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=100, ensemble_lr_spread_ratio=1.5",
        r"(ensemble_lr_spread_ratio|--hdet_lr_spread)\S* must be in \[0, 1\), but got 1.5",
        max_lr=0.1,
        total_steps=100,
        ensemble_lr_spread_ratio=1.5,
    ),
    _one_cycle(
        "max_lr=0.1, total_steps=100, model_sync_interval=0",
        r"(model_sync_interval|--hdet_sync_interval)\S* must be a positive integer number of steps or a fraction.*but got 0",
        max_lr=0.1,
        total_steps=100,
        model_sync_interval=0,
    ),
    # --- hdet_schedule.json and its replay -----------------------------------------------------------------
    ErrorCase(
        id="HDETSchedule.from_dict: version 2",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "version": 2})',
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(version=2)),
        match=r"Unsupported hdet_schedule.json version 2; this hdet_hf reads version 1.*upgrade hdet_hf",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: version '1'",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "version": "1"})',
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(version="1")),
        match=r"Unsupported hdet_schedule.json version '1'.*damaged or was not written by hdet_hf",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: format",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "format": "trainer_state"})',
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(format="trainer_state")),
        match=r"Expected format 'hdet_schedule', but got 'trainer_state'",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: missing keys",
        where="HDETSchedule",
        shown="HDETSchedule.from_dict(<dict without lr_per_step and trajectory>)",
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(lr_per_step=_DROP, trajectory=_DROP)),
        match=r"missing required key\(s\): lr_per_step, trajectory",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: row length",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "param_group_names": ["a", "b"], "lr_per_step": [[0.1, 0.2], [0.1]]})',
        run=lambda workdir: HDETSchedule.from_dict(
            _schedule_dict(param_group_names=["a", "b"], lr_per_step=[[0.1, 0.2], [0.1]])
        ),
        match=r"lr_per_step\[1\] has 1 value\(s\), but param_group_names lists 2 group\(s\)",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: NaN LR",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "lr_per_step": [[0.001], [NaN]]})',
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(lr_per_step=[[1e-3], [math.nan]])),
        match=r"lr_per_step\[1\]\[0\] \(the base LR of optimizer step 2\) must be a finite number in \[0, 1000\]",
    ),
    ErrorCase(
        id="HDETSchedule.from_dict: wrong type",
        where="HDETSchedule",
        shown='HDETSchedule.from_dict({..., "trajectory": "none"})',
        run=lambda workdir: HDETSchedule.from_dict(_schedule_dict(trajectory="none")),
        match=r"field 'trajectory' must be a list of objects \(one per converge\), but got 'none'",
    ),
    ErrorCase(
        id="HDETSchedule.from_pretrained: no file",
        where="HDETSchedule",
        shown="HDETSchedule.from_pretrained(<output_dir without hdet_schedule.json>)",
        run=lambda workdir: HDETSchedule.from_pretrained(workdir / "out"),
        match=r"No hdet_schedule.json in directory '<tmp>/out'",
        error=FileNotFoundError,
    ),
    ErrorCase(
        id="replay: group count",
        where="HDETSchedule replay",
        shown="HDETSchedule(lr_per_step=[[0.1, 0.2]]).as_lr_scheduler(<optimizer with 3 param groups>)",
        run=lambda workdir: HDETSchedule(lr_per_step=[[0.1, 0.2]]).as_lr_scheduler(_optimizer(3)),
        match=r"The schedule records 2 param group\(s\), but the optimizer has 3.*same 2 param group\(s\)",
    ),
    ErrorCase(
        id="replay: empty",
        where="HDETSchedule replay",
        shown="HDETSchedule(lr_per_step=[]).as_lr_scheduler(optimizer)",
        run=lambda workdir: HDETSchedule(lr_per_step=[]).as_lr_scheduler(_optimizer()),
        match=r"Expected a non-empty lr_per_step to replay, but got 0 recorded steps",
    ),
    ErrorCase(
        id="replay: past the end",
        where="HDETSchedule replay",
        shown="ReplayLR(optimizer, [[0.1]], hold_last=False), then step() twice",
        run=lambda workdir: _replay_past_end(),
        match=r"ReplayLR was stepped 2 times, but only 1 optimizer steps are recorded.*hold_last=True",
        error=RuntimeError,
    ),
    ErrorCase(
        id="replay: resume another table",
        where="HDETSchedule replay",
        shown="ReplayLR(optimizer, <3 steps>).load_state_dict(<state of a 5-step replay>)",
        run=lambda workdir: _replay_resume_other_table(),
        match=r"saved with a schedule of 5 steps, but this scheduler replays 3",
    ),
    # --- HDETAccelerate (no_trainer loops) and the engine's state -----------------------------------------
    ErrorCase(
        id="HDETAccelerate: sync interval longer than the run",
        where="HDETAccelerate",
        shown="HDETAccelerate(accelerator, HDETConfig(sync_interval=50), total_steps=10)",
        run=lambda workdir: _accelerate(10, sync_interval=50),
        match=r"--hdet_sync_interval 50 is longer than the run \(10 optimizer steps\)",
    ),
    ErrorCase(
        id="HDETAccelerate: total_steps=0",
        where="HDETAccelerate",
        shown="HDETAccelerate(accelerator, HDETConfig(), total_steps=0)",
        run=lambda workdir: _accelerate(0),
        match=r"Expected positive integer total_steps, but got 0",
    ),
    ErrorCase(
        id="HDETAccelerate: load_state_dict before prepare",
        where="HDETAccelerate",
        shown="HDETAccelerate(...).load_state_dict(state) before prepare()",
        run=lambda workdir: _accelerate(4, sync_interval=2).load_state_dict({}),
        match=r"Call prepare\(\) before load_state_dict\(\)",
        error=RuntimeError,
    ),
    ErrorCase(
        id="HDETAccelerate: frozen model",
        where="HDETAccelerate",
        shown="hdet.prepare(<model with requires_grad=False everywhere>, optimizer)",
        run=lambda workdir: _prepare_frozen(),
        match=r"HDET found no trainable parameters",
    ),
    ErrorCase(
        id="engine state: version",
        where="HDETEngine state",
        shown='engine.load_state_dict({..., "version": 99})',
        run=lambda workdir: _engine_state(version=99),
        match=r"expected HDET state version 2, but got 99",
    ),
    ErrorCase(
        id="engine state: permutation",
        where="HDETEngine state",
        shown='engine.load_state_dict({..., "permutations": {"lr": [3]}})',
        run=lambda workdir: _engine_state(permutations={"lr": [3]}),
        match=r"field \"permutations\['lr'\]\" must be a permutation of 0..0, but got \[3\]",
    ),
    ErrorCase(
        id="engine state: other settings",
        where="HDETEngine state",
        shown="engine.load_state_dict(<state saved with HDETConfig(sync_interval=4)>) by an engine with sync_interval=2",
        run=lambda workdir: _engine_state(config=HDETConfig(sync_interval=4).to_dict()),
        match=r"was saved with --hdet_sync_interval 4, but this run has --hdet_sync_interval 2",
    ),
    ErrorCase(
        id="engine state: world size",
        where="HDETEngine state",
        shown='engine.load_state_dict({..., "world_size": 4}) on 1 process, elastic=False',
        run=lambda workdir: _engine_state(world_size=4, permutations={"lr": [0, 1, 2, 3]}),
        match=r"saved with 4 processes but this run has 1; resume on the same number of processes, or load it "
        r"with elastic=True",
    ),
]
