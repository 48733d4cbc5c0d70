"""Session 55 screen: the start race at 2 processes on a quarter of the global batch (half of one process's batch;
quarter2p_scratch.patch) against today's race there (one process's batch, half the global batch), race-only, on the
cells where the copy's batch decided in item 56; with the full runs of the races that decided otherwise.

    python benchmarks/controller_today_s55/quarter2p_compare.py  # reads quarter2p/ and the recorded runs
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
TODAY = {  # today's runs at 2 processes (the race on half the global batch), by task and seed
    "i": ["controller_today_s52/runs/i_procs2_0.jsonl", "controller_today_s55/runs/i_procs2_1.jsonl",
          "controller_today_s55/runs/i_procs2_2.jsonl"],
    "c": [f"controller_today_s55/runs/c_procs2_{s}.jsonl" for s in range(3)],
    "g": ["controller_today_s52/runs/g_procs2_0.jsonl"],
    "e": [f"controller_today_s53/runs/e_procs2_{s}.jsonl" for s in range(3)],
    "f": [f"controller_today_s53/runs/f_procs2_{s}.jsonl" for s in range(3)],
}  # fmt: skip
BEST = {"i": 0.003, "c": 0.0003, "g": 0.0003, "e": 0.01, "f": 0.01}


def run(path: Path, start: str) -> dict | None:
    for line in path.open():
        row = json.loads(line)
        if row.get("kind") == "hdet" and row["start"] == start:
            return row
    return None


def ddp_best(task: str, seed: int) -> float:
    folder = BENCH / (f"cuthalf_{task}_procs2" + (f"_seed{seed}" if seed else ""))
    rows = [json.loads(line) for line in (folder / "results.jsonl").open()]
    return next(r["eval_loss"] for r in rows if r["kind"] == "ddp" and abs(r["start_lr"] / BEST[task] - 1) < 1e-6)


def decision(row: dict) -> str:
    race = row["start_race"]
    text = f"x{race['scale']:.3g}" + (" lowered" if race.get("lowered") else "")
    return text


def main() -> None:
    print("| cell | half (today) | quarter | copy below / start's progress (quarter) | full run: half -> quarter |")
    print("|---|---|---|---|---|")
    for folder in sorted((HERE / "quarter2p").glob("*.jsonl")):
        name = folder.stem  # e.g. i0_high
        task, seed, start = name[0], int(name[1]), name.split("_")[1]
        quarter = run(folder, start)
        today = run(BENCH / TODAY[task][seed], start)
        race = quarter["start_race"]
        progress = race["initial_probe_loss"] - race["probe_losses"][0]
        below = race["initial_probe_loss"] - race["below_probe_loss"]
        ratio = f"{below / progress:.2f}" if progress > 0 else "start lost ground"
        full = HERE / "quarter2p_full" / f"{name}.jsonl"
        base = ddp_best(task, seed)
        ends = f"{today['eval_loss'] / base:.3f} -> {run(full, start)['eval_loss'] / base:.3f}" if full.exists() else ""
        changed = decision(today) != decision(quarter)
        print(f"| {task} seed {seed}, {start} | {decision(today)} | {decision(quarter)}{' (changed)' if changed else ''} "
              f"| {ratio} | {ends} |")  # fmt: skip


if __name__ == "__main__":
    main()
