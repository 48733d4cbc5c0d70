"""Write the `--hdet*` flag table into README.md (between the flags markers) from HDETConfig's help text.

Usage: python scripts/make_flag_table.py [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from hdet_hf import HDETConfig, HDETTrainingArguments

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- flags:start -->", "<!-- flags:end -->"


def flag_table() -> str:
    hdet_field = next(f for f in dataclasses.fields(HDETTrainingArguments) if f.name == "hdet")
    rows = [("--hdet", "off", hdet_field.metadata["help"])]
    for f in dataclasses.fields(HDETConfig):
        default = f.default
        if isinstance(default, bool):
            shown = "on" if default else "off"
        else:
            shown = f"`{default}`"
        help_text = f.metadata["help"].replace("%%", "%")
        if "choices" in f.metadata:
            help_text += f" Choices: {', '.join(f'`{c}`' for c in f.metadata['choices'])}."
        rows.append((f"--hdet_{f.name}", shown, help_text))
    lines = ["| flag | default | what it does |", "|---|---|---|"]
    lines += [f"| `{flag}` | {default} | {text.replace('|', '/')} |" for flag, default, text in rows]
    return "\n".join(lines)


def render(readme: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"README.md lacks the {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{flag_table()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is out of date")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = render(current)
    if args.check:
        if current != wanted:
            print(
                "README.md flag table is out of date: run python scripts/make_flag_table.py", file=sys.stderr
            )
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
