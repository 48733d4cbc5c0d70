"""scripts/controller_votes.py: each converge's two votes, as the controller computes them, and their agreement."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import controller_votes  # noqa: E402

from hdet_hf.controller import ControllerSettings, ControllerState, controller_step  # noqa: E402

MULTIPLIERS = [0.75, 0.9166666865348816, 1.0833333730697632, 1.25]


def test_each_vote_is_the_controllers_own_row_hypergradient():
    train, probe = [3.0, 3.1, 3.2, 3.3], [3.4, 3.3, 3.2, 3.0]
    settings = ControllerSettings(temperature=1.0, temperature_mode="adaptive", lr=1.0, momentum=0.0)
    _, info = controller_step(
        ControllerState(), torch.tensor(MULTIPLIERS), torch.tensor([train, probe]), settings, base_value=1.0
    )
    assert controller_votes.vote(train, MULTIPLIERS) == pytest.approx(info["row_deltas"][0])
    assert controller_votes.vote(probe, MULTIPLIERS) == pytest.approx(info["row_deltas"][1])
    assert info["row_deltas"][0] < 0 < info["row_deltas"][1]


def test_agreement_counts_converges_by_what_the_two_votes_ask_for():
    lower, higher, flat = [3.0, 3.1, 3.2, 3.3], [3.3, 3.2, 3.1, 3.0], [3.0, 3.0, 3.0, 3.0]
    row = {
        "syncs": [
            {"losses": higher, "probe_losses": higher, "multipliers": MULTIPLIERS},  # both raise
            {"losses": lower, "probe_losses": lower, "multipliers": MULTIPLIERS},  # both lower
            {"losses": lower, "probe_losses": higher, "multipliers": MULTIPLIERS},  # opposite
            {"losses": flat, "probe_losses": higher, "multipliers": MULTIPLIERS},  # one says nothing
            {"losses": higher, "probe_losses": [], "multipliers": MULTIPLIERS},  # controller did not act
        ]
    }
    counts = controller_votes.agreement(row)
    assert counts["converges"] == 4
    assert (counts["both_raise"], counts["both_lower"], counts["opposite"]) == (1, 1, 1)
    assert counts["train"] == "+-" + "-0" and counts["probe"] == "+-++"
