"""Session 56 (BENCHMARKS.md item 58): what the start race split by share decides on every recorded cell, from the
races already recorded, before any run of its own.

The split race (``--hdet_start_race_batch_share 0.5 --hdet_start_race_lower_batch_share 0.25``, the defaults since
session 56) trains its four candidates on half the global batch and the start and the copy below it on a quarter.
Each half is a race already recorded, copy for copy:

- the candidates (the raise, its scale, the stall ceiling) are the race on half: at 4 processes item 56's
  (``controller_today_s54/race_half/``) and this session's (``half4p/``, seeds 1-2 of j, k, c, g, i); at 2 processes
  today's own race (one process's batch is half the global batch);
- the pair (the lowering, and the confirmation of a raise: the copy below must do worse than the start) is the race
  on a quarter: at 4 processes today's; at 2 processes the same copies as at 4 (the same examples a step, the same
  weights: item 57's 2-process scratch on a quarter matched the 4-process races' losses to 4 digits or bit for bit).

So the split decides: raise to the half race's scale where the half race's rule (before its confirmation) raises
and the quarter's copy below did worse than the quarter's start (their means); else lower where the quarter race
lowered; else 1; with the half race's stall ceiling. Where the half race would have raised but its own copy below
refused it, the scale it would have raised to is not recorded: such a cell is listed as UNKNOWN (none here).

    python benchmarks/controller_race_split/derive.py > benchmarks/controller_race_split/derive.txt
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
SIGNIFICANCE = 2.0


def races(*paths: str) -> dict[str, dict]:
    """start -> the race record, later files winning (each file: one run's rows, or a folder's results.jsonl)."""
    out: dict[str, dict] = {}
    for path in paths:
        file = BENCH / path
        if file.is_dir():
            file = file / "results.jsonl"
        if not file.exists():
            continue
        for line in file.open():
            row = json.loads(line)
            if row.get("kind") != "ddp" and row.get("start_race") and row["start"] in ("best", "low", "high"):
                out[row["start"]] = row["start_race"]
    return out


def quarter_4p(task: str, seed: int) -> dict[str, dict]:
    """Today's race at 4 processes (a quarter of the global batch), 128 probe examples where recorded."""
    if seed == 0:
        return races(f"controller_probe_spread/runs/{task}0.jsonl", f"controller_race_lost_ground/race_probe/{task}.jsonl")
    return races(
        f"controller_probe_spread/runs/{task}{seed}.jsonl",
        f"controller_race_lost_ground/classifier_seeds/{task}{seed}.jsonl",
        f"controller_race_lost_ground/runs/{task}{seed}.jsonl",
        f"controller_race_lost_ground/race_probe/seeds/{task}{seed}.jsonl",
        f"controller_race_lost_ground/race_probe_runs/{task}{seed}.jsonl",
        f"controller_today_s52/runs/{task}{seed}.jsonl",
    )


def quarter_2p(task: str, seed: int) -> dict[str, dict]:
    """The quarter at 2 processes: item 57's scratch races where it ran them (half of one process's batch), else the
    4-process races (the same copies but for dropout's masks on the classifiers)."""
    out = quarter_4p(task, seed)
    for file in (BENCH / "controller_today_s55/quarter2p").glob(f"{task}{seed}_*.jsonl"):
        out.update(races(str(file.relative_to(BENCH))))
    return out


def half_4p(task: str, seed: int) -> dict[str, dict]:
    return races(f"controller_today_s54/race_half/{task}{seed}.jsonl", f"controller_race_split/half4p/{task}{seed}")


def half_2p(task: str, seed: int) -> dict[str, dict]:
    """Today's race at 2 processes (one process's batch: half the global batch)."""
    return races(
        f"controller_probe_spread/runs/{task}_procs2_{seed}.jsonl",
        f"controller_today_s52/runs/{task}_procs2_{seed}.jsonl",
        f"controller_today_s53/runs/{task}_procs2_{seed}.jsonl",
        f"controller_today_s54/runs/{task}_procs2_{seed}.jsonl",
        f"controller_today_s55/runs/{task}_procs2_{seed}.jsonl",
        *(["controller_race_lost_ground/race_probe/jp.jsonl"] if (task, seed) == ("j", 0) else []),
    )


def pre_confirm_raise(race: dict) -> str:
    """Whether the race's rule raised before its copy below was compared: "yes" (the recorded scale), "no", or
    "refused" (it would have raised, its copy below refused it: the scale is not recorded)."""
    if race["scale"] > 1:
        return "yes"
    winner, gap, se = race["winner"], race["gap"], race["standard_error"]
    trend = winner >= 2  # raise_on two_steps, the default since session 46
    would = winner != 0 and (race["start_came_last"] or trend) and race["falls_to_winner"] and gap > 0
    would = would and gap >= SIGNIFICANCE * se
    return "refused" if would else "no"


def decision(race: dict) -> str:
    ceiling = race.get("stall_ceiling")
    return f"x{race['scale']:.3g}{' lowered' if race['lowered'] else ''}{f' ceiling {ceiling:.3g}' if ceiling else ''}"


def split(half: dict, quarter: dict) -> str:
    pre = pre_confirm_raise(half)
    ceiling = half.get("stall_ceiling")
    tail = f" ceiling {ceiling:.3g}" if ceiling else ""
    quarter_below, quarter_start = quarter.get("below_probe_loss"), quarter["probe_losses"][0]
    if pre == "refused":
        return "UNKNOWN"
    if pre == "yes" and quarter_below is not None and quarter_below > quarter_start:
        return f"x{half['scale']:.3g}{tail}"
    # No raise: the quarter's lowering (a quarter race that raised had its copy below lose to its start: no lowering).
    if quarter["lowered"]:
        return f"x{quarter['scale']:.3g} lowered{tail}"
    return f"x1{tail}"


TASKS = "adefhjkcgi"
print("cell (task seed, processes, start) | today | split | changed")
changed = total = 0
for processes in (4, 2):
    for task in TASKS:
        if processes == 2 and task == "k":
            continue  # task k runs at 4 processes only
        for seed in range(3):
            quarter = quarter_4p(task, seed) if processes == 4 else quarter_2p(task, seed)
            half = half_4p(task, seed) if processes == 4 else half_2p(task, seed)
            today = quarter if processes == 4 else half
            for start in ("best", "low", "high"):
                if start not in half or start not in quarter or start not in today:
                    print(f"{task}{seed} {processes}p {start:>4} | {'-' if start not in today else decision(today[start])}"
                          f" | not raced (half: {start in half}, quarter: {start in quarter})")
                    continue
                total += 1
                now, then = decision(today[start]), split(half[start], quarter[start])
                differs = now != then
                changed += differs
                print(f"{task}{seed} {processes}p {start:>4} | {now} | {then} | {'CHANGED' if differs else ''}")
print(f"{changed} of {total} decisions change")
