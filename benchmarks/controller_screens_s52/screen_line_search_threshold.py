"""Session 52 screen, on recorded runs only (no training): does a line-search threshold below 4 separate a start far
below the best LR from the best LR?

Task j from 10x below reads the probe's line-search optimum m* at 3.0-3.2 at its first fit (reading 54), under the
default's threshold 4. For every unique recorded run of a setting with the line search (`_ls4` in its row name), this
prints, per start, how the largest min(m*_t, m*_{t-1}) over consecutive converges before 30 % of the run is spread
(the quantity a lower threshold would act on). Run from the repository root:
python benchmarks/controller_screens_s52/screen_line_search_threshold.py
"""

import collections
import math

from recorded import recorded_rows


def number(x):
    if isinstance(x, str):
        return math.inf if x.lower().startswith("inf") else float(x)
    return math.inf if x is not None and x != x else x


runs = {}
for _, row in recorded_rows():
    if row.get("kind") != "hdet" or not row.get("syncs") or row.get("race_only") or "ls4" not in row["name"]:
        continue
    key = (row["name"], row.get("eval_loss"))
    if key in runs:
        continue
    steps = row.get("steps") or 1
    reads = [(s["step"] / steps, number(s.get("line_search_optimum"))) for s in row["syncs"]]
    largest = 0.0
    for (_, a), (t, b) in zip(reads, reads[1:]):
        if t > 0.3:
            break
        if a is not None and b is not None and a == a and b == b:
            largest = max(largest, min(a, b))
    runs[key] = (row.get("start"), largest)

bins = ((0, 1), (1, 2), (2, 2.5), (2.5, 3), (3, 4), (4, math.inf))
by_start = collections.defaultdict(list)
for start, largest in runs.values():
    by_start[start].append(largest)
print("start | runs | " + " | ".join(f"[{lo:g}, {hi:g})" for lo, hi in bins))
for start, values in sorted(by_start.items(), key=lambda kv: str(kv[0])):
    cells = [sum(lo <= v < hi for v in values) for lo, hi in bins]
    print(f"{start} | {len(values)} | " + " | ".join(map(str, cells)))
