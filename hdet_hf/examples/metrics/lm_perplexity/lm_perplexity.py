"""Corpus perplexity from per-batch mean token losses, as an offline `evaluate` metric.

`evaluate.load("perplexity")` downloads a module and a model from the Hub; this one needs neither, because
the trainer already has the losses. Each input row is one batch: its mean token cross-entropy (`losses`,
in nats) and, optionally, how many tokens it averaged over (`num_tokens`). The result is the
token-weighted mean loss and `exp` of it. Without `num_tokens` every batch weighs the same.

Example:
    >>> from hdet_hf.examples.metrics import load_metric
    >>> ppl = load_metric("lm_perplexity")
    >>> result = ppl.compute(losses=[1.0, 3.0], num_tokens=[1, 3])
    >>> round(result["loss"], 6), round(result["perplexity"], 4)
    (2.5, 12.1825)
"""

from __future__ import annotations

import math
from typing import Any

import datasets
import evaluate

__all__ = ["LmPerplexity"]

_DESCRIPTION = "Token-weighted mean cross-entropy loss and its exponential (perplexity)."

_KWARGS_DESCRIPTION = """
Args:
    losses (`list` of `float`): mean token cross-entropy (natural log) of each batch.
    num_tokens (`list` of `int`, optional): number of tokens each loss averages over (the weights);
        every batch weighs 1 when omitted. Do not mix weighted and unweighted calls in one evaluation.
Returns:
    loss (`float`): sum(losses * num_tokens) / sum(num_tokens).
    perplexity (`float`): exp(loss); `inf` if that overflows.
Examples:
    >>> ppl.compute(losses=[2.0, 2.0])
    {'loss': 2.0, 'perplexity': 7.38905609893065}
"""


class LmPerplexity(evaluate.Metric):
    """Perplexity of a causal LM from the losses the training loop already computed (no model, no download).

    Example:
        >>> ppl = load_metric("lm_perplexity")  # doctest: +SKIP
        >>> ppl.add_batch(losses=[1.0], num_tokens=[1])  # doctest: +SKIP
        >>> ppl.compute(losses=[3.0], num_tokens=[3])["perplexity"]  # exp(2.5)  # doctest: +SKIP
        12.182493960703473
    """

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"losses": datasets.Value("float64"), "num_tokens": datasets.Value("int64")}
            ),
        )

    # evaluate requires every feature in every call; weights default to 1 so callers may omit them.
    def add_batch(self, *, losses: Any = None, num_tokens: Any = None, **kwargs: Any) -> None:
        """Add one or more batches' losses (and optional token counts)."""
        if losses is not None and num_tokens is None:
            num_tokens = [1] * len(losses)
        super().add_batch(losses=losses, num_tokens=num_tokens, **kwargs)

    def add(self, *, losses: Any = None, num_tokens: Any = None, **kwargs: Any) -> None:
        """Add a single batch's loss (and optional token count)."""
        if losses is not None and num_tokens is None:
            num_tokens = 1
        super().add(losses=losses, num_tokens=num_tokens, **kwargs)

    def compute(self, *, losses: Any = None, num_tokens: Any = None, **kwargs: Any) -> dict[str, Any] | None:
        """Return `{"loss", "perplexity"}` over everything added so far plus the `losses` given here."""
        if losses is not None and num_tokens is None:
            num_tokens = [1] * len(losses)
        return super().compute(losses=losses, num_tokens=num_tokens, **kwargs)

    def _compute(self, losses: list[float], num_tokens: list[int]) -> dict[str, float]:
        if len(losses) == 0:
            raise ValueError("Expected at least one loss, but got none; call add_batch(losses=...) first.")
        if any(n < 0 for n in num_tokens):
            raise ValueError(f"Expected non-negative num_tokens, but got {min(num_tokens)}.")
        total = sum(num_tokens)
        if total == 0:
            raise ValueError("Expected num_tokens to sum to a positive number, but the sum is 0.")
        loss = math.fsum(float(x) * n for x, n in zip(losses, num_tokens)) / total
        try:
            perplexity = math.exp(loss)
        except OverflowError:  # a diverged model: report inf rather than crash the evaluation
            perplexity = math.inf
        return {"loss": loss, "perplexity": perplexity}
