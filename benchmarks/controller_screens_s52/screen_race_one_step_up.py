"""Session 52 screen, on recorded races only (no training): would the start race raise where the copy one step up
(x2.15) wins significantly and the copy below the start (x0.464) ends behind the start?

That is the pattern of task j from 10x below (below 3.354, start 3.229, x2.15 3.195: a loss that falls from below
through the start to one step up), which today's gates refuse (the start is not last, and the fall is not two steps
long). Every unique recorded race with a copy below, from every benchmark folder, is read; a race "fires" when the
winner is x2.15 by at least 2 of the race's standard errors, the race neither raised nor lowered, and the copy below
ended above the start. Run from the repository root: python benchmarks/controller_screens_s52/screen_race_one_step_up.py
"""

import collections

from recorded import recorded_rows

races = {}
for path, row in recorded_rows():
    race = row.get("start_race")
    if not isinstance(race, dict) or race.get("below_probe_loss") is None:
        continue
    losses, below = race["probe_losses"], race["below_probe_loss"]
    key = (row.get("start"), tuple(round(x, 4) for x in losses), round(below, 4))
    if key in races:
        continue  # the same race recorded in several folders
    se = race["standard_error"]
    winner = min(range(len(losses)), key=losses.__getitem__)
    fires = (
        winner == 1
        and race["scale"] == 1.0
        and not race.get("lowered")
        and below > losses[0]
        and se == se
        and race["gap"] >= 2 * se
    )
    races[key] = (fires, path, losses, below, race["gap"] / se if se == se and se > 0 else float("nan"))

counts = collections.Counter((start, fires) for (start, _, _), (fires, *_) in races.items())
for start in sorted({start for start, _ in counts}, key=str):
    print(f"{start}: fires on {counts[(start, True)]} of {counts[(start, True)] + counts[(start, False)]} races")
print()
for (start, _, _), (fires, path, losses, below, z) in sorted(races.items(), key=lambda kv: str(kv[0][0])):
    if fires:
        print(f"{start:5s} {path}: x1, x2.15, x4.64, x10 {[round(x, 3) for x in losses]}, below {below:.3f}, {z:.1f} se")
