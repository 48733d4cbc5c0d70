"""Next-token accuracy for causal LMs, as an offline `evaluate` metric.

Inputs are flat lists of token ids. The caller aligns them: for a causal LM the logits at position `i`
predict the label at `i + 1`, so pass `predictions = logits.argmax(-1)[:, :-1].flatten()` and
`references = labels[:, 1:].flatten()` (as HF's run_clm.py does). References equal to -100 (padding,
masked prompt) are ignored.

Example:
    >>> from hdet_hf.examples.metrics import load_metric
    >>> acc = load_metric("token_accuracy")
    >>> acc.compute(predictions=[5, 6, 7, 8], references=[5, 0, 7, -100])
    {'accuracy': 0.6666666666666666, 'num_tokens': 3}
"""

from __future__ import annotations

import datasets
import evaluate

__all__ = ["IGNORE_INDEX", "TokenAccuracy"]

IGNORE_INDEX = -100  # the label value torch.nn.CrossEntropyLoss and HF models skip

_DESCRIPTION = "Fraction of predicted token ids equal to the reference ids, ignoring references of -100."

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted token ids (already shifted to line up with `references`).
    references (`list` of `int`): target token ids; -100 marks positions to ignore.
Returns:
    accuracy (`float`): correct / counted positions.
    num_tokens (`int`): number of counted positions (references != -100).
Examples:
    >>> acc.compute(predictions=[1, 2], references=[1, 3])
    {'accuracy': 0.5, 'num_tokens': 2}
"""


class TokenAccuracy(evaluate.Metric):
    """Next-token accuracy over non-ignored positions (no download).

    Example:
        >>> acc = load_metric("token_accuracy")  # doctest: +SKIP
        >>> acc.compute(predictions=[1, 2, 3], references=[1, 2, -100])["accuracy"]  # doctest: +SKIP
        1.0
    """

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions: list[int], references: list[int]) -> dict[str, float | int]:
        counted = [(p, r) for p, r in zip(predictions, references, strict=True) if r != IGNORE_INDEX]
        if not counted:
            raise ValueError(
                f"Expected at least one reference other than {IGNORE_INDEX}, but all {len(references)} "
                "were ignored."
            )
        correct = sum(p == r for p, r in counted)
        return {"accuracy": correct / len(counted), "num_tokens": len(counted)}
