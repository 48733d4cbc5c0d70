"""README stays true to the code: the flag table is generated from HDETConfig's help text, and the controller's
results table from the recorded benchmark tables."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_flag_table_is_up_to_date():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_flag_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_controller_table_matches_the_recorded_tables(tmp_path):
    script = str(ROOT / "scripts" / "controller_summary.py")
    proc = subprocess.run(
        [sys.executable, script, "--check", str(ROOT / "README.md")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    # The check sees a changed number: one ratio edited in a copy of README.md fails it.
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- controller_summary: begin -->", 1)[1].split(
        "<!-- controller_summary: end -->", 1
    )[0]
    edited = tmp_path / "README.md"
    edited.write_text(readme.replace(block, block.replace("| 1.016 |", "| 1.015 |", 1)))
    proc = subprocess.run([sys.executable, script, "--check", str(edited)], capture_output=True, text=True)
    assert proc.returncode == 1 and "differs" in proc.stderr


def test_controller_summary_reads_a_start_without_ddp(tmp_path):
    """A start whose seeds had no DDP run is written "-" by controller_seeds.py; the summary keeps it as "-"."""
    import shutil

    sys.path.insert(0, str(ROOT / "scripts"))
    import controller_summary

    folder = tmp_path / "tables"
    shutil.copytree(ROOT / "benchmarks" / "controller_default", folder)
    for kind, _ in controller_summary.OVERLAYS:  # the 3x-above cell from a.md itself, under no overlay
        (folder / f"a_{kind}.md").unlink(missing_ok=True)
    table = folder / "a.md"
    lines = table.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("| high ("))
    lines[row] = lines[row].rsplit("|", 2)[0] + "| - |"
    table.write_text("\n".join(lines) + "\n")
    a_row = next(
        line
        for line in controller_summary.summary_table(folder).splitlines()
        if line.startswith("| a: ") and "| 4 |" in line
    )
    assert a_row.endswith(" / - |")


def summary_cells(folder: Path, task: str, processes: int = 4) -> list[str]:
    """The cells of one task's row in the summary made from the tables in ``folder``."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import controller_summary

    line = next(
        line
        for line in controller_summary.summary_table(folder).splitlines()
        if line.startswith(f"| {task}: ") and f"| {processes} |" in line
    )
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_controller_summary_takes_the_3x_above_row_from_a_lowering_table(tmp_path):
    """Where `<table>_lower.md` sits beside a task's table (the race's lowering, session 43), the summary's 3x-above
    cell is that table's; elsewhere the task's own."""
    import shutil

    folder = tmp_path / "tables"
    shutil.copytree(ROOT / "benchmarks" / "controller_default", folder)
    sys.path.insert(0, str(ROOT / "scripts"))
    import controller_summary

    # The task table's own 3x-above cell: no overlay of c's (today's, the later sessions').
    for kind, _ in controller_summary.OVERLAYS:
        (folder / f"c_{kind}.md").unlink(missing_ok=True)

    def c_row() -> list[str]:
        return summary_cells(folder, "c")

    own = c_row()
    high = next(line for line in (folder / "c.md").read_text().splitlines() if line.startswith("| high ("))
    assert own[5] == high.split("|")[-5].split()[0]  # the table's own mean
    cells = high.split("|")
    cells[-5] = " 0.123 (0.004) "
    (folder / "c_lower.md").write_text((folder / "c.md").read_text().replace(high, "|".join(cells)))
    lowered = c_row()
    assert lowered[5] == "0.123" and lowered[:5] == own[:5]  # only the 3x-above cell changes


def test_controller_summary_overlays_replace_their_starts_in_order(tmp_path):
    """The tables beside a task's (`OVERLAYS`): "today" replaces the best-LR and 3x-above cells, "largest" the
    10x-below cell over "race", "lower" the 3x-above cell over "today"; an overlay without a start's row keeps it."""
    import shutil

    folder = tmp_path / "tables"
    shutil.copytree(ROOT / "benchmarks" / "controller_default", folder)
    sys.path.insert(0, str(ROOT / "scripts"))
    import controller_summary

    for kind, _ in controller_summary.OVERLAYS:  # c's later overlays too (probespread, raceprobe: session 50-51)
        (folder / f"c_{kind}.md").unlink(missing_ok=True)
    base = (folder / "c.md").read_text()

    def with_mean(start: str, mean: str, text: str = base) -> str:
        row = next(line for line in text.splitlines() if line.startswith(f"| {start} ("))
        cells = row.split("|")
        cells[-5] = f" {mean} (0.001) "
        return text.replace(row, "|".join(cells))

    def c_row() -> list[str]:
        return summary_cells(folder, "c")

    own = c_row()
    (folder / "c_today.md").write_text(with_mean("high", "0.333", with_mean("best", "0.222")))
    (folder / "c_race.md").write_text(with_mean("low", "0.444"))
    assert c_row()[3:6] == ["0.222", "0.444", "0.333"]
    (folder / "c_largest.md").write_text(with_mean("low", "0.555"))
    (folder / "c_lower.md").write_text(with_mean("high", "0.666"))
    assert c_row()[3:6] == ["0.222", "0.555", "0.666"]
    # A "today" table with no 3x-above row (a start it did not run): the cell stays the lowering table's, and
    # without that the task table's own.
    no_high = "\n".join(line for line in with_mean("best", "0.222").splitlines() if not line.startswith("| high ("))
    (folder / "c_today.md").write_text(no_high)
    assert c_row()[5] == "0.666"
    (folder / "c_lower.md").unlink()
    assert c_row()[5] == own[5]
    # The later overlays win over the earlier ones: "raceprobe" (session 51) over "lower" for the 3x-above cell.
    (folder / "c_lower.md").write_text(with_mean("high", "0.666"))
    (folder / "c_raceprobe.md").write_text(with_mean("high", "0.777"))
    assert c_row()[5] == "0.777"
    # "raceprobe" replaces every start (session 52: the language models re-measured at each one).
    (folder / "c_raceprobe.md").write_text(with_mean("low", "0.888", with_mean("high", "0.777")))
    assert c_row()[3:6] == [own[3], "0.888", "0.777"]


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q" in readme
    assert "python3 -m pytest -q" in ci
    assert "torch==2.13.0" in ci and "torch==2.13.0" in readme


def test_docstring_examples_run():
    """Every ``>>>`` example in the package runs and prints what it says (in a fresh process: examples
    create Accelerate state that must not leak into other tests)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--doctest-modules",
            str(ROOT / "hdet_hf"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


def test_controller_summary_draws_every_row_and_reads_borrowed_seeds(tmp_path):
    """`--plot` draws the table as a picture; a seed's cell marked * (a run borrowed from an equal row) or "-" (no
    run) is read as its value or skipped, not dropped as a whole start."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import controller_summary

    assert controller_summary.per_seed(["best (0.01)", "1.004*", "-", "1.016", "1.010 (0.006)", "", "", ""]) == [
        1.004,
        1.016,
    ]
    out = tmp_path / "summary.png"
    assert controller_summary.main(["--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
