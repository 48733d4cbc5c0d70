"""Session 46: which recorded start races the two_steps rule could change (its conditions on the means).

    cd benchmarks && python controller_start_race/screen_twosteps.py

Every distinct race recorded under benchmarks/ (keyed by its candidates' probe losses) where the start did not come
last and the means fall strictly from the start to a winner at least two steps up. The rule's other gates (2 paired
standard errors, the copy below the start) can only hold such a race back; the runs show which raised. Races that
session 46 recorded (twosteps/ folders) are their reruns, so the count of distinct races excludes them.
"""

import glob
import json


def races() -> dict[tuple, tuple[str, str, dict]]:
    seen: dict[tuple, tuple[str, str, dict]] = {}
    for path in sorted(glob.glob("**/*.jsonl", recursive=True)):
        if "twosteps/" in path:
            continue
        for line in open(path):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            race = row.get("start_race") if isinstance(row, dict) else None
            if race:
                key = tuple(round(x, 4) for x in race["probe_losses"])
                seen.setdefault(key, (path, row.get("name", ""), race))
    return seen


def main() -> None:
    seen = races()
    fits = []
    for path, name, race in seen.values():
        means = race["probe_losses"]
        falls = all(means[c] < means[c - 1] for c in range(1, race["winner"] + 1))
        if race["start_came_last"] or not falls or race["winner"] < 2:
            continue
        losses = [round(x, 3) for x in race["probe_losses"]]
        fits.append((path, name[-24:], losses, race.get("below_probe_loss"), race.get("lowered")))
    for fit in sorted(fits):
        print(fit)
    print(f"{len(fits)} of {len(seen)} distinct races fit")


if __name__ == "__main__":
    main()
