"""Diagnostic (session 23, BENCHMARKS.md reading 28): can the first few % of a run estimate the sweep's best peak LR?
From init, on one process with the global batch (4 ranks x batch), AdamW as the task runs it:
 (A) an exponential LR range test over K steps, 1e-5 -> 1 (Smith): LR at the smoothed loss's minimum and at its
     steepest descent;
 (B) constant LR for K steps at each point of a half-decade grid, then the loss on a held-out probe batch.
 (C) (session 41) the same race with the run's schedule shape compressed into K steps: OneCycle (30 % warm-up from
     peak / 25, cosine decay to peak / 1e4) at each grid point as the peak, then the probe. A constant LR leaves each
     copy at its LR's noise floor, which favours small steps; a finished schedule removes that floor.
"""

import argparse
import json
import math
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "scripts"))
import torch
import transformers

p = argparse.ArgumentParser()
p.add_argument("--task", default="clm")
p.add_argument("--name", required=True)
p.add_argument("--steps", type=int, default=40)
p.add_argument("--batch_size", type=int, default=8)
p.add_argument("--hidden_size", type=int, default=64)
p.add_argument("--num_hidden_layers", type=int, default=2)
p.add_argument("--intermediate_size", type=int, default=172)
p.add_argument("--adam_beta2", type=float, default=0.999)
p.add_argument("--weight_decay", type=float, default=0.0)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--grid", default="1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1")
p.add_argument("--modes", default="A,B")
a = p.parse_args()
torch.set_num_threads(2)
G = 4 * a.batch_size
if a.task == "docstrings":
    from docstring_task import build_minilm_classifier, load_docstring_task

    tok, data = load_docstring_task(max_length=64, seed=a.seed)
    train = data["train"].with_format("torch")
    ev = data["validation"].with_format("torch")
    cols = [c for c in ("input_ids", "attention_mask", "labels") if c in train.column_names]

    def build():
        transformers.set_seed(a.seed)
        return build_minilm_classifier()

    def batch(ds, i, n):
        idx = [(i * n + j) % len(ds) for j in range(n)]
        b = ds[idx]
        return {c: b[c] for c in cols}
else:
    from hdet_hf.examples.data import build_default_model, load_default_task

    tok, lm = load_default_task(block_size=128, vocab_size=1024)
    train = lm["train"].with_format("torch")
    ev = lm["validation"].with_format("torch")

    def build():
        transformers.set_seed(a.seed)
        return build_default_model(
            tok,
            hidden_size=a.hidden_size,
            num_hidden_layers=a.num_hidden_layers,
            intermediate_size=a.intermediate_size,
            num_attention_heads=4,
            num_key_value_heads=2,
        )

    def batch(ds, i, n):
        idx = [(i * n + j) % len(ds) for j in range(n)]
        x = ds[idx]["input_ids"]
        return {"input_ids": x, "labels": x}


g = torch.Generator().manual_seed(a.seed)
perm = torch.randperm(len(train), generator=g).tolist()
train = train.select(perm)
probe = batch(ev, 0, 64)


def loss_of(model, b):
    return model(**b).loss


def per_example_losses(model, b):
    """Each probe example's mean token loss (session 38: a paired standard error between two race points)."""
    logits = model(**{k: v for k, v in b.items() if k != "labels"}).logits
    labels = b["labels"]
    if logits.dim() == 2:  # sequence classification
        return torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
    logits, labels = logits[:, :-1].float(), labels[:, 1:]
    tok = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    return tok.mean(dim=1)


def run(lrs):
    model = build()
    model.train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=lrs[0], betas=(0.9, a.adam_beta2), weight_decay=a.weight_decay
    )
    out = []
    for i, lr in enumerate(lrs):
        for gr in opt.param_groups:
            gr["lr"] = lr
        loss = loss_of(model, batch(train, i, G))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        pl = float(loss_of(model, probe))
        per = per_example_losses(model, probe).tolist()
    return out, pl, per


res = {"name": a.name, "steps": a.steps}
if "A" in a.modes:
    K = a.steps
    lrs = [1e-5 * (1e5) ** (i / (K - 1)) for i in range(K)]
    losses, _, _ = run(lrs)
    sm, avg = [], 0.0
    for i, value in enumerate(losses):
        avg = 0.8 * avg + 0.2 * value
        sm.append(avg / (1 - 0.8 ** (i + 1)))
    finite = [i for i in range(K) if math.isfinite(sm[i])]
    imin = min(finite, key=lambda i: sm[i])
    slopes = [(sm[i + 1] - sm[i - 1]) for i in range(1, imin)] if imin > 2 else [0]
    isteep = 1 + min(range(len(slopes)), key=lambda j: slopes[j])
    res.update(A_min_lr=lrs[imin], A_steep_lr=lrs[isteep], A_losses=[round(x, 3) for x in losses])
def race(schedule_of):
    """Train from init under ``schedule_of(lr)`` at each grid point; the probe losses, the winner, and each point's
    gap to the winner with its paired standard error over the probe's examples (how decisive the race is)."""
    grid = [float(x) for x in a.grid.split(",")]
    probes, per = {}, {}
    for lr in grid:
        _, probes[lr], per[lr] = run(schedule_of(lr))
    best = min(probes, key=lambda k: probes[k] if math.isfinite(probes[k]) else 1e9)
    paired = {}
    for lr in grid:
        d = torch.tensor(per[lr]) - torch.tensor(per[best])
        paired[lr] = [round(float(d.mean()), 4), round(float(d.std() / math.sqrt(len(d))), 4)]
    return probes, best, paired


if "B" in a.modes:
    probes, best, paired = race(lambda lr: [lr] * a.steps)
    res.update(B_probe=probes, B_best=best, B_gap_and_se=paired)
if "C" in a.modes:
    K = a.steps
    warm = max(1, round(0.3 * K))

    def one_cycle(peak):
        up = [peak / 25 + (peak - peak / 25) * i / warm for i in range(warm)]
        down = [peak / 1e4 + (peak - peak / 1e4) * (1 + math.cos(math.pi * i / (K - warm))) / 2 for i in range(K - warm)]
        return up + down

    probes, best, paired = race(one_cycle)
    res.update(C_probe=probes, C_best=best, C_gap_and_se=paired)
print(json.dumps(res), flush=True)
with open(__import__("pathlib").Path(__file__).with_name("results.jsonl"), "a") as f:
    f.write(json.dumps(res) + "\n")
