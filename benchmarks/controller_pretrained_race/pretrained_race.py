"""Diagnostic (session 39, BENCHMARKS.md reading 44): does a race of constant LRs from the initial weights pick
the sweep's best LR when the model is *pretrained*?

Reading 43 found the race decisive and wrong (0.1-0.3x the best LR) on language models trained from scratch and
right on the pretrained MiniLM classifier. This asks whether "pretrained" is what separates them, on a language
model: task a's Llama (hidden 64, 2 layers) is pretrained on the stdlib docstring corpus (the CLM task, 300 steps
at its sweep's best LR 0.01), then fine-tuned on a different text, the stdlib's *source code* (files split into
train / validation by a hash of their path). On one process with the global batch, AdamW (0.9, 0.999), clipping at
1.0, as the benchmark's tasks run:

- sweep: OneCycle (HDET's base schedule, 30 % warm-up) for --steps at each LR of --grid; eval loss on the
  validation blocks;
- race: K steps at each constant LR from the same initial weights, no warm-up, then the loss on a 64-block probe
  of held-out train blocks (with a paired standard error of each point's gap to the winner), at the global batch
  (4 x 8 blocks) and at one replica's batch (8 blocks).

    python benchmarks/controller_pretrained_race/pretrained_race.py --init pretrained --seed 0
    python benchmarks/controller_pretrained_race/pretrained_race.py --init scratch --seed 0   # the control

One JSON line per call goes to results.jsonl beside this file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import datasets
import torch
import transformers

from hdet_hf.examples.data import (
    _iter_stdlib_sources,
    _stdlib_dir,
    build_default_model,
    group_texts_for_clm,
    load_default_task,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "scripts"))
from benchmark_quality import one_cycle_shape  # noqa: E402

SIZES = dict(
    hidden_size=64, num_hidden_layers=2, intermediate_size=172, num_attention_heads=4, num_key_value_heads=2
)


def code_corpus(tokenizer, block_size: int) -> datasets.DatasetDict:
    """The stdlib's .py files as text (the fine-tuning domain), 1 file in 10 to validation by a hash of its path."""
    root = _stdlib_dir()
    split = {"train": [], "validation": []}
    for path in _iter_stdlib_sources(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        name = path.relative_to(root).as_posix()
        bucket = "validation" if int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 10 == 0 else "train"
        split[bucket].append(text)
    raw = datasets.DatasetDict({k: datasets.Dataset.from_dict({"text": v}) for k, v in split.items()})
    return group_texts_for_clm(raw, tokenizer, block_size)


def batches(ds, order: list[int], step: int, size: int) -> dict[str, torch.Tensor]:
    idx = [order[(step * size + j) % len(order)] for j in range(size)]
    x = torch.tensor(ds[idx]["input_ids"])
    return {"input_ids": x, "labels": x}


def per_block_losses(model, blocks: dict[str, torch.Tensor], chunk: int = 32) -> torch.Tensor:
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(blocks["input_ids"]), chunk):
            x = blocks["input_ids"][i : i + chunk]
            logits = model(input_ids=x).logits[:, :-1].float()
            tok = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
            out.append(tok.mean(dim=1))
    model.train()
    return torch.cat(out)


def train(model, ds, order, steps: int, batch: int, lr_at, weight_decay: float = 0.0) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(0), betas=(0.9, 0.999), weight_decay=weight_decay)
    model.train()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = model(**batches(ds, order, step, batch)).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def one_cycle_lrs(peak: float, steps: int) -> list[float]:
    """HDET's OneCycle base schedule at this peak (`benchmark_quality.one_cycle_shape`, the shape every task runs)."""
    return [peak * value for value in one_cycle_shape(steps)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--init", choices=("pretrained", "scratch"), default="pretrained")
    p.add_argument("--seed", type=int, default=0, help="Fine-tuning data order and (scratch) init seed.")
    p.add_argument("--steps", type=int, default=200, help="Fine-tuning steps of each sweep point.")
    p.add_argument("--race_steps", default="30,60", help="K of the race (comma-separated).")
    p.add_argument("--grid", default="1e-3,3e-3,1e-2,3e-2,1e-1", help="LRs of the sweep and the race.")
    p.add_argument("--pretrain_steps", type=int, default=300)
    p.add_argument("--pretrain_lr", type=float, default=0.01)
    p.add_argument("--batch", type=int, default=32, help="Global batch (blocks); one replica's is batch / 4.")
    a = p.parse_args()
    torch.set_num_threads(2)
    datasets.disable_progress_bars()
    tokenizer, docs = load_default_task(block_size=128, vocab_size=1024)
    code = code_corpus(tokenizer, 128)
    ckpt = HERE / f"pretrained_state_{a.pretrain_steps}.pt"

    def build():
        transformers.set_seed(0 if a.init == "pretrained" else a.seed)
        model = build_default_model(tokenizer, **SIZES)
        if a.init == "pretrained":
            model.load_state_dict(torch.load(ckpt))
        return model

    if a.init == "pretrained" and not ckpt.exists():
        transformers.set_seed(0)
        model = build_default_model(tokenizer, **SIZES)
        order = torch.randperm(len(docs["train"]), generator=torch.Generator().manual_seed(0)).tolist()
        lrs = one_cycle_lrs(a.pretrain_lr, a.pretrain_steps)
        train(model, docs["train"], order, a.pretrain_steps, a.batch, lambda s: lrs[s])
        torch.save(model.state_dict(), ckpt)
        docs_eval = {"input_ids": torch.tensor(docs["validation"]["input_ids"])}
        print("pretrained; docstring eval loss", float(per_block_losses(model, docs_eval).mean()), flush=True)

    train_ds = code["train"]
    eval_blocks = {
        "input_ids": torch.tensor(code["validation"].select(range(240))["input_ids"])
    }  # as task a: 240
    order = torch.randperm(len(train_ds), generator=torch.Generator().manual_seed(a.seed)).tolist()
    probe_idx, order = (
        order[:64],
        order[64:],
    )  # the race's probe: held-out train blocks, as HDET's probe holdout
    probe = {"input_ids": torch.tensor(train_ds[probe_idx]["input_ids"])}
    grid = [float(x) for x in a.grid.split(",")]
    res = {
        "init": a.init,
        "seed": a.seed,
        "steps": a.steps,
        "train_blocks": len(order),
        "eval_blocks": len(eval_blocks["input_ids"]),
        "at_init_eval": float(per_block_losses(build(), eval_blocks).mean()),
    }
    t0 = time.time()
    sweep = {}
    for lr in grid:
        model = build()
        lrs = one_cycle_lrs(lr, a.steps)
        train(model, train_ds, order, a.steps, a.batch, lambda s, lrs=lrs: lrs[s])
        sweep[lr] = round(float(per_block_losses(model, eval_blocks).mean()), 4)
        print("sweep", lr, sweep[lr], f"{time.time() - t0:.0f}s", flush=True)
    res["sweep"] = sweep
    res["sweep_best"] = min(sweep, key=lambda k: sweep[k] if math.isfinite(sweep[k]) else 1e9)
    for k in [int(x) for x in a.race_steps.split(",")]:
        for label, batch in (("global", a.batch), ("replica", a.batch // 4)):
            per = {}
            for lr in grid:
                model = build()
                train(model, train_ds, order, k, batch, lambda s, lr=lr: lr)
                per[lr] = per_block_losses(model, probe)
            losses = {lr: float(v.mean()) for lr, v in per.items()}
            best = min(losses, key=lambda x: losses[x] if math.isfinite(losses[x]) else 1e9)
            gaps = {
                lr: [
                    round(float((per[lr] - per[best]).mean()), 4),
                    round(float((per[lr] - per[best]).std() / math.sqrt(len(per[best]))), 4),
                ]
                for lr in grid
            }
            res[f"race_K{k}_{label}"] = {"best": best, "gap_and_se": gaps}
            print("race", k, label, best, gaps, flush=True)
    print(json.dumps(res), flush=True)
    with open(HERE / "results.jsonl", "a") as f:
        f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
