"""The controller's loss signal: each rank's per-item (per-token) mean loss, whatever the Trainer scaled.

`transformers.Trainer.training_step` returns the loss it back-propagates, not the loss it reports. With
``average_tokens_across_devices`` (the Trainer default) a causal LM's micro-batch loss is this rank's summed
token loss divided by the token count of the whole accumulation window *on all ranks*, times the number of
processes; without it, divided by this rank's window count; a model that does not take ``num_items_in_batch``
returns its own mean, divided by the accumulation steps. Compared across ranks as is, those numbers rank
replicas by their share of labelled tokens, not by loss (with ragged batches, e.g. any SFT set). This module
undoes that scaling with plain arithmetic so that the engine gets ``(mean loss, items)`` per micro-batch.

We mirror the Trainer's rules instead of recomputing the loss from the logits: recomputing would cost a second
cross-entropy over the vocabulary per micro-batch. `tests/test_loss_signal_distributed.py` checks the result
against a loss computed independently from the logits, so a change in the Trainer's rules fails a test.

Example:
    >>> import torch
    >>> # 30 of the window's 100 tokens (on 2 ranks) are here; the Trainer returns 2 x sum / 100.
    >>> mean, items = per_item_mean_loss(torch.tensor(2 * 45.0 / 100), local_items=torch.tensor(30),
    ...     num_items_in_batch=torch.tensor(100), normalised_by_items=True, loss_scale=2,
    ...     scaled_for_accumulation=True, accumulation_steps=1)
    >>> round(float(mean), 6), int(items)
    (1.5, 30)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["per_item_mean_loss", "count_label_items", "loss_divides_by_items"]

IGNORE_INDEX = -100


def count_label_items(inputs: Mapping[str, Any], shifts_labels: bool) -> torch.Tensor | None:
    """Labelled items of one micro-batch, counted as the Trainer counts ``num_items_in_batch``.

    Causal LM losses predict token t+1 from t, so the first position of ``labels`` is never a target
    (``shifts_labels``); a collator's ``shift_labels`` are used as given. None when there are no labels.
    """
    if "shift_labels" in inputs:
        labels = inputs["shift_labels"]
    elif "labels" in inputs:
        labels = inputs["labels"][..., 1:] if shifts_labels else inputs["labels"]
    else:
        return None
    if not isinstance(labels, torch.Tensor):
        return None
    return labels.ne(IGNORE_INDEX).sum()


def per_item_mean_loss(
    loss: torch.Tensor,
    *,
    local_items: torch.Tensor | int | None,
    num_items_in_batch: torch.Tensor | int | None,
    normalised_by_items: bool,
    loss_scale: float,
    scaled_for_accumulation: bool,
    accumulation_steps: int,
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """``(mean loss per item on this rank, items)`` for one micro-batch from the loss ``training_step`` returned.

    Args:
        loss: what ``training_step`` returned (detached).
        local_items: this rank's labelled items in the micro-batch (`count_label_items`); None if unknown.
        num_items_in_batch: the normaliser the Trainer passed to the loss (window items, all ranks when
            averaged across devices).
        normalised_by_items: whether the loss was divided by ``num_items_in_batch`` (the model or
            ``compute_loss_func`` took it).
        loss_scale: the factor the Trainer multiplied in after that division (the number of processes with
            ``average_tokens_across_devices``, else 1).
        scaled_for_accumulation: whether the loss was already scaled for accumulation (else the Trainer
            divided it by ``accumulation_steps``).

    A micro-batch with no labelled item returns weight 0 (the engine skips it).
    """
    value = loss.detach().to(torch.float64)
    if not scaled_for_accumulation:
        value = value * accumulation_steps
    if normalised_by_items and num_items_in_batch is not None and local_items is not None:
        local_sum = value / loss_scale * torch.as_tensor(num_items_in_batch, dtype=torch.float64)
        items = torch.as_tensor(local_items, dtype=torch.float64, device=value.device)
        return local_sum / items.clamp(min=1), items
    # The model's own mean over its items.
    if local_items is None:
        return value, 1.0
    return value, torch.as_tensor(local_items, dtype=torch.float64, device=value.device)


@torch.no_grad()
def loss_divides_by_items(
    compute_loss: Any, model: torch.nn.Module, inputs: Mapping[str, Any], num_items: Any
) -> bool | None:
    """Whether ``compute_loss(model, inputs, num_items_in_batch=...)`` really divides by ``num_items_in_batch``.

    The Trainer assumes so for every model whose ``forward`` takes ``**kwargs`` (transformers 5 gave most
    models one), but e.g. BERT's classification heads return a plain mean: the Trainer then multiplies that
    mean by the process count (losses and gradients N times too large) and the per-item arithmetic above
    would be wrong. Two forward passes on the same micro-batch, in eval mode so that dropout cannot tell
    them apart, with the normaliser doubled: a loss that divides by it halves. None when undecidable (no
    labelled item here, or a zero loss).
    """
    was_training = model.training
    model.eval()
    try:
        first = float(compute_loss(model, dict(inputs), num_items_in_batch=num_items))
        doubled = float(compute_loss(model, dict(inputs), num_items_in_batch=num_items * 2))
    finally:
        model.train(was_training)
    if not (math.isfinite(first) and math.isfinite(doubled)) or first == 0.0:
        return None
    return not math.isclose(first, doubled, rel_tol=1e-4)
