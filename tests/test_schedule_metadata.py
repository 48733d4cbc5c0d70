"""hdet_schedule.json: round trip, validation, LR replay, summary, model card, plot and the Hub."""

from __future__ import annotations

import json
import math
import os
import struct
import sys

import huggingface_hub
import pytest
import torch
from fake_hub import fake_hub
from matplotlib.figure import Figure

from hdet_hf.plotting import _plot_lr, _vote_spacing, plot_schedule
from hdet_hf.schedule_metadata import (
    PLOT_FILENAME,
    SCHEDULE_FILENAME,
    SCHEDULE_FORMAT_VERSION,
    HDETSchedule,
    ReplayLR,
    model_card_section,
    summary_from_lr,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Distinct, irregular values so a replay that is off by one step or swaps groups cannot pass.
LR_TABLE = [[1e-3 * (k + 1) ** 0.5, 3e-4 / (k + 1)] for k in range(10)]


def make_schedule(num_syncs: int = 3, other: bool = True) -> HDETSchedule:
    trajectory = [
        {
            "step": 3 * (j + 1),
            "base": {"lr": LR_TABLE[3 * j + 2][0], **({"dropout": 0.1 + 0.01 * j} if other else {})},
            "multipliers": {
                "lr": [0.5, 0.83, 1.17, 1.5],
                **({"dropout": [0.9, 1.0, 1.0, 1.1]} if other else {}),
            },
            "losses": [3.1 - j, 3.0 - j, 2.9 - j, 2.95 - j],
            "weights": [0.1, 0.2, 0.4, 0.3],
            "delta": {"lr": 1e-4},
            "velocity": {"lr": 1e-5},
            "excluded_ranks": [],
        }
        for j in range(num_syncs)
    ]
    schedule = HDETSchedule(
        config={"lr_spread": 0.5, "sync_interval": 3, "auto_lr": True},
        world_size=4,
        total_steps=10,
        sync_interval=3,
        hyperparameters=["lr", "lr/no_decay"] + (["dropout"] if other else []),
        param_group_names=["decay", "no_decay"],
        lr_per_step=[list(row) for row in LR_TABLE],
        trajectory=trajectory,
    )
    schedule.summary = schedule.compute_summary()
    return schedule


def two_group_optimizer(groups: int = 2) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(groups)])
    optimizer = torch.optim.AdamW([{"params": layer.parameters()} for layer in model], lr=123.0)
    return model, optimizer


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "not a PNG file"
    return struct.unpack(">II", head[16:24])


# -- JSON ------------------------------------------------------------------------------------------------


def test_dict_round_trip_keeps_everything() -> None:
    schedule = make_schedule()
    schedule.values_per_step = {"dropout": [0.1] * 10}
    schedule.extra = {"written_by": "a future minor release"}
    data = schedule.to_dict()
    assert data["format"] == "hdet_schedule" and data["version"] == SCHEDULE_FORMAT_VERSION == 1
    assert data["written_by"] == "a future minor release"
    assert HDETSchedule.from_dict(json.loads(json.dumps(data))) == schedule


def test_save_load_round_trip(tmp_path) -> None:
    schedule = make_schedule()
    written = schedule.save_pretrained(tmp_path)
    assert written == [os.path.join(tmp_path, SCHEDULE_FILENAME)]
    assert sorted(os.listdir(tmp_path)) == [SCHEDULE_FILENAME]  # no temporary file left behind
    assert HDETSchedule.from_pretrained(tmp_path) == schedule
    assert HDETSchedule.from_pretrained(written[0]) == schedule
    on_disk = json.loads((tmp_path / SCHEDULE_FILENAME).read_text())
    assert on_disk["lr_per_step"] == LR_TABLE
    assert on_disk["summary"]["lr"]["max"] == max(row[0] for row in LR_TABLE)


def test_save_writes_strict_json_for_non_finite_losses(tmp_path) -> None:
    schedule = make_schedule()
    schedule.trajectory[1]["losses"][3] = float("nan")
    schedule.trajectory[1]["excluded_ranks"] = [3]
    schedule.save_pretrained(tmp_path)

    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    data = json.loads((tmp_path / SCHEDULE_FILENAME).read_text(), parse_constant=reject)
    assert data["trajectory"][1]["losses"][3] is None
    assert HDETSchedule.from_pretrained(tmp_path).trajectory[1]["losses"] == [2.1, 2.0, 1.9, None]


def test_an_unbounded_line_search_optimum_is_kept_apart_from_no_fit(tmp_path) -> None:
    # A straight line (m* = inf) allows the line search's largest raise; None means nothing was fitted. Written as
    # None, a run's 4x raises read as "no line search" (session 47).
    schedule = make_schedule()
    schedule.trajectory[0]["line_search_optimum"] = math.inf
    schedule.trajectory[1]["line_search_optimum"] = None
    schedule.trajectory[2]["line_search_optimum"] = 0.83
    schedule.save_pretrained(tmp_path)

    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    data = json.loads((tmp_path / SCHEDULE_FILENAME).read_text(), parse_constant=reject)
    assert [t["line_search_optimum"] for t in data["trajectory"][:3]] == ["inf", None, 0.83]
    loaded = HDETSchedule.from_pretrained(tmp_path)
    assert [t["line_search_optimum"] for t in loaded.trajectory[:3]] == [math.inf, None, 0.83]
    assert loaded == schedule


def test_save_is_atomic(tmp_path, monkeypatch) -> None:
    first = make_schedule(num_syncs=1)
    first.save_pretrained(tmp_path)
    before = (tmp_path / SCHEDULE_FILENAME).read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        make_schedule(num_syncs=3).save_pretrained(tmp_path)
    assert (tmp_path / SCHEDULE_FILENAME).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [SCHEDULE_FILENAME]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "trainer_state"}, r"Expected format 'hdet_schedule', but got 'trainer_state'"),
        ({"format": None}, r"but got None"),
        ({"version": 2}, r"version 2.*reads version 1.*upgrade hdet_hf"),
        ({"version": "1"}, r"version '1'.*reads version 1"),
        ({"version": None}, r"version None"),
    ],
)
def test_from_dict_rejects_bad_format_or_version(change, message) -> None:
    data = {**make_schedule().to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        HDETSchedule.from_dict(data)


def test_from_dict_rejects_missing_keys_and_ragged_rows() -> None:
    data = make_schedule().to_dict()
    del data["lr_per_step"], data["world_size"]
    with pytest.raises(ValueError, match="missing required key.*world_size.*lr_per_step"):
        HDETSchedule.from_dict(data)
    data = make_schedule().to_dict()
    data["lr_per_step"][4] = [1e-3]
    with pytest.raises(ValueError, match=r"lr_per_step\[4\] has 1 value.*2 group"):
        HDETSchedule.from_dict(data)


def test_from_pretrained_local_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="No hdet_schedule.json in directory"):
        HDETSchedule.from_pretrained(tmp_path)
    (tmp_path / SCHEDULE_FILENAME).write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        HDETSchedule.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="neither a local file or directory nor a valid Hub repo id"):
        HDETSchedule.from_pretrained(str(tmp_path / "no" / "such" / "dir"))


# -- replay -----------------------------------------------------------------------------------------------


def test_replay_matches_record_exactly() -> None:
    model, optimizer = two_group_optimizer()
    scheduler = make_schedule().as_lr_scheduler(optimizer)
    assert isinstance(scheduler, ReplayLR) and isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler)
    seen = []
    for _ in range(len(LR_TABLE)):
        seen.append([group["lr"] for group in optimizer.param_groups])  # the LRs this step will use
        train_step(model, optimizer)
        scheduler.step()
    assert seen == LR_TABLE  # exact float equality, every step, both groups
    # Past the end the last recorded values are held.
    for _ in range(3):
        train_step(model, optimizer)
        scheduler.step()
        assert [group["lr"] for group in optimizer.param_groups] == LR_TABLE[-1]


def test_replay_without_hold_last_raises_past_the_record() -> None:
    model, optimizer = two_group_optimizer()
    scheduler = make_schedule().as_lr_scheduler(optimizer, hold_last=False)
    for _ in range(len(LR_TABLE)):  # the full recorded run, scheduler.step() after each step, is fine
        train_step(model, optimizer)
        scheduler.step()
    train_step(model, optimizer)
    with pytest.raises(RuntimeError, match="stepped 11 times, but only 10 optimizer steps are recorded"):
        scheduler.step()


def test_replay_group_count_mismatch_names_both_counts() -> None:
    _, optimizer = two_group_optimizer(groups=3)
    expected = r"records 2 param group\(s\), but the optimizer has 3.*same 2 param"
    with pytest.raises(ValueError, match=expected):
        make_schedule().as_lr_scheduler(optimizer)
    with pytest.raises(ValueError, match="0 recorded steps"):
        HDETSchedule(lr_per_step=[]).as_lr_scheduler(optimizer)


def test_replay_broadcasts_a_single_column() -> None:
    model, optimizer = two_group_optimizer(groups=3)
    column = [row[0] for row in LR_TABLE]
    scheduler = HDETSchedule(lr_per_step=[[v] for v in column]).as_lr_scheduler(optimizer)
    for k in range(len(column)):
        assert [group["lr"] for group in optimizer.param_groups] == [column[k]] * 3
        train_step(model, optimizer)
        scheduler.step()


def test_replay_state_dict_round_trip(tmp_path) -> None:
    schedule = make_schedule()
    model, optimizer = two_group_optimizer()
    scheduler = schedule.as_lr_scheduler(optimizer)
    for _ in range(4):
        train_step(model, optimizer)
        scheduler.step()
    checkpoint = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert state["scheduler"]["version"] == 1 and state["scheduler"]["last_epoch"] == 4

    model2, optimizer2 = two_group_optimizer()
    resumed = schedule.as_lr_scheduler(optimizer2)  # scheduler first, then the optimizer (torch's rule)
    optimizer2.load_state_dict(state["optimizer"])
    resumed.load_state_dict(state["scheduler"])
    assert resumed.state_dict() == scheduler.state_dict()
    for k in range(4, len(LR_TABLE)):
        assert [group["lr"] for group in optimizer2.param_groups] == LR_TABLE[k]
        train_step(model2, optimizer2)
        resumed.step()

    other = HDETSchedule(lr_per_step=LR_TABLE[:5]).as_lr_scheduler(two_group_optimizer()[1])
    with pytest.raises(ValueError, match="saved with a schedule of 10 steps.*replays 5"):
        other.load_state_dict(state["scheduler"])


# -- summary and model card --------------------------------------------------------------------------------


def test_summary_numbers() -> None:
    assert summary_from_lr([3e-3, 1e-3, None, float("nan"), 4e-3, 2e-3]) == {
        "start": 3e-3,
        "final": 2e-3,
        "min": 1e-3,
        "max": 4e-3,
    }
    assert summary_from_lr([]) == {} and summary_from_lr([None, math.inf]) == {}

    summary = make_schedule().compute_summary()
    decay = [row[0] for row in LR_TABLE]
    no_decay = [row[1] for row in LR_TABLE]
    assert summary["lr"] == {"start": decay[0], "final": decay[-1], "min": min(decay), "max": max(decay)}
    assert summary["lr/no_decay"] == {
        "start": no_decay[0],
        "final": no_decay[-1],
        "min": min(no_decay),
        "max": max(no_decay),
    }
    assert summary["dropout"] == pytest.approx({"start": 0.1, "final": 0.12, "min": 0.1, "max": 0.12})

    # Without a per-step record the controller's base values at the syncs are used.
    bare = HDETSchedule(
        hyperparameters=["lr", "momentum"],
        trajectory=[{"step": 5 * (i + 1), "base": {"lr": lr}} for i, lr in enumerate([2e-3, 1e-3, 4e-3])],
    )
    assert bare.compute_summary() == {"lr": {"start": 2e-3, "final": 4e-3, "min": 1e-3, "max": 4e-3}}


def test_model_card_section() -> None:
    schedule = make_schedule()
    card = model_card_section(schedule, repo_id="me/hdet-model")
    assert card.startswith("## HDET schedule\n")
    assert "World size: 4" in card and "Sync interval: 3 optimizer steps" in card and "Converges: 3" in card
    assert "| hyperparameter | start | final | min | max |\n|---|---|---|---|---|\n" in card
    lr = schedule.summary["lr"]
    row = f"| `lr` | {lr['start']:.4g} | {lr['final']:.4g} | {lr['min']:.4g} | {lr['max']:.4g} |"
    assert row in card.splitlines()
    assert "| `dropout` | 0.1 | 0.12 | 0.1 | 0.12 |" in card.splitlines()
    assert f"![HDET schedule]({PLOT_FILENAME})" in card
    assert 'HDETSchedule.from_pretrained("me/hdet-model").as_lr_scheduler(optimizer)' in card
    assert "![" not in model_card_section(schedule, plot_filename=None)


# -- plot ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_syncs", [3, 0])
def test_plot_is_a_png(tmp_path, num_syncs) -> None:
    schedule = make_schedule(num_syncs=num_syncs, other=False)
    path = plot_schedule(schedule, str(tmp_path / "sub" / "plot.png"))
    assert path == str(tmp_path / "sub" / "plot.png")
    png_size(path)
    assert os.path.getsize(path) > 20_000  # axes, text and lines, not an empty canvas


def test_plot_accepts_a_dict_and_adds_a_panel_for_other_hyperparameters(tmp_path) -> None:
    two = png_size(plot_schedule(make_schedule(other=False).to_dict(), str(tmp_path / "two.png")))
    three = png_size(plot_schedule(make_schedule(other=True).to_dict(), str(tmp_path / "three.png")))
    assert three[0] == two[0] and three[1] > two[1] * 1.3


def test_save_pretrained_writes_json_only_and_the_caller_draws(tmp_path) -> None:
    schedule = make_schedule()
    assert schedule.save_pretrained(tmp_path) == [str(tmp_path / SCHEDULE_FILENAME)]
    assert sorted(os.listdir(tmp_path)) == [SCHEDULE_FILENAME]
    assert schedule.save_pretrained(tmp_path, plot=False) == [
        str(tmp_path / SCHEDULE_FILENAME)
    ]  # old callers
    with pytest.raises(
        ValueError, match=r"plot=True\) no longer draws the plot: call hdet_hf.plotting.plot_schedule"
    ):
        schedule.save_pretrained(tmp_path, plot=True)
    png_size(plot_schedule(schedule, tmp_path / PLOT_FILENAME))


def test_saving_and_loading_the_record_needs_no_plotting(tmp_path, monkeypatch) -> None:
    """The record is plain data: it is written and read with matplotlib and hdet_hf.plotting unimportable."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "hdet_hf.plotting", None)
    schedule = make_schedule()
    schedule.save_pretrained(tmp_path)
    assert HDETSchedule.from_pretrained(tmp_path) == schedule


def test_lr_axis_is_log_only_beyond_ten_x() -> None:
    narrow = make_schedule()  # spans ~3x with the multipliers... stays linear
    narrow.lr_per_step = [[1e-3, 1e-3] for _ in range(10)]
    wide = make_schedule()
    wide.lr_per_step = [[1e-3 * 0.5**k, 1e-3] for k in range(10)]  # 1e-3 .. 2e-6
    scales = []
    for schedule in (narrow, wide):
        ax = Figure().subplots()
        _plot_lr(ax, schedule)
        scales.append(ax.get_yscale())
    assert scales == ["linear", "log"]


# -- the Hub -------------------------------------------------------------------------------------------------


@pytest.fixture
def hub():
    with fake_hub() as hub:
        yield hub


def test_push_and_download_through_the_hub(hub, tmp_path) -> None:
    schedule = make_schedule()
    folder = tmp_path / "model"
    schedule.save_pretrained(folder)
    plot_schedule(schedule, folder / PLOT_FILENAME)
    (folder / "config.json").write_text('{"model_type": "bert"}')

    api = huggingface_hub.HfApi(endpoint=hub.endpoint, token=hub.token)
    repo_id = api.create_repo("hdet-model").repo_id
    assert repo_id == f"{hub.user}/hdet-model"
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="End of training")

    sent = hub.uploaded[repo_id]
    assert sent[SCHEDULE_FILENAME] == (folder / SCHEDULE_FILENAME).read_bytes()
    assert sent[PLOT_FILENAME] == (folder / PLOT_FILENAME).read_bytes()
    assert sent[PLOT_FILENAME][:8] == PNG_MAGIC and "config.json" in sent
    assert hub.unhandled == []

    loaded = HDETSchedule.from_pretrained(repo_id, cache_dir=tmp_path / "cache")
    assert loaded == schedule
    assert ("GET", f"/{repo_id}/resolve/main/{SCHEDULE_FILENAME}") in hub.requests


def test_default_endpoint_is_redirected_and_restored(tmp_path) -> None:
    before = huggingface_hub.constants.ENDPOINT
    schedule = make_schedule(num_syncs=1)
    with fake_hub() as hub:
        folder = tmp_path / "ckpt"
        schedule.save_pretrained(folder)
        # No endpoint or token passed anywhere: what Trainer.push_to_hub and users' scripts do.
        huggingface_hub.create_repo("acme/run", exist_ok=True)
        commit = huggingface_hub.upload_folder(
            repo_id="acme/run", folder_path=folder, path_in_repo="last-checkpoint"
        )
        sent = hub.uploaded["acme/run"]["last-checkpoint/" + SCHEDULE_FILENAME]
        assert sent == (folder / SCHEDULE_FILENAME).read_bytes()
        assert HDETSchedule.from_pretrained("acme/run", subfolder="last-checkpoint") == schedule

        # A pinned revision reads that commit even after the branch moved on.
        hub.seed("acme/run", "last-checkpoint/" + SCHEDULE_FILENAME, b"{}")
        pinned = HDETSchedule.from_pretrained("acme/run", revision=commit.oid, subfolder="last-checkpoint")
        assert pinned == schedule
        with pytest.raises(ValueError, match="Expected format"):
            HDETSchedule.from_pretrained("acme/run", subfolder="last-checkpoint")

        hub.create_repo("acme/plain-model")
        with pytest.raises(FileNotFoundError, match="'acme/plain-model' has no hdet_schedule.json"):
            HDETSchedule.from_pretrained("acme/plain-model")
    assert huggingface_hub.constants.ENDPOINT == before


def test_final_scale_is_the_last_controller_scale_and_the_card_names_it() -> None:
    schedule = make_schedule()
    # No entry carries a controller scale and none is controller_active: nothing was found, the card says nothing.
    assert schedule.final_scale() is None
    assert "the configured learning rate" not in model_card_section(schedule, plot_filename=None)
    # Every converge records a scale, 1.0 when auto-LR is off: without an active controller nothing was found.
    for entry in schedule.trajectory:
        entry["scale"] = {"lr": 1.0}
    assert schedule.final_scale() is None

    for entry, scale in zip(schedule.trajectory, [1.3, 0.84, None]):
        entry["controller_active"] = scale is not None
        entry["scale"] = {"lr": scale} if scale is not None else {}
    # The last converge after exploration records no scale: the last recorded one (0.84) is what the run kept.
    assert schedule.final_scale() == 0.84
    assert schedule.final_scale("dropout") is None
    card = model_card_section(schedule, plot_filename=None)
    assert "The controller ended at 0.84x the configured learning rate" in card
    # The value survives the JSON round trip the Hub artifact goes through.
    assert HDETSchedule.from_dict(schedule.to_dict()).final_scale() == 0.84

    # A non-finite scale (a corrupted file) is skipped, not reported.
    schedule.trajectory[1]["scale"] = {"lr": float("nan")}
    assert schedule.final_scale() == 1.3


def test_the_plot_title_says_when_the_controller_voted_at_every_kth_converge_only():
    """--hdet_controller_time_scale vote with a short T: the controller is active at every 3rd converge of 3 steps,
    so the title adds "a vote every 9 steps"; active at every converge (or never) it adds nothing."""
    schedule = make_schedule(other=False)  # converges at steps 3, 6, 9
    for entry in schedule.trajectory:
        entry["controller_active"] = True
    assert _vote_spacing(schedule) == ""  # a vote at every converge
    for entry, step in zip(schedule.trajectory, (9, 18, 27)):  # only every 3rd converge voted
        entry["step"] = step
    assert _vote_spacing(schedule) == ", a vote every 9 steps"
    assert _vote_spacing(make_schedule()) == ""  # no controller_active entries
