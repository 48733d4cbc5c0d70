"""A stock script with its own loop and no transformers.Trainer; with --hdet the launcher must refuse it."""

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser, TrainingArguments


@dataclass
class ScriptArguments:
    steps: int = field(default=1, metadata={"help": "Steps of the (empty) custom loop."})


if __name__ == "__main__":
    script_args, training_args = HfArgumentParser(
        (ScriptArguments, TrainingArguments)
    ).parse_args_into_dataclasses()
    for _ in range(script_args.steps):
        pass  # a custom training loop would run here
    print(f"custom loop done with {type(training_args).__name__}; sys.path[0]={sys.path[0]}")
