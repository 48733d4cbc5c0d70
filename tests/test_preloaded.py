"""tests/preloaded.py: workers forked from the preloaded server see what torchrun's workers see, and a
failing worker fails the launch (with its traceback) instead of leaving the others hanging."""

from __future__ import annotations

import json
import time

from distributed import gloo_only, torchrun


def _dumps(folder, nproc: int) -> list[dict]:
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(nproc)]


def test_preloaded_workers_see_the_same_launch_as_under_torchrun(tmp_path):
    gloo_only()
    seen = {}
    for launcher in ("torchrun", "preloaded"):
        out = tmp_path / launcher
        out.mkdir()
        torchrun("launch_env_worker.py", 3, [str(out), "--flag", "value with spaces"], launcher=launcher)
        seen[launcher] = _dumps(out, 3)
    for real, forked in zip(seen["torchrun"], seen["preloaded"]):
        assert forked["argv"][0].endswith("preloaded") and real["argv"][0].endswith("torchrun")
        assert forked["argv"][1:] == real["argv"][1:] == ["--flag", "value with spaces"]
        assert {**forked, "argv": None} == {**real, "argv": None}
    assert [d["env"]["RANK"] for d in seen["preloaded"]] == ["0", "1", "2"]
    assert all(d["name"] == "__main__" and d["world"] == 3 for d in seen["preloaded"])


def test_a_failing_worker_stops_the_others_and_fails_the_launch(tmp_path):
    gloo_only()
    start = time.monotonic()
    proc = torchrun("launch_env_worker.py", 2, [str(tmp_path), "fail"], timeout=120, expect_failure=True)
    assert time.monotonic() - start < 100  # rank 0 did not wait in its barrier until the timeout
    assert "RuntimeError: rank 1 fails on purpose" in proc.stderr
    assert "worker 0 of 2 up" in proc.stdout and "worker 1 of 2 up" in proc.stdout
    assert not list(tmp_path.glob("rank*.json"))
