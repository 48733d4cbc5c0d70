"""Session 50 (BENCHMARKS.md reading 55): task j's race copies scored on four sets of examples.

One process, 4 blocks a step, a constant LR from the pretrained weights (as a race copy at 4 processes), scored on
the first 32 train blocks (HDETTrainer's probe before session 50: one source file), 32 train blocks spread over the
set (the probe since), 32 validation blocks outside the 400 the benchmark scores, and those 400. Output:
probe_examples_j.txt.

    python benchmarks/controller_probe_spread/probe_examples_j.py 0.001,0.00215,0.00464,0.01 120
"""

import sys
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from code_task import load_code_task  # noqa: E402

from hdet_hf.examples.data import load_default_task  # noqa: E402
from hdet_hf.probe_sample import probe_indices  # noqa: E402


def blocks(dataset, indices) -> torch.Tensor:
    return torch.tensor([dataset[i]["input_ids"] for i in indices])


def score(model, ids: torch.Tensor) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(ids), 50):
            batch = ids[i : i + 50]
            total += model(input_ids=batch, labels=batch).loss.item() * len(batch)
    model.train()
    return total / len(ids)


def main() -> None:
    torch.set_num_threads(1)
    tokenizer, _ = load_default_task(block_size=128, vocab_size=1024)
    data = load_code_task(tokenizer, block_size=128)
    train, validation = data["train"], data["validation"]
    unscored = range(400, len(validation))  # the benchmark scores validation blocks 0-399
    probes = {
        "first32_train": blocks(train, range(32)),
        "spread32_train": blocks(train, probe_indices(len(train), 32)),
        "spread32_val_unscored": blocks(validation, [unscored[i] for i in probe_indices(len(unscored), 32)]),
        "eval400": blocks(validation, range(400)),
    }
    lrs = [float(x) for x in sys.argv[1].split(",")]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    report_at = ({30, 60, 120, 200} & set(range(1, steps + 1))) | {steps}
    generator = torch.Generator().manual_seed(0)
    order = [torch.randint(len(train), (4,), generator=generator).tolist() for _ in range(steps)]
    for lr in lrs:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_pretrained(REPO / "benchmarks" / "pretrained_tiny_lm")
        if lr == lrs[0]:
            print("initial", {k: round(score(model, v), 3) for k, v in probes.items()}, flush=True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
        for step, indices in enumerate(order, 1):
            batch = blocks(train, indices)
            model(input_ids=batch, labels=batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            if step in report_at:
                scores = {k: round(score(model, v), 3) for k, v in probes.items()}
                print(f"lr {lr:<8g} step {step:3d}", scores, flush=True)


if __name__ == "__main__":
    main()
