"""Gather the rows of README's summary cells that session 44 rebuilt with today's library (reading 49).

    python benchmarks/controller_today/collect.py   # writes rows4/<task><seed>.jsonl and rows2/<task><seed>.jsonl

rows4: the 4-process default's rows at the best LR and 3x above: session 36's (`controller_probe_share/<task><seed>/`,
row `..._ties_mr4_{best,high}`; a race that neither raises nor lowers leaves a run bit for bit as it was, and none of
these races fires: `controller_start_race/lower_default.md`) and this session's runs where those lack a seed
(`queue_session44.sh`: f and h seed 2, e seed 2 from 3x above, a seeds 3-4 from 3x above). rows2: this session's
2-process rows (best LR everywhere, 3x above on the language models). Scratch output folders as the queue wrote them.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
R = "shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4"
KEEP4 = {f"{R}_best", f"{R}_high", f"{R}_race60_lower_best", f"{R}_race60_lower_high"}
KEEP2 = {f"{R}_cut0.5_race60_lower_best", f"{R}_cut0.5_race60_lower_high"}


def hdet_rows(path: Path, keep: set[str]) -> list[str]:
    if not path.exists():
        return []
    return [line.rstrip("\n") for line in open(path) if json.loads(line)["name"] in keep]


def main(scratch4: str = "/tmp/today44_4", scratch2: str = "/tmp/today44_2") -> None:
    for sub, keep, sources in (
        ("rows4", KEEP4, [BENCH / "controller_probe_share", Path(scratch4)]),
        ("rows2", KEEP2, [Path(scratch2)]),
    ):
        seeds = sorted({p.name for source in sources if source.exists() for p in source.iterdir() if p.is_dir()})
        (HERE / sub).mkdir(exist_ok=True)
        for ts in seeds:
            lines = [line for source in sources for line in hdet_rows(source / ts / "results.jsonl", keep)]
            if lines:
                (HERE / sub / f"{ts}.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
