"""`hdet_hf.loss_signal` without processes: the per-item arithmetic and the test of a model's loss."""

import pytest
import torch

from hdet_hf.loss_signal import loss_divides_by_items, per_item_mean_loss


class Summed(torch.nn.Module):
    """A loss that divides its sum by ``num_items_in_batch`` (a causal LM in transformers 5)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x, num_items_in_batch=None):
        per_item = self.dropout(x * self.weight).pow(2).sum(-1)
        return per_item.sum() / num_items_in_batch if num_items_in_batch is not None else per_item.mean()


class Mean(Summed):
    """Takes the keyword but ignores it (BERT's classification heads)."""

    def forward(self, x, num_items_in_batch=None):
        return self.dropout(x * self.weight).pow(2).sum(-1).mean()


def compute_loss(model, inputs, num_items_in_batch=None):
    return model(inputs["x"], num_items_in_batch=num_items_in_batch)


@pytest.mark.parametrize(("model", "expected"), [(Summed(), True), (Mean(), False)])
def test_loss_divides_by_items_tells_a_sum_from_a_mean(model, expected):
    model.train()
    inputs = {"x": torch.arange(12.0).reshape(4, 3)}
    # Dropout is on in train mode; the test runs in eval mode so that the two forwards are comparable.
    assert loss_divides_by_items(compute_loss, model, inputs, torch.tensor(4)) is expected
    assert model.training, "the model's mode is restored"


def test_loss_divides_by_items_is_undecidable_on_a_zero_loss():
    inputs = {"x": torch.zeros(4, 3)}
    assert loss_divides_by_items(compute_loss, Summed(), inputs, torch.tensor(4)) is None


def test_per_item_mean_undoes_the_cross_device_normalisation():
    # 2 ranks; this rank holds 10 of the window's 40 tokens, summed loss 25 -> mean 2.5.
    loss = torch.tensor(2 * 25.0 / 40)
    mean, items = per_item_mean_loss(
        loss,
        local_items=torch.tensor(10),
        num_items_in_batch=torch.tensor(40),
        normalised_by_items=True,
        loss_scale=2,
        scaled_for_accumulation=True,
        accumulation_steps=1,
    )
    assert float(mean) == pytest.approx(2.5) and float(items) == 10
    # A plain mean (not normalised) divided by the Trainer for 2 accumulation steps.
    mean, items = per_item_mean_loss(
        torch.tensor(1.5),
        local_items=torch.tensor(7),
        num_items_in_batch=None,
        normalised_by_items=False,
        loss_scale=1,
        scaled_for_accumulation=False,
        accumulation_steps=2,
    )
    assert float(mean) == pytest.approx(3.0) and float(items) == 7
