"""A stock script that parses its own flags with argparse and builds TrainingArguments(...) in code.

With --ignore_unknown it ignores flags it does not know and builds a Trainer, which would train without HDET.
"""

import argparse

from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--ignore_unknown", action="store_true")
    options, _ = parser.parse_known_args()
    if not options.ignore_unknown:
        options = parser.parse_args()
    args = TrainingArguments(output_dir=options.output_dir, report_to="none", use_cpu=True)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    )
    trainer = Trainer(model=model, args=args)
    print("built", type(trainer).__name__)
