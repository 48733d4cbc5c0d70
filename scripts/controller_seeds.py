"""One setting on several seeds, next to DDP: the issue-10 table of a task, computed from recorded results.

Each folder is one seed of one task, written by `scripts/benchmark_quality.py` (``results.jsonl``). For the
HDET rows ``<rows>_best``, ``<rows>_low`` and ``<rows>_high`` of every folder, the eval loss as a ratio to
that folder's DDP at the best LR, the mean and standard deviation over the folders, DDP at the row's own start
LR (the do-no-harm check), and on how many seeds HDET ended worse than that DDP run. Ratios are per seed:
each seed's HDET run against the same seed's DDP runs, so seed-to-seed differences of the data order and the
initialisation cancel. With ``--against`` another setting's rows are compared seed by seed (paired differences).
Rows recorded apart from a seed's folder (a scratch copy's results, e.g. the start race's
``benchmarks/controller_start_race/results/<task><seed>.jsonl``) join it with ``--rows_from``, one file per folder:
their HDET rows are added, the folder's own DDP rows stay the denominators.

A setting that changed only some starts leaves the others where an older setting's rows already are (the line
search's later rules were bit-identical at the best LR and from 3x above, BENCHMARKS.md readings 24-25). With
``--same_as PREFIX:best,high`` (repeatable, tried in order) a cell with no ``--rows`` row of its own takes that
older row; the table marks it with ``*`` and names the rows it came from.

    python scripts/controller_seeds.py benchmarks/controller_docstrings benchmarks/controller_docstrings_seed1 \
        benchmarks/controller_docstrings_seed2 --best_lr 0.0003 --rows shared_both_T3pct_until0.5_hz0.1_min0.3
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hdet_hf.testing.benchmarks import read_results  # noqa: E402

STARTS = ("best", "low", "high")


def ddp_at(rows: Sequence[dict[str, Any]], lr: float) -> dict[str, Any] | None:
    """The DDP row of a folder started at ``lr`` (relative tolerance: LRs are recorded as floats)."""
    for row in rows:
        if row.get("kind") == "ddp" and math.isclose(row["start_lr"], lr, rel_tol=1e-6):
            return row
    return None


def parse_same_as(spec: str) -> tuple[str, tuple[str, ...]]:
    """``PREFIX:best,high`` -> (PREFIX, ("best", "high")); without ``:STARTS`` every start."""
    prefix, _, starts = spec.rpartition(":") if ":" in spec else (spec, "", "")
    chosen = tuple(s.strip() for s in starts.split(",") if s.strip()) or STARTS
    unknown = [s for s in chosen if s not in STARTS]
    if not prefix or unknown:
        raise ValueError(f"--same_as {spec!r}: expected PREFIX or PREFIX:STARTS with STARTS from {STARTS}")
    return prefix, chosen


def folder_rows(folder: Path, extra: Path | Sequence[Path] | None = None) -> list[dict[str, Any]]:
    """A folder's recorded rows, plus the HDET rows of ``extra`` (one or more results.jsonl kept elsewhere; an
    earlier file wins a name) whose names the folder does not have: the folder's DDP rows, and its own rows of a
    name, win."""
    rows = read_results(folder / "results.jsonl")
    names = {r["name"] for r in rows}
    files = [] if extra is None else [extra] if isinstance(extra, Path) else list(extra)
    for file in files:
        more = [r for r in read_results(file) if r.get("kind") != "ddp" and r["name"] not in names]
        rows += more
        names |= {r["name"] for r in more}
    return rows


def seed_table(
    folders: Sequence[Path],
    best_lr: float,
    prefix: str,
    same_as: Sequence[tuple[str, Sequence[str]]] = (),
    rows_from: Sequence[Path | Sequence[Path] | None] | None = None,
) -> list[dict[str, Any]]:
    """Per start: each folder's HDET ratio, DDP-at-start ratio and accuracy (None where a row is missing), and
    ``source``: None for a row of ``prefix`` itself, else the ``same_as`` prefix the cell was taken from.
    ``rows_from``: per folder, a results.jsonl whose HDET rows join it (None: none)."""
    table = []
    extras = list(rows_from) if rows_from is not None else [None] * len(folders)
    by_folder = [folder_rows(folder, extra) for folder, extra in zip(folders, extras, strict=True)]
    for start in STARTS:
        entry: dict[str, Any] = {
            "start": start,
            "hdet": [],
            "ddp": [],
            "accuracy": [],
            "start_lr": None,
            "source": [],
        }
        for rows in by_folder:
            best = ddp_at(rows, best_lr)
            # `read_results` keeps one record per name; the first candidate prefix with a row here wins.
            by_name = {r["name"]: r for r in rows}
            candidates = [prefix, *(p for p, starts in same_as if start in starts)]
            source = next((p for p in candidates if f"{p}_{start}" in by_name), None)
            hdet = by_name[f"{source}_{start}"] if source else None
            if best is None or hdet is None:
                entry["hdet"].append(None)
                entry["ddp"].append(None)
                entry["accuracy"].append(None)
                entry["source"].append(None)
                continue
            entry["start_lr"] = hdet["start_lr"]
            at_start = ddp_at(rows, hdet["start_lr"])
            entry["hdet"].append(hdet["eval_loss"] / best["eval_loss"])
            entry["ddp"].append(at_start["eval_loss"] / best["eval_loss"] if at_start else None)
            entry["accuracy"].append(hdet.get("eval_accuracy"))
            entry["source"].append(None if source == prefix else source)
        table.append(entry)
    return table


def _mean_sd(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    if len(known) == 1:
        return f"{known[0]:.3f}"
    return f"{statistics.fmean(known):.3f} ({statistics.stdev(known):.3f})"


def markdown(
    table: Sequence[dict[str, Any]], folders: Sequence[Path], best_losses: Sequence[float | None]
) -> str:
    names = [f.name for f in folders]
    head = ["start", *names, "mean (sd)", "DDP at the start LR: per seed", "mean", "worse than that DDP"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    best_cells = [f"{b:.4f}" if b is not None else "-" for b in best_losses]
    known = [b for b in best_losses if b is not None]
    spread = f"{statistics.fmean(known):.4f}" + (
        f" ({statistics.stdev(known):.4f})" if len(known) > 1 else ""
    )
    lines.append("| DDP at the best LR (eval loss) | " + " | ".join(best_cells) + f" | {spread} | | | |")
    for entry in table:
        cells = [
            (f"{v:.3f}" + ("*" if source else "")) if v is not None else "-"
            for v, source in zip(entry["hdet"], entry["source"])
        ]
        ddp_cells = " / ".join(f"{v:.3f}" if v is not None else "-" for v in entry["ddp"])
        pairs = [(h, d) for h, d in zip(entry["hdet"], entry["ddp"]) if h is not None and d is not None]
        worse = f"{sum(h > d for h, d in pairs)} of {len(pairs)}" if pairs else "-"
        label = (
            f"{entry['start']} ({entry['start_lr']:g})" if entry["start_lr"] is not None else entry["start"]
        )
        lines.append(
            f"| {label} | " + " | ".join(cells) + f" | {_mean_sd(entry['hdet'])} | {ddp_cells} | "
            f"{_mean_sd(entry['ddp'])} | {worse} |"
        )
    accuracies = [(e["start"], e["accuracy"]) for e in table if any(a is not None for a in e["accuracy"])]
    text = "\n".join(lines) + "\n"
    borrowed = sorted({s for e in table for s in e["source"] if s})
    if borrowed:
        text += "\n\\* taken from " + ", ".join(f"`{s}`" for s in borrowed) + " (`--same_as`).\n"
    if accuracies:
        text += (
            "\nAccuracy: "
            + "; ".join(
                f"{start} " + " / ".join(f"{a:.3f}" if a is not None else "-" for a in acc)
                for start, acc in accuracies
            )
            + "\n"
        )
    return text


def paired_table(
    table: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]], target_points: float = 1.0
) -> list[dict[str, Any]]:
    """Per start: ``rows`` minus ``reference`` on the seeds that have both, in points (ratio x 100).

    Also the seeds a difference of ``target_points`` needs to lie two standard errors from zero with this
    spread, ``(2 sd / target)^2``: what a setting's comparison on these tasks can and cannot resolve.
    """
    out = []
    for entry, ref in zip(table, reference):
        diffs = [100 * (h - r) for h, r in zip(entry["hdet"], ref["hdet"]) if h is not None and r is not None]
        sd = statistics.stdev(diffs) if len(diffs) > 1 else None
        out.append(
            {
                "start": entry["start"],
                "diffs": diffs,
                "mean": statistics.fmean(diffs) if diffs else None,
                "sd": sd,
                "seeds_for_target": math.ceil((2 * sd / target_points) ** 2) if sd else None,
            }
        )
    return out


def paired_markdown(paired: Sequence[dict[str, Any]], rows: str, against: str, target_points: float) -> str:
    lines = [
        f"\n`{rows}` minus `{against}`, points (ratio x 100), per seed with both rows:\n",
        f"| start | per seed | mean | sd | seeds for {target_points:g} point at 2 se |",
        "|---|---|---|---|---|",
    ]
    for entry in paired:
        if not entry["diffs"]:
            lines.append(f"| {entry['start']} | - | - | - | - |")
            continue
        per_seed = " / ".join(f"{d:+.1f}" for d in entry["diffs"])
        sd = f"{entry['sd']:.1f}" if entry["sd"] is not None else "-"
        need = str(entry["seeds_for_target"]) if entry["seeds_for_target"] is not None else "-"
        lines.append(f"| {entry['start']} | {per_seed} | {entry['mean']:+.1f} | {sd} | {need} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="benchmark_quality.py output folders, one per seed")
    p.add_argument(
        "--best_lr", type=float, required=True, help="The sweep's best LR: every ratio's denominator"
    )
    p.add_argument("--rows", required=True, help="The HDET rows' name without _best / _low / _high")
    p.add_argument(
        "--against",
        default=None,
        help="Another setting's row prefix: also print the per-seed differences rows - against, their mean and sd, "
        "and how many seeds a difference of --target_points would need",
    )
    p.add_argument(
        "--same_as",
        action="append",
        default=[],
        metavar="PREFIX[:STARTS]",
        help="An older setting's row prefix whose rows stand for --rows at these starts (comma-separated from best, "
        "low, high; default all) where --rows has no row of its own; repeatable, tried in order; such cells are "
        "marked *",
    )
    p.add_argument(
        "--rows_from",
        nargs="+",
        default=None,
        metavar="JSONL",
        help="One results.jsonl per folder (the same order; '-' for none; several joined by commas, an earlier "
        "file winning a name) whose HDET rows join that folder's: rows recorded apart from it, e.g. in a scratch "
        "copy. The folder's DDP rows stay the denominators",
    )
    p.add_argument(
        "--target_points",
        type=float,
        default=1.0,
        help="The difference (ratio points) --against sizes seeds for",
    )
    p.add_argument("--out", type=Path, default=None, help="Also write the table to this markdown file")
    args = p.parse_args(argv)
    for folder in args.dirs:
        if not (folder / "results.jsonl").is_file():
            p.error(
                f"{folder / 'results.jsonl'} does not exist: pass folders written by scripts/benchmark_quality.py"
            )
    rows_from = None
    if args.rows_from is not None:
        if len(args.rows_from) != len(args.dirs):
            p.error(
                f"--rows_from takes one file per folder ('-' for none): {len(args.dirs)} folders, "
                f"{len(args.rows_from)} files"
            )
        rows_from = [None if name == "-" else [Path(part) for part in name.split(",")] for name in args.rows_from]
        missing = [str(f) for files in rows_from if files is not None for f in files if not f.is_file()]
        if missing:
            p.error(f"--rows_from: no such file {', '.join(missing)}")
    bests = [ddp_at(read_results(f / "results.jsonl"), args.best_lr) for f in args.dirs]
    missing = [str(f) for f, b in zip(args.dirs, bests) if b is None]
    if missing:
        p.error(f"no DDP row at --best_lr {args.best_lr:g} in {', '.join(missing)}")
    try:
        same_as = [parse_same_as(spec) for spec in args.same_as]
    except ValueError as error:
        p.error(str(error))
    table = seed_table(args.dirs, args.best_lr, args.rows, same_as, rows_from)
    if all(v is None for entry in table for v in entry["hdet"]):
        p.error(f"no rows named {args.rows}_best / _low / _high in these folders")
    text = markdown(table, args.dirs, [b["eval_loss"] for b in bests])
    if args.against:
        reference = seed_table(args.dirs, args.best_lr, args.against, rows_from=rows_from)
        if all(v is None for entry in reference for v in entry["hdet"]):
            p.error(f"no rows named {args.against}_best / _low / _high in these folders")
        paired = paired_table(table, reference, args.target_points)
        text += paired_markdown(paired, args.rows, args.against, args.target_points)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return text


if __name__ == "__main__":
    main()
