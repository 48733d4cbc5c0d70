"""What the experiment scripts share: the machine line, the results.jsonl reader, JSON-safe numbers.

`scripts/benchmark_quality.py` and `scripts/hparam_direction.py` write one JSON line per finished run and rebuild
their tables from the file, so a rerun can resume and a report can be redrawn without training.
"""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from typing import Any

__all__ = ["machine_info", "read_results", "finite_or_none", "rounded"]


def machine_info() -> str:
    """CPU model, logical cores, Python, torch and transformers versions, in one line."""
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} logical cores, Python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )


def read_results(path: Path) -> list[dict[str, Any]]:
    """The last record of each config name in a results.jsonl (later lines replace earlier ones)."""
    if not path.is_file():
        return []
    by_name: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            by_name.pop(record["name"], None)
            by_name[record["name"]] = record
    return list(by_name.values())


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (strict JSON has no NaN or inf).

    Example:
        >>> finite_or_none({"loss": float("nan"), "steps": [1.0, float("inf")]})
        {'loss': None, 'steps': [1.0, None]}
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def rounded(obj: Any, digits: int = 6) -> Any:
    """Floats to ``digits`` significant digits (keeps results.json readable and small)."""
    if isinstance(obj, float) and math.isfinite(obj):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj
