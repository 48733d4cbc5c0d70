"""scripts/controller_paths.py: the base LR paths of chosen rows, one panel per results folder."""

import json
import sys
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPT_DIR))
import controller_paths  # noqa: E402


def write_results(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rows_by_name_keep_the_rerun_and_the_best_ddp_point_is_the_lowest_eval_loss(tmp_path):
    write_results(
        tmp_path / "a",
        [
            {"name": "ddp_lr0.01", "kind": "ddp", "start_lr": 0.01, "eval_loss": 3.9},
            {"name": "ddp_lr0.03", "kind": "ddp", "start_lr": 0.03, "eval_loss": 4.1},
            {"name": "hdet_high", "kind": "hdet", "eval_loss": 4.2, "lr_per_step": [0.001, 0.002]},
            {"name": "hdet_high", "kind": "hdet", "eval_loss": 4.0, "lr_per_step": [0.001, 0.003]},  # a rerun
        ],
    )
    rows = controller_paths.load_rows(tmp_path / "a")
    assert rows["hdet_high"]["eval_loss"] == 4.0
    assert controller_paths.best_ddp(rows)["start_lr"] == 0.01
    assert controller_paths.best_ddp({"x": {"kind": "hdet", "eval_loss": 1.0}}) is None


def test_the_figure_is_written_with_rows_missing_from_some_folders(tmp_path):
    write_results(tmp_path / "a", [{"name": "r1", "eval_loss": 4.0, "lr_per_step": [[0.001], [0.002]]}])
    write_results(tmp_path / "b", [{"name": "r2", "eval_loss": 4.0, "lr_per_step": [0.001, 0.002]}])
    out = tmp_path / "fig" / "paths.png"
    controller_paths.main([str(tmp_path / "a"), str(tmp_path / "b"), "--rows", "r1,r2", "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
