"""hdet_hf: Hyperparameter-Divergent Ensemble Training for the Hugging Face stack."""

from .accelerate_api import HDETAccelerate
from .config import HDETConfig
from .schedulers import OneCycleAutoLR
from .trainer import HDETTrainer
from .training_args import HDETTrainingArguments

__all__ = ["HDETConfig", "HDETTrainingArguments", "HDETTrainer", "HDETAccelerate", "OneCycleAutoLR"]
__version__ = "0.1.0"
