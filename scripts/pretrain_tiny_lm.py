#!/usr/bin/env python
"""Pre-train the tiny Llama that task j (``scripts/code_task.py``) fine-tunes: plain `Trainer`, one process, offline.

    python scripts/pretrain_tiny_lm.py --out benchmarks/pretrained_tiny_lm   # ~2 min on a 2-core CPU

The model (hidden 96, 3 layers, intermediate 256, the docstring task's 1,024-token BPE) trains on the standard
library's docstrings for ``--steps`` steps at 4 x 4 blocks, AdamW (0.9, 0.95), weight decay 0.1, cosine with 10 %
warm-up, peak LR 0.01 (task e's best LR for this size, a 450-step sweep). The run is deterministic for a given
seed and library version; the benchmark records the folder it loaded and the model's eval loss on docstrings.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

SIZES = {"hidden_size": 96, "num_hidden_layers": 3, "intermediate_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Folder to save the model to (save_pretrained).")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    import transformers

    from hdet_hf.examples.data import build_default_model, load_default_task

    tokenizer, lm = load_default_task(block_size=128, vocab_size=1024)
    transformers.set_seed(args.seed)
    model = build_default_model(tokenizer, **SIZES)
    targs = transformers.TrainingArguments(
        output_dir=str(Path(args.out) / "run"),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=100,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=args.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=args.steps // 10,
        adam_beta2=0.95,
        weight_decay=0.1,
        seed=args.seed,
    )
    trainer = transformers.Trainer(model=model, args=targs, train_dataset=lm["train"])
    trainer.train()
    metrics = trainer.evaluate(eval_dataset=lm["validation"])
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    record = {"docstring_eval_loss": metrics["eval_loss"], **vars(args), **SIZES}
    Path(args.out, "pretraining.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
