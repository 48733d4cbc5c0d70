"""hdet_hf: Hyperparameter-Divergent Ensemble Training for the Hugging Face stack.

The public names are imported on first use (PEP 562), as `transformers` does for its own: `HDETTrainer`
pulls in `transformers.Trainer` (about 5 s of CPU), which a process that only runs the engine, the
scheduler or the config never needs.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accelerate_api import HDETAccelerate
    from .config import HDETConfig
    from .probe_sample import probe_indices
    from .schedule_metadata import HDETSchedule
    from .schedulers import OneCycleAutoLR
    from .trainer import HDETTrainer, HDETTrainerMixin
    from .training_args import HDETTrainingArguments

# public name -> the submodule that defines it
_SOURCES = {
    "HDETConfig": "config",
    "HDETTrainingArguments": "training_args",
    "HDETTrainer": "trainer",
    "HDETTrainerMixin": "trainer",
    "HDETAccelerate": "accelerate_api",
    "OneCycleAutoLR": "schedulers",
    "HDETSchedule": "schedule_metadata",
    "probe_indices": "probe_sample",
}

__all__ = [
    "HDETConfig",
    "HDETTrainingArguments",
    "HDETTrainer",
    "HDETTrainerMixin",
    "HDETAccelerate",
    "OneCycleAutoLR",
    "HDETSchedule",
    "probe_indices",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _SOURCES:
        value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # `import hdet_hf; hdet_hf.hsdp...` worked while this file imported everything eagerly.
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
