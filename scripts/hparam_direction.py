"""Does the HDET controller move dropout and weight decay the right way? A controlled experiment.

Two regimes on the offline stdlib-docstring task (`hdet_hf.examples.data`), a tiny GPT-2 built from config (GPT-2,
not Llama: Llama has attention dropout only, GPT-2 drops embeddings, residuals and attention):

- ``overfit``: 128 blocks of 64 tokens (8k tokens) from one contiguous slice of the corpus (a few modules'
  docstrings: one small domain), trained for 50 epochs. Held-out blocks come from the same slice (chunks
  dealt 4:1:1 to train, probe and test), so the model can generalise before it memorises: held-out loss
  falls, then rises while training loss keeps falling.
- ``underfit``: the whole training split (8k blocks), seen less than once; probe and test are random
  validation blocks. Every step brings new data, so regularisation can only slow learning.

For each regime and hyperparameter the script measures the ground truth with fixed values, twice: with a
plain DDP ``Trainer`` (``ddp``), and with HDET spreading nothing (``local``: local SGD, parameters averaged
every T steps, the procedure the controller works in). Then it runs HDET with the controller on that
hyperparameter only (``--hdet_lr_spread 0 --hdet_<name>_spread 0.5 --hdet_<name>_auto``), started from the
middle of the grid, and records where the base value went.

The controller signal is ``probe``: just before each converge every replica is scored, in eval mode (no
dropout), on one shared batch of held-out blocks (the Trainer's ``eval_dataset``). The alternative,
``train_loss``, compares each replica's training loss since the last converge, and that measures the wrong
thing for a regulariser: dropout raises the training loss by construction (it is computed with units dropped),
and weight decay and dropout both slow the fitting of the training set, which is exactly what they are for. So
``train_loss`` is biased against them whatever they do to held-out loss; one extra run per case shows it
(``--controller_signals probe,train_loss``). The probe blocks and the test blocks the reported loss is measured on
are disjoint, so the controller is never scored on the data it was tuned on. Every HDET run also explores a few
no-op scalars (``--null_controls``) whose drift shows how far the controller moves a base on noise alone.

One ``torchrun`` launch runs every config in sequence (start-up is paid once). Rank 0 appends one JSON line per
finished config to ``<out_dir>/results.jsonl``; the parent then writes ``results.json``, ``results.md`` and one
PNG per regime (``base_<regime>.png``: base value vs. optimizer step of each HDET run, with the best fixed value
of each ground truth).

Example:
    python scripts/hparam_direction.py --quick                  # smoke run, a few minutes on 2 cores
    python scripts/hparam_direction.py                          # the full run (see BENCHMARKS.md)
    python scripts/hparam_direction.py --regimes overfit --hparams dropout
    python scripts/hparam_direction.py --report_only            # rebuild table and plots from results.jsonl
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runs from a checkout without installing
from hdet_hf.testing.benchmarks import (  # noqa: E402
    RESULTS_JSONL,
    append_result,
    finite_or_none,
    init_worker,
    kept_results,
    launch_experiment,
    public_settings,
    read_results,
)

DEFAULT_OUT = REPO / "benchmarks" / "hparams"
REGIMES = ("overfit", "underfit")
HPARAMS = ("dropout", "weight_decay")
SIGNALS = ("probe", "train_loss")
GROUND_TRUTHS = ("ddp", "local")
# A base value that moved by less than this factor either way counts as "did not move".
MOVE_THRESHOLD = 1.05


# --------------------------------------------------------------------------------------------- plan
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Controlled experiment: fixed-value ground truth vs. the HDET controller's direction for "
        "dropout and weight decay, in an overfitting and an underfitting regime (tiny GPT-2, stdlib docstrings).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out_dir", default=str(DEFAULT_OUT), help="Where results, table and plots go.")
    p.add_argument("--num_processes", type=int, default=4, help="Data-parallel ranks (2 or 4).")
    p.add_argument("--quick", action="store_true", help="Smoke run: few steps, two grid points, probe only.")
    p.add_argument("--regimes", default=",".join(REGIMES), help="Comma-separated subset of overfit,underfit.")
    p.add_argument(
        "--hparams", default=",".join(HPARAMS), help="Comma-separated subset of dropout,weight_decay."
    )
    p.add_argument(
        "--controller_signals",
        default=None,
        help="HDET controller signals to run (full probe,train_loss; quick probe).",
    )
    p.add_argument(
        "--ground_truth",
        default=None,
        help="Fixed-value runs: ddp (plain DDP Trainer) and/or local (HDET with no spread: local SGD, averaged "
        "every T steps, the controller's own setting). Full ddp,local; quick ddp.",
    )
    p.add_argument(
        "--configs", default="", help="Comma-separated config names or fnmatch patterns to run (see --list)."
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="Keep results.jsonl and skip configs already in it (implied by --configs).",
    )
    p.add_argument(
        "--report_only", action="store_true", help="Only rebuild table/json/plots from results.jsonl."
    )
    p.add_argument("--list", action="store_true", help="Print the planned configs and exit.")
    # Task and model.
    p.add_argument(
        "--max_steps", type=int, default=None, help="Optimizer steps per run (full 400, quick 40)."
    )
    p.add_argument("--block_size", type=int, default=64)
    p.add_argument("--vocab_size", type=int, default=1024, help="BPE vocabulary of the default task.")
    p.add_argument("--n_embd", type=int, default=64)
    p.add_argument("--n_layer", type=int, default=2)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--batch_size", type=int, default=4, help="Per-device train batch size (blocks).")
    p.add_argument("--learning_rate", type=float, default=3e-3, help="Peak LR (cosine, 5%% warm-up).")
    p.add_argument(
        "--overfit_blocks",
        type=int,
        default=128,
        help="Training blocks of the overfitting regime (x block_size tokens); it also gets blocks/4 probe and "
        "blocks/4 test blocks from the same slice of the corpus.",
    )
    p.add_argument(
        "--overfit_offset", type=int, default=0, help="First train-split block of the overfit regime's slice."
    )
    p.add_argument(
        "--probe_blocks",
        type=int,
        default=64,
        help="underfit: validation blocks the controller's probe uses.",
    )
    p.add_argument(
        "--test_blocks",
        type=int,
        default=192,
        help="underfit: other validation blocks, for the reported loss.",
    )
    p.add_argument(
        "--eval_points", type=int, default=8, help="Evaluations along each fixed-value run (the test curve)."
    )
    # Grids and HDET.
    p.add_argument(
        "--dropout_grid", default=None, help="Fixed dropout values (full 0,0.05,0.1,0.3; quick 0,0.3)."
    )
    p.add_argument("--weight_decay_grid", default=None, help="Fixed weight decays (full 0,0.3,3; quick 0,3).")
    # HDET starts on the wrong side of each regime's optimum, by design: too little regularisation where the
    # model overfits, too much where it underfits.
    for regime, hparam, value in (
        ("overfit", "dropout", 0.05),
        ("overfit", "weight_decay", 0.3),
        ("underfit", "dropout", 0.3),
        ("underfit", "weight_decay", 3.0),
    ):
        p.add_argument(
            f"--{regime}_{hparam}_start",
            type=float,
            default=value,
            help=f"HDET's starting base {hparam}, {regime}.",
        )
    p.add_argument(
        "--seeds",
        default=None,
        help="Permutation seeds (--hdet_seed) of the probe-signal HDET runs, one run each (full 0,1,2; quick 0); "
        "train_loss runs use the first.",
    )
    p.add_argument("--spread", type=float, default=0.5, help="HDET spread of the explored hyperparameter.")
    p.add_argument("--sync_interval", type=int, default=None, help="HDET T (full 10, quick 5).")
    p.add_argument(
        "--null_controls",
        type=int,
        default=4,
        help="No-op scalars each HDET run also explores (same spread, controller and signal, independent "
        "permutations): their drift is the controller's noise floor.",
    )
    p.add_argument("--controller_lr", type=float, default=0.5, help="--hdet_controller_lr of the HDET runs.")
    p.add_argument("--seed", type=int, default=0, help="Model init and data order seed, same for every run.")
    p.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_work_dir", default="", help=argparse.SUPPRESS)
    return p


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    quick = args.quick
    defaults = {
        "max_steps": (400, 40),
        "sync_interval": (10, 5),
        "controller_signals": ("probe,train_loss", "probe"),
        "ground_truth": ("ddp,local", "ddp"),
        "seeds": ("0,1,2", "0"),
        "dropout_grid": ("0,0.05,0.1,0.3", "0,0.3"),
        "weight_decay_grid": ("0,0.3,3", "0,3"),
    }
    for name, (full, q) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, q if quick else full)
    for name, allowed in (
        ("regimes", REGIMES),
        ("hparams", HPARAMS),
        ("controller_signals", SIGNALS),
        ("ground_truth", GROUND_TRUTHS),
    ):
        values = [v.strip() for v in getattr(args, name).split(",") if v.strip()]
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise SystemExit(
                f"--{name} must be a comma-separated subset of {','.join(allowed)}, but got {bad or values}"
            )
        setattr(args, name, values)
    args.seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if not args.seeds:
        raise SystemExit("--seeds must list at least one integer seed")
    if args.num_processes < 2:
        raise SystemExit(
            f"--num_processes must be >= 2 (HDET compares replicas), but got {args.num_processes}"
        )
    return args


def grid(args: argparse.Namespace, hparam: str) -> list[float]:
    return sorted(float(x) for x in getattr(args, f"{hparam}_grid").split(",") if x.strip())


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every run, per regime and hyperparameter: the ground truth at fixed values (``kind`` ddp: plain DDP
    Trainer; ``kind`` local: HDET with nothing spread, i.e. the same local SGD + averaging every T steps that
    the controller runs in), then HDET with the controller on (``kind`` hdet), one run per signal."""
    specs = []
    for regime in args.regimes:
        for hparam in args.hparams:
            for kind in args.ground_truth:
                for value in grid(args, hparam):
                    specs.append(
                        {
                            "name": f"{regime}_{hparam}_{kind}{value:g}",
                            "regime": regime,
                            "hparam": hparam,
                            "kind": kind,
                            "value": value,
                        }
                    )
            for signal in args.controller_signals:
                for seed in args.seeds if signal == "probe" else args.seeds[:1]:
                    specs.append(
                        {
                            "name": f"{regime}_{hparam}_hdet_{signal}_s{seed}",
                            "regime": regime,
                            "hparam": hparam,
                            "kind": "hdet",
                            "value": getattr(args, f"{regime}_{hparam}_start"),
                            "signal": signal,
                            "hdet_seed": seed,
                        }
                    )
    if args.configs:
        patterns = [c.strip() for c in args.configs.split(",") if c.strip()]
        specs = [s for s in specs if any(fnmatch.fnmatchcase(s["name"], p) for p in patterns)]
    return specs


def overfit_split(offset: int, train_blocks: int, chunk: int = 8) -> tuple[list[int], list[int], list[int]]:
    """Block indices of the overfit regime: ``train_blocks * 3 / 2`` contiguous blocks from ``offset``, in
    chunks of ``chunk`` dealt 4:1:1 to (train, probe, test).

    Example:
        >>> train, probe, test = overfit_split(0, 8, chunk=2)
        >>> train, probe, test
        ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9], [10, 11])
    """
    if train_blocks < 4 * chunk or train_blocks % (4 * chunk):
        raise SystemExit(
            f"--overfit_blocks must be a positive multiple of {4 * chunk}, but got {train_blocks}"
        )
    parts: tuple[list[int], list[int], list[int]] = ([], [], [])
    for i in range(train_blocks * 3 // 2 // chunk):
        part = parts[0] if i % 6 < 4 else parts[1] if i % 6 == 4 else parts[2]
        part.extend(range(offset + i * chunk, offset + (i + 1) * chunk))
    return parts


# --------------------------------------------------------------------------------------------- worker
def worker(args: argparse.Namespace) -> None:
    """Runs inside torchrun: every config in sequence; rank 0 appends one JSON line per finished config."""
    os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    from hdet_hf import HDETTrainer, HDETTrainingArguments
    from hdet_hf.examples.data import load_default_task
    from hdet_hf.hyperparameters import Hyperparameter
    from hdet_hf.process import finish_distributed

    worker_info = init_worker("gloo")
    rank, world = worker_info.rank, worker_info.world
    out_dir = Path(args.out_dir)
    results_path = out_dir / RESULTS_JSONL
    done = {r["name"] for r in kept_results(results_path, keep=bool(args.resume or args.configs))}

    tokenizer, lm = load_default_task(block_size=args.block_size, vocab_size=args.vocab_size)
    # underfit: the whole train split; probe and test are disjoint random validation blocks (the blocks follow
    # the stdlib's file order, so they are shuffled first).
    validation = lm["validation"].shuffle(seed=args.seed)
    if len(validation) < args.probe_blocks + args.test_blocks:
        raise SystemExit(
            f"The validation split has {len(validation)} blocks of {args.block_size} tokens; --probe_blocks "
            f"{args.probe_blocks} + --test_blocks {args.test_blocks} do not fit."
        )
    # overfit: one contiguous slice of the train split (a few modules' docstrings: one small domain), cut in
    # chunks of 8 blocks dealt 4:1:1 to train, probe and test, so the held-out blocks come from the same
    # domain as the training blocks but share no text with them (except across a chunk edge).
    train_idx, probe_idx, test_idx = overfit_split(args.overfit_offset, args.overfit_blocks)
    splits = {
        "overfit": {
            "train": lm["train"].select(train_idx),
            "probe": lm["train"].select(probe_idx),
            "test": lm["train"].select(test_idx),
        },
        "underfit": {
            "train": lm["train"],
            "probe": validation.select(range(args.probe_blocks)),
            "test": validation.select(range(args.probe_blocks, args.probe_blocks + args.test_blocks)),
        },
    }

    def log(msg: str) -> None:
        if rank == 0:
            print(f"[hparam_direction {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def run(spec: dict[str, Any]) -> dict[str, Any]:
        hparam, kind = spec["hparam"], spec["kind"]
        data = splits[spec["regime"]]
        hdet = kind == "hdet"
        dropout = spec["value"] if hparam == "dropout" else 0.0
        weight_decay = spec["value"] if hparam == "weight_decay" else 0.0
        transformers.set_seed(args.seed)
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=len(tokenizer),
                n_positions=args.block_size,
                n_embd=args.n_embd,
                n_layer=args.n_layer,
                n_head=args.n_head,
                resid_pdrop=dropout,
                embd_pdrop=dropout,
                attn_pdrop=dropout,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        )
        eval_steps = max(args.max_steps // max(args.eval_points, 1), 1)
        targs: dict[str, Any] = dict(
            output_dir=os.path.join(args._work_dir, spec["name"]),
            use_cpu=True,
            report_to="none",
            disable_tqdm=True,
            save_strategy="no",
            logging_strategy="steps",
            logging_steps=eval_steps,
            max_steps=args.max_steps,
            per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=32,
            learning_rate=args.learning_rate,
            lr_scheduler_type="cosine",
            warmup_steps=max(int(0.05 * args.max_steps), 1),
            weight_decay=weight_decay,
            seed=args.seed,
            data_seed=args.seed,
            dataloader_num_workers=0,
            # Fixed runs: a held-out curve (it shows the regime). HDET runs: no mid-run evaluation, which would
            # force extra converges; the eval_dataset is the probe set.
            eval_strategy="no" if hdet else "steps",
            eval_steps=eval_steps,
        )
        if kind in ("local", "hdet"):
            targs.update(
                hdet=True,
                hdet_base_schedule="trainer",
                # Local mode: dropout is explored only there (shared mode averages its effect away); the
                # controller momentum and exploring to the last step of the recorded results (the library
                # defaults then).
                hdet_gradient_sync="local",
                hdet_controller_momentum=0.9,
                hdet_explore_until=1.0,
                hdet_lr_spread=0.0,
                hdet_sync_interval=args.sync_interval,
                hdet_seed=spec.get("hdet_seed", args.seed),
            )
        if hdet:
            targs.update(
                hdet_controller_signal=spec["signal"],
                hdet_probe_size=len(data["probe"]),
                hdet_controller_lr=args.controller_lr,
                **{f"hdet_{hparam}_spread": args.spread, f"hdet_{hparam}_auto": True},
            )
        trainer = HDETTrainer(
            model=model,
            args=HDETTrainingArguments(**targs),
            train_dataset=data["train"],
            eval_dataset=data["probe"] if hdet else data["test"],
        )
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
        nulls = [f"null{i}" for i in range(args.null_controls)] if hdet else []
        for name in nulls:
            # No-op scalars under the same controller and signal: how far a base drifts on noise alone.
            trainer.add_hyperparameter(
                Hyperparameter(name, spread=args.spread, base=1.0, setter=lambda value: None, auto=True)
            )
        t0 = time.time()
        out = trainer.train()
        train_s = time.time() - t0
        metrics = trainer.evaluate(eval_dataset=data["test"])
        history = trainer.state.log_history
        record: dict[str, Any] = {
            **spec,
            "test_loss": float(metrics["eval_loss"]),
            "train_loss": float(out.training_loss),
            "train_loss_curve": [(h["step"], h["loss"]) for h in history if "loss" in h],
            "test_loss_curve": [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h],
            "train_s": round(train_s, 1),
            "world_size": world,
            "train_blocks": len(data["train"]),
            "probe_blocks": len(data["probe"]),
            "test_blocks": len(data["test"]),
            "epochs": args.max_steps * args.batch_size * world / len(data["train"]),
        }
        engine = trainer.hdet_engine
        if engine is not None and hdet:
            values = engine.values_per_step[hparam]
            record.update(
                start=values[0],
                final=values[-1],
                min=min(values),
                max=max(values),
                values_per_step=values,
                syncs=[
                    {
                        "step": t["step"],
                        "base": t["base"][hparam],
                        "multipliers": t["multipliers"][hparam],
                        "losses": t["losses"],
                        "probe_losses": t["probe_losses"],
                        "delta": t["delta"].get(hparam),
                        "active": t["controller_active"],
                    }
                    for t in engine.trajectory
                ],
                null_ratios=[engine.values_per_step[n][-1] / engine.values_per_step[n][0] for n in nulls],
                null_values_per_step=[engine.values_per_step[n] for n in nulls],
            )
        shutil.rmtree(targs["output_dir"], ignore_errors=True)
        return record

    for spec in plan(args):
        if spec["name"] in done:
            continue
        log(f"start {spec['name']}")
        record = run(spec)
        if rank == 0:
            append_result(results_path, record)
        moved = f", base {record['start']:.3g} -> {record['final']:.3g}" if "final" in record else ""
        log(f"done  {spec['name']}: test loss {record['test_loss']:.4f}{moved}, {record['train_s']:.0f} s")
    finish_distributed()


# --------------------------------------------------------------------------------------------- report
def direction(ratio: float) -> str:
    if not math.isfinite(ratio):
        return "n/a"
    if ratio >= MOVE_THRESHOLD:
        return "up"
    if ratio <= 1 / MOVE_THRESHOLD:
        return "down"
    return "flat"


def _fixed(records: list[dict[str, Any]], regime: str, hparam: str, kind: str) -> list[dict[str, Any]]:
    runs = [r for r in records if r["regime"] == regime and r["hparam"] == hparam and r["kind"] == kind]
    return sorted(runs, key=lambda r: r["value"])


def _truth(fixed: list[dict[str, Any]], start: float) -> tuple[float | None, str]:
    """The best fixed value and whether it lies above or below HDET's start value."""
    if not fixed:
        return None, "n/a"
    best = min(fixed, key=lambda r: r["test_loss"])["value"]
    return best, "up" if best > start else "down" if best < start else "flat"


def _correlation(xs: list[float], ys: list[float]) -> float | None:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if not sx or not sy:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sx * sy)


def signal_correlations(run: dict[str, Any]) -> list[float]:
    """Per converge where the controller acted: the correlation over ranks between log multiplier and the loss it
    compared. Negative: the replicas with more of the hyperparameter scored better (the controller moves it up)."""
    out = []
    for sync in run.get("syncs") or []:
        losses = sync["probe_losses"] or sync["losses"]
        if not sync.get("active") or not losses or not all(math.isfinite(x) for x in losses):
            continue
        c = _correlation([math.log(m) for m in sync["multipliers"]], losses)
        if c is not None:
            out.append(c)
    return out


def _mean_sem(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))


def analyse(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (regime, hyperparameter, signal), over its seeds: each ground truth's direction vs. where the
    controller took the base, the no-op scalars' drift (noise floor), and the per-converge signal.

    ``truth`` is the local-SGD ground truth when it was measured (the procedure the controller works in), else
    DDP's. ``right`` counts the seeds that moved that way; ``beyond_noise`` says whether the median move lies
    outside the range of the no-op scalars' moves.
    """
    rows = []
    hdet = [r for r in records if r["kind"] == "hdet"]
    keys = sorted(
        {(r["regime"], r["hparam"], r["signal"]) for r in hdet},
        key=lambda k: (REGIMES.index(k[0]), HPARAMS.index(k[1]), SIGNALS.index(k[2])),
    )
    for regime, hparam, signal in keys:
        runs = sorted(
            (r for r in hdet if (r["regime"], r["hparam"], r["signal"]) == (regime, hparam, signal)),
            key=lambda r: r.get("hdet_seed", 0),
        )
        start = runs[0]["value"]
        ratios = [r["final"] / r["start"] for r in runs]
        moves = [direction(x) for x in ratios]
        median = sorted(ratios)[len(ratios) // 2]
        nulls = [x for r in runs for x in r.get("null_ratios") or [] if x and x > 0]
        row: dict[str, Any] = {
            "regime": regime,
            "hparam": hparam,
            "signal": signal,
            "start": start,
            "seeds": [r.get("hdet_seed", 0) for r in runs],
            "finals": [r["final"] for r in runs],
            "ratios": ratios,
            "median_ratio": median,
            "moved": moves,
            "null_ratios": nulls,
            "beyond_noise": bool(nulls) and not min(nulls) <= median <= max(nulls),
            "hdet_test_losses": [r["test_loss"] for r in runs],
        }
        for kind in GROUND_TRUTHS:
            fixed = _fixed(records, regime, hparam, kind)
            best, truth = _truth(fixed, start)
            row[f"{kind}_losses"] = {f"{x['value']:g}": round(x["test_loss"], 4) for x in fixed}
            row[f"{kind}_best"] = best
            row[f"{kind}_truth"] = truth
        truth = row["local_truth"] if row["local_truth"] != "n/a" else row["ddp_truth"]
        row["truth"] = truth
        row["right"] = sum(m == truth for m in moves) if truth in ("up", "down") else None
        halves = [signal_correlations(r) for r in runs]
        row["correlation"] = _mean_sem([c for h in halves for c in h])
        row["correlation_first_half"] = _mean_sem([c for h in halves for c in h[: len(h) // 2]])
        row["correlation_second_half"] = _mean_sem([c for h in halves for c in h[len(h) // 2 :]])
        rows.append(row)
    return rows


def _fmt(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(rows: list[dict[str, Any]], records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# Does the HDET controller move dropout / weight decay the right way?", ""]
    if meta:
        lines += [
            f"Command: `{meta.get('command', '')}`  ",
            f"Date: {meta.get('date', '')}  ",
            f"Machine: {meta.get('machine', '')}  ",
            f"Wall time: {meta.get('wall_s', 'n/a')} s",
            "",
        ]
    lines += [
        "## Ground truth: held-out test loss at fixed values (final train loss in brackets)",
        "",
        "ddp: plain DDP Trainer. local: HDET with nothing spread (local SGD, parameters averaged every T steps),",
        "the procedure the controller runs in.",
        "",
        "| regime | hyperparameter | value | epochs | ddp | local |",
        "|---|---|---|---|---|---|",
    ]
    fixed = [r for r in records if r["kind"] in GROUND_TRUTHS]
    keys = sorted(
        {(r["regime"], r["hparam"], r["value"]) for r in fixed},
        key=lambda k: (REGIMES.index(k[0]), HPARAMS.index(k[1]), k[2]),
    )
    for regime, hparam, value in keys:
        cells, epochs = [], None
        for kind in GROUND_TRUTHS:
            match = [r for r in _fixed(records, regime, hparam, kind) if r["value"] == value]
            if match:
                r = match[0]
                epochs = r["epochs"]
                train = r["train_loss_curve"][-1][1] if r["train_loss_curve"] else r["train_loss"]
                cells.append(f"{r['test_loss']:.4f} ({train:.2f})")
            else:
                cells.append("-")
        lines.append(f"| {regime} | {hparam} | {value:g} | {_fmt(epochs, '.1f')} | {' | '.join(cells)} |")
    lines += [
        "",
        "## HDET controller (spread 0.5 on this hyperparameter only, LR not spread)",
        "",
        "right direction: where the best fixed value lies from HDET's start (local ground truth). final / start: "
        "one ratio per seed. no-op drift: the range of final / start of the no-op scalars explored in the same "
        "runs (the noise floor). corr: per converge, correlation over ranks between log multiplier and the loss "
        "compared, mean +- s.e.m. over converges (first half | second half of the run); negative = more of it "
        "scored better.",
        "",
        "| regime | hyperparameter | signal | best fixed (ddp / local) | right direction | start | final / start "
        "per seed | right (seeds) | no-op drift | median beyond noise? | corr first half | corr second half | "
        "HDET test loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        right = "n/a" if row["right"] is None else f"{row['right']}/{len(row['ratios'])}"
        nulls = row["null_ratios"]
        noise = f"x{min(nulls):.2f}..x{max(nulls):.2f}" if nulls else "-"
        ratios = ", ".join(f"x{x:.2f}" for x in row["ratios"])
        first = "{:+.2f} +- {:.2f}".format(*row["correlation_first_half"])
        second = "{:+.2f} +- {:.2f}".format(*row["correlation_second_half"])
        losses = ", ".join(f"{x:.3f}" for x in row["hdet_test_losses"])
        lines.append(
            f"| {row['regime']} | {row['hparam']} | {row['signal']} | {_fmt(row['ddp_best'], 'g')} / "
            f"{_fmt(row['local_best'], 'g')} | {row['truth']} | {row['start']:g} | {ratios} | {right} | {noise} | "
            f"{'yes' if row['beyond_noise'] else 'no'} | {first} | {second} | {losses} |"
        )
    lines.append("")
    return "\n".join(lines)


def plot(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """base_<regime>.png: the HDET base value per optimizer step, one panel per hyperparameter, with the best
    fixed value of each ground truth."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    written = []
    for regime in REGIMES:
        runs = [
            r for r in records if r["regime"] == regime and r["kind"] == "hdet" and r.get("values_per_step")
        ]
        if not runs:
            continue
        hparams = [h for h in HPARAMS if any(r["hparam"] == h for r in runs)]
        fig = Figure(figsize=(6.0 * len(hparams), 4.2), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(hparams), squeeze=False)[0]
        for ax, hparam in zip(axes, hparams):
            colours = {"probe": "C0", "train_loss": "C3"}
            labelled: set[str] = set()
            for r in (x for x in runs if x["hparam"] == hparam):
                values = r["values_per_step"]
                colour = colours[r["signal"]]
                if r["signal"] == "probe":
                    for null in r.get("null_values_per_step") or []:
                        # A no-op scalar's drift, scaled to the start: where noise alone takes a base.
                        ax.plot(
                            range(1, len(null) + 1),
                            [values[0] * x for x in null],
                            color="0.6",
                            lw=0.6,
                            alpha=0.5,
                            label=None if "null" in labelled else "no-op scalars (probe runs), scaled",
                        )
                        labelled.add("null")
                ax.plot(
                    range(1, len(values) + 1),
                    values,
                    color=colour,
                    lw=1.6,
                    label=None if r["signal"] in labelled else f"HDET base, {r['signal']} signal",
                )
                labelled.add(r["signal"])
            for kind, style in (("ddp", ":"), ("local", "--")):
                fixed = _fixed(records, regime, hparam, kind)
                if fixed:
                    best = min(fixed, key=lambda r: r["test_loss"])["value"]
                    label = f"best fixed value, {kind} ({best:g})"
                    if best > 0:
                        ax.axhline(best, color="k", ls=style, lw=1, label=label)
                    else:  # 0 has no place on a log axis: named in the legend only
                        ax.plot([], [], color="k", ls=style, lw=1, label=label + ", off the log axis")
            ax.set_yscale("log")
            ax.set_title(f"{regime}: base {hparam}")
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(hparam)
            ax.legend(fontsize="x-small", loc="best", framealpha=0.85)
        path = out_dir / f"base_{regime}.png"
        fig.savefig(path, dpi=110)
        written.append(path)
    return written


def write_report(out_dir: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    records = read_results(out_dir / RESULTS_JSONL)
    if not records:
        raise SystemExit(f"No results in {out_dir / RESULTS_JSONL}; run the experiment first.")
    json_path = out_dir / "results.json"
    if meta is None and json_path.is_file():
        meta = json.loads(json_path.read_text(encoding="utf-8")).get("meta", {})
    rows = analyse(records)
    # The per-step and per-converge series stay in results.jsonl only.
    bulky = ("values_per_step", "null_values_per_step", "syncs")
    runs = [{k: v for k, v in r.items() if k not in bulky} for r in records]
    content = {"meta": meta or {}, "summary": rows, "runs": runs}
    json_path.write_text(
        json.dumps(finite_or_none(content), indent=1, allow_nan=False) + "\n", encoding="utf-8"
    )
    (out_dir / "results.md").write_text(markdown(rows, records, meta or {}), encoding="utf-8")
    plot(records, out_dir)
    return content


# --------------------------------------------------------------------------------------------- launch
def launch(argv: list[str], args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    keep = bool(args.resume or args.configs)  # resuming, or adding configs to the earlier results
    rc, wall, meta = launch_experiment(
        __file__, argv, out_dir, args.num_processes, keep=keep, settings=public_settings(args)
    )
    if (out_dir / RESULTS_JSONL).is_file():
        write_report(out_dir, meta)
        print(f"hparam_direction: {wall:.0f} s; wrote {out_dir}/results.md, results.json, base_<regime>.png")
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = resolve_defaults(build_parser().parse_args(argv))
    if args.report_only:
        write_report(Path(args.out_dir))
        print(f"hparam_direction: rebuilt the report in {args.out_dir}")
        return 0
    if args.list:
        for spec in plan(args):
            print(spec["name"])
        return 0
    sys.path.insert(0, str(REPO))
    if args._worker:
        worker(args)
        return 0
    return launch(argv, args)


if __name__ == "__main__":
    sys.exit(main())
