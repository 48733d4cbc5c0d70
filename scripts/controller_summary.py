"""The default controller on every task, in one table: the per-task tables of `scripts/controller_seeds.py`,
summarised (means over seeds) for README.md's "What we measured".

Reads the recorded tables in ``benchmarks/controller_default/`` (no runs): for each task and process count the
mean ratio to the sweep's best point from each start, DDP at the wrong starts, and on how many seeds HDET ended
worse than DDP at the same start LR (the do-no-harm target).

    python scripts/controller_summary.py                   # print the table
    python scripts/controller_summary.py --check README.md # exit 1 if README.md's copy differs
    python scripts/controller_summary.py --write README.md # replace README.md's copy
    python scripts/controller_summary.py --plot benchmarks/controller_default/summary.png  # and draw it
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TABLES = Path(__file__).resolve().parent.parent / "benchmarks" / "controller_default"
STARTS = ("best", "low", "high")
# (task, what it is, the 4-process table, the 2-process table): the current default's rows in each. At 4
# processes the 2-replica settings (sessions 26-30) do not act, so session 23's tables are today's default; at 2
# processes the `_cut` tables of session 30 (cuts at half the step; a start with no run of its own there takes the
# previous default's rows, bit-identical where that run never cut: marked * in those tables).
TASKS = (
    ("a", "Llama 156k, 300 steps", "a.md", "a_procs2_cut.md"),
    ("b", "the same, 2,000 steps, AdamW (0.9, 0.95), wd 0.1", "b.md", None),
    ("b'", "the same, 1,000 steps", "bp.md", None),
    ("d", "Llama, 600 steps", "d.md", "d_procs2_cut.md"),
    ("e", "Llama, 450 steps", "e.md", "e_procs2_cut.md"),
    ("f", "Llama, 400 steps", "f.md", "f_procs2_cut.md"),
    ("h", "GPT-2 from scratch, 500 steps", "h.md", "h_procs2_cut.md"),
    ("c", "pretrained MiniLM classifier, 200 steps", "c.md", "c_procs2_cut.md"),
    ("g", "the same classifier, 120 steps", "g.md", "g_procs2_cut.md"),
    ("i", "LoRA on the classifier, 200 steps", "i.md", "i_procs2_cut.md"),
    # Held out in session 49 (today's default, every cell its own run): a pretrained tiny Llama fine-tuned on code,
    # all weights (j) and a LoRA adapter (k).
    ("j", "pretrained Llama fine-tuned on code, 200 steps", "j.md", "j_procs2.md"),
    ("k", "LoRA r 8 on task j, 200 steps", "k.md", None),
)
# Tables beside each table above that replace some of its cells, in order (a later one wins), where they exist:
# `<stem>_<kind>.md` (a.md -> a_race.md, a_procs2_cut.md -> a_procs2_race.md). A race that neither raises nor lowers
# leaves a run the default's bit for bit, so each kind replaces only the starts where its change acts.
# - "today" (session 44, `today_tables.sh`): the best LR and 3x above with today's library (the tables above come
#   from older libraries there).
# - "race" (session 42, `race_tables.sh`): the start race (`--hdet_start_race_steps` unset: 60 steps) from 10x
#   below; at the best LR and from 3x above it raised on none of the seeds (controller_start_race/decisions.md).
# - "largest" (session 44, `largest_tables.sh`): the race raises to the largest candidate that beat the start
#   (`--hdet_start_race_raise_to` unset), which changes only races that raise: from 10x below.
# - "lower" (session 43, `lower_tables.sh`): the race also lowers (`--hdet_start_race_lowers` unset); it fired only on
#   the classifiers from 3x above (controller_start_race/lower_default.md).
# - "twosteps" (session 46, `twosteps_tables.sh`): the race also raises on a falling trend over two steps up
#   (`--hdet_start_race_raise_on` unset); from 10x below it changed one recorded race (task a seed 3, 4 processes).
# - "probespread" (session 50, `benchmarks/controller_probe_spread/`): the probe's examples spread over the data
#   (`--hdet_probe_sampling` unset) and the lowering's 3x progress ratio; it changes every run, so it replaces every
#   start of the tasks re-measured on 3 seeds (j, j at 2 processes, k; session 51: c, g, i at 4 processes).
# - "lostground" (session 51, `benchmarks/controller_race_lost_ground/`): the race also lowers a start whose copy ended
#   above the initial weights' probe loss when the copy below beats it; on the spread probe that happened only from
#   3x above (j at 4 processes, k), so it replaces those starts.
# - "raceprobe" (session 51, same folder): the race scores on 128 examples (`--hdet_start_race_probe_size` unset);
#   from 3x above on the classifiers (4 processes) its own runs where its race decided otherwise, the 32-example
#   race's runs (marked *) where it decided the same. Session 52 (`benchmarks/controller_today_s52/`): the language
#   models a, d, e, f, h at 4 processes, every start, 3 seeds (seed 0: the 32-example race's runs, marked *, where the
#   128-example race decided the same); the classifiers' best-LR and 10x-below cells there are their probespread ones.
#   Session 53 (`benchmarks/controller_today_s53/`): the same language models at 2 processes and b' at 4, every start,
#   3 seeds, each cell its own run (`<task>_procs2_raceprobe.md`, `bp_raceprobe.md`).
#   Session 54 (`benchmarks/controller_today_s54/`): b at 4 processes and the classifier c at 2, the same way
#   (`b_raceprobe.md`; c at 2 processes: its seed 0's best-LR row). Session 55 (`benchmarks/controller_today_s55/`):
#   the classifiers c, g and i at 2 processes (`<task>_procs2_raceprobe.md`), so every summary row is today's default.
# - "split" (session 56, `benchmarks/controller_race_split/`): the race's candidates on half the global batch, the
#   start and the copy below it on a quarter (the defaults since). Its decisions differ from the "raceprobe" races'
#   only at 4 processes from 10x below on a, e and f seed 0 and e seed 1 (raised as on half) and at 2 processes from
#   3x above on c seed 0 and i seeds 0-1 (lowered as on a quarter), and in stall ceilings no run reached
#   (`derive.txt`); those tables take the recorded runs whose race decided as the split does.
OVERLAYS = (
    ("today", ("best", "high")),
    ("race", ("low",)),
    ("largest", ("low",)),
    ("twosteps", ("low",)),
    ("lower", ("high",)),
    ("probespread", ("best", "low", "high")),
    ("lostground", ("high",)),
    ("raceprobe", ("best", "low", "high")),
    ("split", ("best", "low", "high")),
)


def race_table(name: str, kind: str = "race") -> str:
    """A table beside a default table (see `OVERLAYS`): ``a.md`` -> ``a_race.md``, ``a_procs2_cut.md`` ->
    ``a_procs2_race.md`` (``kind`` "lower": ``a_lower.md``, ``a_procs2_lower.md``)."""
    stem = name.removesuffix(".md").removesuffix("_cut")
    return f"{stem}_{kind}.md"


BEGIN, END = "<!-- controller_summary: begin -->", "<!-- controller_summary: end -->"


def start_cells(table: Path, starts: tuple[str, ...] = STARTS) -> dict[str, list[str]]:
    """The first table's row of each start: ``[start, per-seed ratios..., mean (sd), DDP per seed, DDP mean,
    worse than that DDP]`` (the layout `controller_seeds.py` writes)."""
    rows: dict[str, list[str]] = {}
    for line in table.read_text().splitlines():
        match = re.match(r"\| (best|low|high) \(", line)
        if match and match.group(1) not in rows:
            rows[match.group(1)] = [cell.strip() for cell in line.strip().strip("|").split("|")]
    missing = [s for s in starts if s not in rows]
    if missing:
        raise SystemExit(f"controller_summary.py: {table} has no row for {', '.join(missing)}")
    return rows


def task_rows(folder: Path = TABLES) -> list[tuple[str, str, int, dict[str, list[str]]]]:
    """``(task, what it is, processes, cells of each start)`` per summary row, overlays applied."""
    rows = []
    for key, what, *files in TASKS:
        for processes, name in zip((4, 2), files):
            if name is None:
                continue
            cells = start_cells(folder / name)
            for kind, starts in OVERLAYS:
                if (folder / race_table(name, kind)).exists():
                    # A start the overlay has no run for (e.g. no 3x-above rows of a task) keeps the cell it had.
                    overlay = start_cells(folder / race_table(name, kind), ())
                    cells.update({start: overlay[start] for start in starts if start in overlay})
            rows.append((key, what, processes, cells))
    return rows


def summary_table(folder: Path = TABLES) -> str:
    """The markdown table (one row per task and process count)."""
    lines = [
        "| task | processes | seeds | best LR | 10x below | 3x above | DDP 10x below / 3x above "
        "| worse than DDP at that LR (best / below / above) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, what, processes, cells in task_rows(folder):
        seeds = "/".join(str(sum(c not in ("-", "") for c in cells[s][1:-4])) for s in STARTS)
        means = [cells[s][-4].split(" ")[0] for s in STARTS]
        ddp = [cells[s][-2].split(" ")[0] for s in ("low", "high")]
        # "k of n", or "-" where no seed had DDP at that start (controller_seeds.py writes it so).
        worse = " / ".join(cells[s][-1].replace(" of ", "/") for s in STARTS)
        lines.append(
            f"| {key}: {what} | {processes} | {seeds} | {' | '.join(means)} | {' / '.join(ddp)} | {worse} |"
        )
    return "\n".join(lines)


def per_seed(cells: list[str]) -> list[float]:
    """The per-seed ratios of one start's cells (``-`` where a seed has no run; ``*`` marks a borrowed run)."""
    return [float(c.rstrip("*")) for c in cells[1:-4] if c not in ("-", "")]


def plot_summary(path: Path, folder: Path = TABLES, right: float = 1.2) -> None:
    """One panel per start: each task's seeds (dots), their mean (bar) and DDP at that start LR (cross), against the
    targets (shaded). Ratios above ``right`` sit at the panel's edge with their value, so that a point's difference
    near 1 stays visible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = task_rows(folder)
    titles = {"best": "at the best LR", "low": "from 10x below", "high": "from 3x above"}
    targets = {"best": 1.005, "low": 1.01, "high": 1.01}
    left = 0.88
    fig, axes = plt.subplots(1, 3, figsize=(14, 0.32 * len(rows) + 1.8), sharey=True)

    def clipped(ax, x: float, y: float, label_at: int | None = None, **style) -> None:
        """A marker at min(x, right); past the edge, its value beside it (``label_at``: points above the row)."""
        ax.scatter([min(x, right)], [y], clip_on=False, **style)
        if x > right and label_at is not None:
            ax.annotate(f"{x:.2f}", (right, y), xytext=(5, label_at), textcoords="offset points", fontsize=7,
                        color=style.get("color"), annotation_clip=False)  # fmt: skip

    for ax, start in zip(axes, STARTS):
        ax.axvspan(left, targets[start], color="tab:green", alpha=0.12)
        ax.axvline(1.0, color="grey", lw=0.8)
        for y, (_, _, _, cells) in enumerate(rows):
            for ratio in per_seed(cells[start]):
                clipped(ax, ratio, y, s=12, color="tab:blue", alpha=0.45, zorder=2)
            clipped(ax, float(cells[start][-4].split(" ")[0]), y, label_at=1, marker="|", s=220, lw=2.5,
                    color="tab:blue", zorder=3)  # fmt: skip
            ddp = cells[start][-2].split(" ")[0]
            if start != "best" and ddp not in ("-", ""):
                clipped(ax, float(ddp), y, label_at=-8, marker="x", s=30, color="tab:red", zorder=3)
        ax.set_xlim(left, right)
        ax.set_title(titles[start])
        ax.set_xlabel("final eval loss / the sweep's best point")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)), [f"{key} ({processes} processes)" for key, _, processes, _ in rows])
    axes[0].invert_yaxis()
    handles = [
        plt.Line2D([], [], ls="", marker="o", color="tab:blue", alpha=0.45, label="HDET, one seed"),
        plt.Line2D([], [], ls="", marker="|", ms=14, mew=2.5, color="tab:blue", label="HDET, mean over seeds"),
        plt.Line2D([], [], ls="", marker="x", color="tab:red", label="DDP at that start LR, mean"),
        matplotlib.patches.Patch(color="tab:green", alpha=0.12, label="target"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False)
    fig.suptitle(f"The default controller on every task (README's table; values above {right} at the edge, a mean's or DDP's with its value)")
    fig.tight_layout(rect=(0, 0.05, 0.98, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", type=Path, default=None,
        help=f"A markdown file whose table between {BEGIN} and {END} must equal this one (exit 1 if not).",
    )  # fmt: skip
    parser.add_argument(
        "--write",
        type=Path,
        default=None,
        help=f"Replace the table between {BEGIN} and {END} in this markdown file.",
    )
    parser.add_argument(
        "--plot", type=Path, default=None,
        help="Also draw the table as a picture (per-seed ratios, means, DDP at each start LR) to this PNG.",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.plot is not None:
        plot_summary(args.plot)
    table = summary_table()
    target = args.check or args.write
    if target is None:
        print(table)
        return 0
    text = target.read_text()
    if BEGIN not in text or END not in text:
        print(f"{target} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    before, rest = text.split(BEGIN, 1)
    current, after = rest.split(END, 1)
    if args.write is not None:
        args.write.write_text(f"{before}{BEGIN}\n{table}\n{END}{after}")
        return 0
    current = current.strip()
    if current != table:
        print(
            f"{args.check}'s controller table differs from the recorded tables: run "
            f"`python scripts/controller_summary.py --write {args.check}`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
