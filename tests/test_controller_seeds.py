"""scripts/controller_seeds.py: one setting on several seeds against each seed's own DDP runs."""

import json
import sys
from pathlib import Path

import pytest

SCRIPT_DIR = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPT_DIR))
import controller_seeds  # noqa: E402

PREFIX = "shared_x"


def write_seed(folder: Path, ddp: dict[float, float], hdet: dict[str, tuple[float, float]]) -> Path:
    """A results.jsonl with DDP rows {lr: eval loss} and HDET rows {start: (start lr, eval loss)}."""
    folder.mkdir(parents=True)
    rows = [
        {"name": f"ddp_lr{lr:g}", "kind": "ddp", "start_lr": lr, "eval_loss": loss}
        for lr, loss in ddp.items()
    ]
    rows += [
        {"name": f"{PREFIX}_{start}", "kind": "hdet", "start_lr": lr, "eval_loss": loss, "eval_accuracy": 0.5}
        for start, (lr, loss) in hdet.items()
    ]
    # A stale earlier record of one HDET row: the last record of a name wins, as in benchmark_quality.
    stale = {"name": f"{PREFIX}_best", "kind": "hdet", "start_lr": 0.01, "eval_loss": 99.0}
    (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in [stale, *rows]) + "\n")
    return folder


def test_ratios_are_per_seed_with_mean_sd_and_the_do_no_harm_count(tmp_path, capsys):
    one = write_seed(
        tmp_path / "seed0",
        {0.01: 4.0, 0.001: 5.0, 0.03: 4.4},
        {"best": (0.01, 4.04), "low": (0.001, 4.2), "high": (0.03, 4.2)},
    )
    two = write_seed(
        tmp_path / "seed1",
        {0.01: 2.0, 0.001: 3.0, 0.03: 2.1},
        {"best": (0.01, 1.98), "low": (0.001, 2.1), "high": (0.03, 2.2)},
    )
    table = {e["start"]: e for e in controller_seeds.seed_table([one, two], 0.01, PREFIX)}
    assert table["best"]["hdet"] == pytest.approx([1.01, 0.99])
    assert table["low"]["hdet"] == pytest.approx([1.05, 1.05]) and table["low"]["ddp"] == pytest.approx(
        [1.25, 1.5]
    )
    assert table["high"]["ddp"] == pytest.approx([1.1, 1.05])
    text = controller_seeds.main([str(one), str(two), "--best_lr", "0.01", "--rows", PREFIX])
    assert capsys.readouterr().out == text
    lines = {line.split(" |")[0].strip("| "): line for line in text.splitlines()}
    # high: seed 0 1.050 < DDP 1.100, seed 1 1.100 > DDP 1.050 -> worse on 1 of 2; mean 1.075, sd 0.035
    assert "| 1.050 | 1.100 | 1.075 (0.035) | 1.100 / 1.050 |" in lines["high (0.03)"]
    assert lines["high (0.03)"].endswith("| 1 of 2 |")
    assert lines["low (0.001)"].endswith("| 0 of 2 |")
    assert "| 4.0000 | 2.0000 | 3.0000 (1.4142) |" in lines["DDP at the best LR (eval loss)"]


def test_a_missing_row_shows_as_a_dash_and_bad_folders_are_refused(tmp_path, capsys):
    one = write_seed(tmp_path / "seed0", {0.01: 4.0}, {"best": (0.01, 4.0)})
    text = controller_seeds.main([str(one), "--best_lr", "0.01", "--rows", PREFIX])
    assert "| low | - | - |" in text
    with pytest.raises(SystemExit):
        controller_seeds.main([str(one), "--best_lr", "0.02", "--rows", PREFIX])
    assert "no DDP row at --best_lr 0.02" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        controller_seeds.main([str(one), "--best_lr", "0.01", "--rows", "no_such_rows"])
    assert "no rows named no_such_rows_best" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        controller_seeds.main([str(tmp_path / "nowhere"), "--best_lr", "0.01", "--rows", PREFIX])
    assert "does not exist" in capsys.readouterr().err


def test_against_pairs_two_settings_seed_by_seed(tmp_path):
    seeds = []
    for i, (mine, theirs) in enumerate([(4.04, 4.00), (4.00, 4.08), (4.12, 4.04)]):
        folder = write_seed(tmp_path / f"seed{i}", {0.01: 4.0}, {"best": (0.01, mine)})
        rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
        rows.append({"name": "shared_y_best", "kind": "hdet", "start_lr": 0.01, "eval_loss": theirs})
        (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        seeds.append(folder)
    # Differences +1, -2, +2 points: mean 0.33, sd 2.08 -> (2 * 2.08 / 1)^2 = 17.3 -> 18 seeds.
    text = controller_seeds.main(
        [*map(str, seeds), "--best_lr", "0.01", "--rows", PREFIX, "--against", "shared_y"]
    )
    line = next(row for row in text.splitlines() if row.startswith("| best | +"))
    assert line == "| best | +1.0 / -2.0 / +2.0 | +0.3 | 2.1 | 18 |"
    assert "| low | - | - | - | - |" in text
    with pytest.raises(SystemExit):
        controller_seeds.main(
            [*map(str, seeds), "--best_lr", "0.01", "--rows", PREFIX, "--against", "nothing"]
        )


def test_same_as_fills_only_missing_cells_at_its_starts_and_marks_them(tmp_path, capsys):
    """``--same_as OLD:best,high``: a start with no row of --rows takes OLD's row there (marked *); a start not
    listed stays empty, and a row of --rows itself always wins over OLD's."""
    folder = write_seed(
        tmp_path / "seed0", {0.01: 4.0, 0.001: 5.0, 0.03: 4.4}, {"low": (0.001, 4.2)}
    )  # --rows has only its low row (and the stale best record)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["eval_loss"] != 99.0]  # drop the stale record: --rows has no best row
    rows += [
        {"name": f"old_{start}", "kind": "hdet", "start_lr": lr, "eval_loss": loss}
        for start, lr, loss in (("best", 0.01, 4.08), ("low", 0.001, 8.0), ("high", 0.03, 4.4))
    ]
    (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    table = {
        e["start"]: e for e in controller_seeds.seed_table([folder], 0.01, PREFIX, [("old", ("best", "low"))])
    }
    assert table["best"]["hdet"] == pytest.approx([1.02]) and table["best"]["source"] == ["old"]
    assert table["low"]["hdet"] == pytest.approx([1.05]) and table["low"]["source"] == [
        None
    ]  # its own row wins
    assert table["high"]["hdet"] == [None]  # "old" does not stand for high
    text = controller_seeds.main(
        [str(folder), "--best_lr", "0.01", "--rows", PREFIX, "--same_as", "old:best,low"]
    )
    capsys.readouterr()
    assert "| 1.020* |" in text and "\\* taken from `old` (`--same_as`)." in text
    with pytest.raises(SystemExit):
        controller_seeds.main([str(folder), "--best_lr", "0.01", "--rows", PREFIX, "--same_as", "old:middle"])
    assert "--same_as 'old:middle'" in capsys.readouterr().err


def test_rows_from_adds_rows_recorded_apart_and_keeps_the_folders_ddp(tmp_path, capsys):
    one = write_seed(tmp_path / "seed0", {0.01: 4.0, 0.001: 5.0}, {"low": (0.001, 4.4)})
    two = write_seed(tmp_path / "seed1", {0.01: 2.0, 0.001: 3.0}, {"low": (0.001, 2.2)})
    # A scratch copy of seed 0: its DDP rows differ (they must not replace the folder's), one row of its own, and
    # a row the folder already has (the folder's wins).
    scratch = tmp_path / "scratch0.jsonl"
    scratch.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"name": "ddp_lr0.01", "kind": "ddp", "start_lr": 0.01, "eval_loss": 8.0},
                {"name": "race_low", "kind": "hdet", "start_lr": 0.001, "eval_loss": 4.2},
                {"name": f"{PREFIX}_low", "kind": "hdet", "start_lr": 0.001, "eval_loss": 9.9},
            ]
        )
        + "\n"
    )
    table = {
        e["start"]: e
        for e in controller_seeds.seed_table([one, two], 0.01, "race", rows_from=[scratch, None])
    }
    assert table["low"]["hdet"] == [pytest.approx(1.05), None] and table["low"]["ddp"][0] == pytest.approx(
        1.25
    )
    mine = {e["start"]: e for e in controller_seeds.seed_table([one], 0.01, PREFIX, rows_from=[scratch])}
    assert mine["low"]["hdet"] == [pytest.approx(1.1)]
    text = controller_seeds.main(
        [str(one), str(two), "--best_lr", "0.01", "--rows", "race", "--rows_from", str(scratch), "-"]
    )
    assert "| low (0.001) | 1.050 | - | 1.050 |" in text
    with pytest.raises(SystemExit):
        controller_seeds.main(
            [str(one), str(two), "--best_lr", "0.01", "--rows", "race", "--rows_from", str(scratch)]
        )
    assert "one file per folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        controller_seeds.main(
            [str(one), "--best_lr", "0.01", "--rows", "race", "--rows_from", str(tmp_path / "no")]
        )
    assert "no such file" in capsys.readouterr().err


def test_rows_from_joins_several_files_per_folder_the_earlier_winning_a_name(tmp_path, capsys):
    one = write_seed(tmp_path / "seed0", {0.01: 4.0, 0.001: 5.0}, {})
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows = {
        first: [("new_low", 0.001, 4.2)],
        second: [("new_low", 0.001, 9.9), ("old_high", 0.03, 4.4)],  # the first file's new_low wins
    }
    for path, entries in rows.items():
        lines = [{"name": name, "kind": "hdet", "start_lr": lr, "eval_loss": loss} for name, lr, loss in entries]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    table = {
        e["start"]: e
        for e in controller_seeds.seed_table(
            [one], 0.01, "new", [("old", ("high",))], rows_from=[[first, second]]
        )
    }
    assert table["low"]["hdet"] == [pytest.approx(1.05)] and table["high"]["hdet"] == [pytest.approx(1.1)]
    text = controller_seeds.main(
        [str(one), "--best_lr", "0.01", "--rows", "new", "--same_as", "old:high", "--rows_from", f"{first},{second}"]
    )
    assert "| low (0.001) | 1.050 |" in text and "| 1.100* |" in text
    with pytest.raises(SystemExit):
        controller_seeds.main([str(one), "--best_lr", "0.01", "--rows", "new", "--rows_from", f"{first},{tmp_path}/x"])
    assert "no such file" in capsys.readouterr().err
