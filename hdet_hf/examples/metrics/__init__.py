"""Offline `evaluate` metrics shipped with hdet_hf.

`evaluate.load("perplexity")` fetches its module (and a model) from the Hub, which fails on offline
machines; these modules ship inside the package and load from their absolute path.

Example:
    >>> from hdet_hf.examples.metrics import load_metric
    >>> load_metric("lm_perplexity").compute(losses=[1.0, 3.0], num_tokens=[1, 3])["loss"]
    2.5
"""

from __future__ import annotations

from pathlib import Path

import evaluate

__all__ = ["AVAILABLE_METRICS", "load_metric", "metric_path"]

_METRICS_DIR = Path(__file__).resolve().parent

AVAILABLE_METRICS: tuple[str, ...] = ("lm_perplexity", "token_accuracy")


def metric_path(name: str) -> Path:
    """Absolute path of a shipped metric module's folder (what `evaluate.load` accepts).

    Example:
        >>> metric_path("token_accuracy").name
        'token_accuracy'
    """
    if name not in AVAILABLE_METRICS:
        raise ValueError(f"Unknown metric {name!r}; expected one of {list(AVAILABLE_METRICS)}.")
    return _METRICS_DIR / name


def load_metric(name: str, **kwargs: object) -> evaluate.EvaluationModule:
    """Load a shipped metric by name; works with `HF_HUB_OFFLINE=1`. `kwargs` go to `evaluate.load`.

    Example:
        >>> acc = load_metric("token_accuracy")
        >>> acc.compute(predictions=[1, 2], references=[1, -100])["accuracy"]
        1.0
    """
    # A local folder path makes evaluate import the script from disk instead of resolving a Hub id.
    return evaluate.load(str(metric_path(name)), **kwargs)
