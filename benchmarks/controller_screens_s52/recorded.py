"""Every row of every recorded benchmark results file (`benchmarks/**/*.jsonl`), with the file it came from."""

import glob
import json
from collections.abc import Iterator


def recorded_rows() -> Iterator[tuple[str, dict]]:
    for path in sorted(glob.glob("benchmarks/**/*.jsonl", recursive=True)):
        for line in open(path):
            try:
                yield path, json.loads(line)
            except json.JSONDecodeError:
                continue
