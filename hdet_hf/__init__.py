"""hdet_hf: Hyperparameter-Divergent Ensemble Training for the Hugging Face stack."""

from .accelerate_api import HDETAccelerate
from .config import HDETConfig
from .schedule_metadata import HDETSchedule
from .schedulers import OneCycleAutoLR
from .trainer import HDETTrainer, HDETTrainerMixin
from .training_args import HDETTrainingArguments

__all__ = [
    "HDETConfig",
    "HDETTrainingArguments",
    "HDETTrainer",
    "HDETTrainerMixin",
    "HDETAccelerate",
    "OneCycleAutoLR",
    "HDETSchedule",
]
__version__ = "0.1.0"
