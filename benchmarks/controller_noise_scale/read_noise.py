"""Session 37 (reading 42): does the gradient noise scale calibrate the probe's line search?

The probe's line-search optimum m* (the probe loss along ``anchor + m D``, D one interval's update) orders the starts
on every task but its value at the best LR varies 2-8 between tasks (reading 22), so a raw threshold cannot tell a
correct LR from a wrong one. McCandlish et al. 2018 ("An empirical model of large-batch training") predict that the
best step is the noiseless line-search step divided by ``1 + B_noise / B``, B_noise = tr(Sigma) / |G|^2 the gradient
noise scale. If the long-step bias of m* is that factor, ``lr(t) m* / (1 + B_noise / B)`` estimates one LR whatever
the start, and its ratio to the best run's LR at the same time is the same on every task.

This reads it outside the engine, in one process that plays N data-parallel ranks: each step draws N micro-batches
of the task's per-rank batch, takes each one's gradient (for the small-batch norm), steps AdamW on their mean (the
all-reduced gradient, clipped at 1.0 like the Trainer) along HDETTrainer's OneCycle base schedule, and at every
default interval (3 % of the run, at least 10 steps) reads the probe (32 train examples, the same every time) along
that interval's update at m = 0 ... 32, and the noise scale over the interval (the two-batch-size estimator of
McCandlish et al., appendix A, on plain and on Adam-preconditioned gradients).

    python benchmarks/controller_noise_scale/read_noise.py --folder controller --lr_factor 1 > a_best.txt
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)


def build(settings: dict, seed: int):
    """(model, train dataset, collate) for a benchmark folder's recorded settings, as the harness builds them."""
    import transformers

    transformers.set_seed(seed)
    if settings["task"] == "docstrings":
        from benchmark_quality import with_lora
        from docstring_task import build_minilm_classifier, load_docstring_task

        _, data = load_docstring_task(max_length=settings["max_length"], seed=seed)
        model = build_minilm_classifier()
        if settings.get("lora_r"):
            model = with_lora(model, settings["lora_r"])
    else:
        from benchmark_quality import build_gpt2_model

        from hdet_hf.examples.data import build_default_model, load_default_task

        tokenizer, data = load_default_task(block_size=settings["block_size"], vocab_size=settings["vocab_size"])
        sizes = {k: settings[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size")}
        sizes.update(num_attention_heads=settings["num_attention_heads"])
        if settings.get("model_type") == "gpt2":
            model = build_gpt2_model(tokenizer, settings["block_size"], **sizes)
        else:
            model = build_default_model(tokenizer, num_key_value_heads=settings["num_key_value_heads"], **sizes)
    train = data["train"]
    train.set_format("torch")
    columns = [c for c in ("input_ids", "attention_mask", "token_type_ids", "labels") if c in train.column_names]
    return model, train, columns


def batch_of(train, columns, indices) -> dict:
    rows = train[indices]
    return {c: rows[c] for c in columns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, help="a recorded benchmark folder under benchmarks/")
    parser.add_argument("--lr_factor", type=float, default=1.0, help="the start LR over the folder's best LR")
    parser.add_argument("--until", type=float, default=0.3, help="read up to this share of the run")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from hdet_hf.schedulers import one_cycle_base_schedule

    meta = json.load(open(REPO / "benchmarks" / args.folder / "results.json"))["meta"]["settings"]
    steps, b, n = meta["max_steps"], meta["batch_size"], args.processes
    best = meta["best_lr"]
    lr = best * args.lr_factor
    interval = max(round(0.03 * steps), 10)
    torch.manual_seed(args.seed)
    model, train, columns = build(meta, args.seed)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, meta["adam_beta2"]), weight_decay=meta["weight_decay"])
    sched = one_cycle_base_schedule(opt, steps, 0)
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train), generator=gen).tolist()
    probe = batch_of(train, columns, order[:32])
    cursor = 32

    def flat_grad() -> torch.Tensor:
        return torch.cat([p.grad.reshape(-1) for p in params])

    def probe_loss() -> float:
        with torch.no_grad():
            model.eval()
            out = model(**probe).loss.item()
            model.train()
        return out

    anchor = torch.cat([p.detach().reshape(-1).clone() for p in params])
    sums = {"small": 0.0, "big": 0.0, "small_p": 0.0, "big_p": 0.0, "steps": 0}
    print(json.dumps({"folder": args.folder, "lr": lr, "best": best, "steps": steps, "b": b, "n": n, "T": interval}))
    for step in range(1, int(args.until * steps) + 1):
        grads = []
        for _ in range(n):
            if cursor + b > len(order):
                order = torch.randperm(len(train), generator=gen).tolist()
                cursor = 0
            batch = batch_of(train, columns, order[cursor : cursor + b])
            cursor += b
            opt.zero_grad(set_to_none=True)
            model(**batch).loss.backward()
            grads.append(flat_grad())
        mean = torch.stack(grads).mean(0)
        # Adam's preconditioner before this step (1 where it has no state yet).
        state = [opt.state[p] for p in params]
        if state[0]:
            v = torch.cat([s["exp_avg_sq"].reshape(-1) for s in state]) / (1 - meta["adam_beta2"] ** state[0]["step"])
            precond = 1.0 / (v.sqrt() + 1e-8)
        else:
            precond = torch.ones_like(mean)
        sums["small"] += sum(float(g.pow(2).sum()) for g in grads) / n
        sums["big"] += float(mean.pow(2).sum())
        sums["small_p"] += sum(float((g.pow(2) * precond).sum()) for g in grads) / n
        sums["big_p"] += float((mean.pow(2) * precond).sum())
        sums["steps"] += 1
        offset = 0
        for p in params:
            p.grad = mean[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        current_lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        if step % interval == 0:
            now = torch.cat([p.detach().reshape(-1).clone() for p in params])
            direction = now - anchor
            losses = []
            for m in GRID:
                target = anchor + m * direction
                offset = 0
                with torch.no_grad():
                    for p in params:
                        p.copy_(target[offset : offset + p.numel()].view_as(p))
                        offset += p.numel()
                losses.append(probe_loss())
            with torch.no_grad():
                offset = 0
                for p in params:
                    p.copy_(now[offset : offset + p.numel()].view_as(p))
                    offset += p.numel()
            k = min(range(len(GRID)), key=lambda i: losses[i])
            m_star = GRID[k]
            if 0 < k < len(GRID) - 1:  # parabola through the three points around the grid's minimum
                x0, x1, x2 = GRID[k - 1 : k + 2]
                y0, y1, y2 = losses[k - 1 : k + 2]
                denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
                a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / denom
                bb = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / denom
                if a > 0:
                    m_star = min(max(-bb / (2 * a), x0), x2)
            big_b, small_b = n * b, b
            row = {"step": step, "share": round(step / steps, 3), "lr": current_lr, "m_star": m_star}
            for tag in ("", "_p"):
                s_small, s_big = sums["small" + tag] / sums["steps"], sums["big" + tag] / sums["steps"]
                g2 = (big_b * s_big - small_b * s_small) / (big_b - small_b)
                tr = (s_small - s_big) / (1 / small_b - 1 / big_b)
                noise = tr / g2 if g2 > 0 else math.inf
                row["B_noise" + tag] = noise
                row["estimate" + tag] = current_lr * m_star / (1 + noise / big_b)
            row["best_lr_now"] = best * current_lr / lr
            row["ratio"] = row["estimate"] / row["best_lr_now"]
            row["ratio_p"] = row["estimate_p"] / row["best_lr_now"]
            row["probe"] = [round(x, 4) for x in losses]
            print(json.dumps(row), flush=True)
            anchor = now
            sums = {"small": 0.0, "big": 0.0, "small_p": 0.0, "big_p": 0.0, "steps": 0}


if __name__ == "__main__":
    main()
