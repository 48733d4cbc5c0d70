"""Weight decay, dropout, label smoothing, attention temperature, per-group LRs and custom scalars.

Without processes: the legal ranges (`Hyperparameter.clip` and each builder's setter), where each value lands in
a model/optimizer/loss, the param groups of ``--hdet_lr_groups``, and the errors that name their fix.
With 4 gloo processes (one launch, a tiny Llama then a tiny GPT-2 built from config): every rank's modules,
param groups, label smoother and attention really run with that rank's value at every step, the forward pass
changes accordingly on identical weights, permutations are shared by all ranks and independent per
hyperparameter, and every value is logged, recorded in ``hdet_schedule.json`` and drawn.
Three tests pin library bugs found here and since fixed (probe + label smoothing twice, values left per rank
after training). Last: ``scripts/hparam_direction.py`` (--help, report).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from distributed import load_ranks, torchrun
from torch import nn
from transformers import (
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MPNetConfig,
    MPNetForMaskedLM,
)
from transformers.trainer_pt_utils import LabelSmoother

from hdet_hf import HDETConfig, HDETTrainer, HDETTrainingArguments, plotting
from hdet_hf.controller import ControllerState
from hdet_hf.engine import HDETEngine
from hdet_hf.hyperparameters import (
    BELOW_ONE,
    Hyperparameter,
    attention_temperature_hyperparameter,
    dropout_hyperparameter,
    dropout_sites,
    label_smoothing_hyperparameter,
    lr_param_groups,
    weight_decay_hyperparameter,
)
from hdet_hf.schedule_metadata import HDETSchedule
from hdet_hf.spread import spread_multipliers

NPROC = 4
SPREAD = 0.5
LR_GROUPS = ["embeddings", "no_decay", "attention", "rest"]


# ------------------------------------------------------------------------------------------- models
def tiny_llama(attention_dropout: float = 0.0) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=32,
            attention_dropout=attention_dropout,
            bos_token_id=1,
            eos_token_id=2,
        )
    )


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(
        GPT2Config(
            n_embd=16,
            n_layer=2,
            n_head=2,
            vocab_size=64,
            n_positions=32,
            resid_pdrop=0.1,
            embd_pdrop=0.1,
            attn_pdrop=0.1,
            bos_token_id=1,
            eos_token_id=2,
        )
    )


def tiny_mpnet() -> MPNetForMaskedLM:
    """A family whose attention has no `scaling` attribute in transformers 5.24 (BERT's has one, see below)."""
    return MPNetForMaskedLM(
        MPNetConfig(
            vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    )


class TwoDropouts(nn.Module):
    """Sites with different configured probabilities, and an attention-style float attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Dropout(0.1)
        self.b = nn.Dropout(0.2)
        self.attn = nn.Module()
        self.attn.attention_dropout = 0.05


# ------------------------------------------------------------------------------- Hyperparameter.clip
def test_clip_keeps_values_in_the_legal_range():
    hp = Hyperparameter("x", spread=0.5, base=1.0, setter=lambda v: None, low=0.25, high=2.0)
    assert hp.clip(-3.0) == 0.25 and hp.clip(1.5) == 1.5 and hp.clip(1e9) == 2.0
    default = Hyperparameter("y", spread=0.5, base=1.0, setter=lambda v: None)
    assert default.clip(-1.0) == 0.0 and default.clip(1e300) == 1e300  # [0, inf) by default


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"spread": 1.0, "base": 1.0, "setter": print}, "spread for 'x' in [0, 1)"),
        ({"spread": -0.1, "base": 1.0, "setter": print}, "spread for 'x' in [0, 1)"),
        ({"spread": 0.0, "base": 1.0, "setter": print, "auto": True}, "needs a spread > 0"),
        ({"spread": 0.5, "setter": print}, "needs a base value and a setter"),
        ({"spread": 0.5, "base": 1.0}, "needs a base value and a setter"),
    ],
)
def test_hyperparameter_rejects_bad_definitions(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Hyperparameter("x", **kwargs)


# ------------------------------------------------------------------------------------------- dropout
def test_dropout_keeps_ratios_between_sites_and_never_reaches_the_cap():
    model = TwoDropouts()
    hp = dropout_hyperparameter(model, spread=0.5, auto=True)
    assert hp.base == 0.2 and hp.high == BELOW_ONE == 0.95  # reference = the largest configured site
    hp.setter(0.4)  # twice the reference: every site doubles
    assert (model.a.p, model.b.p, model.attn.attention_dropout) == pytest.approx((0.2, 0.4, 0.1))
    hp.setter(1e6)  # a huge value: each site is capped separately
    assert max(model.a.p, model.b.p, model.attn.attention_dropout) == BELOW_ONE
    assert hp.clip(7.0) == BELOW_ONE and hp.clip(-1.0) == 0.0


def test_dropout_cap_holds_through_the_engine_with_a_huge_controller_scale():
    model = tiny_gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine = HDETEngine(HDETConfig(sync_interval=2, lr_spread=0.0), model, optimizer, total_steps=4)
    engine.add_hyperparameter(dropout_hyperparameter(model, spread=0.9, auto=True, base=0.5))
    engine.controllers["dropout"] = ControllerState(scale=1e6)  # base x scale x multiplier = 5e5
    engine.apply_values()
    assert engine.value("dropout") == BELOW_ONE
    assert all(getattr(m, a) == BELOW_ONE for m, a, _ in dropout_sites(model))


def test_gpt2_dropout_sites_are_its_dropout_modules():
    sites = dropout_sites(tiny_gpt2())
    # embd drop + per layer (attn_dropout, resid_dropout, mlp.dropout); GPT-2 reads each module's `p`.
    assert len(sites) == 1 + 3 * 2 and {a for _, a, _ in sites} == {"p"}
    assert {p for _, _, p in sites} == {0.1}


def test_llama_attention_dropout_base_and_the_error_that_names_it():
    model = tiny_llama(attention_dropout=0.0)
    with pytest.raises(ValueError, match=r"dropout 0 everywhere.*--hdet_dropout_base 0\.1"):
        dropout_hyperparameter(model, spread=0.5, auto=False)
    hp = dropout_hyperparameter(model, spread=0.5, auto=False, base=0.1)
    assert hp.base == 0.1
    hp.setter(0.15)
    attention = [m for m in model.modules() if type(m).__name__ == "LlamaAttention"]
    assert len(attention) == 2 and all(m.attention_dropout == pytest.approx(0.15) for m in attention)


def test_model_without_any_dropout_is_refused():
    with pytest.raises(ValueError, match="no dropout modules"):
        dropout_hyperparameter(nn.Linear(2, 2), spread=0.5, auto=False)


# -------------------------------------------------------------------------------------- weight decay
def test_weight_decay_scales_decaying_groups_only_and_stays_non_negative():
    a, b, c = (nn.Parameter(torch.zeros(2)) for _ in range(3))
    optimizer = torch.optim.AdamW(
        [{"params": [a], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}, {"params": [c]}],
        lr=1e-3,
        weight_decay=0.05,
    )
    hp = weight_decay_hyperparameter(optimizer, spread=0.5, auto=True)
    assert hp.base == 0.1 and hp.low == 0.0
    hp.setter(0.2)
    assert [g["weight_decay"] for g in optimizer.param_groups] == pytest.approx([0.2, 0.0, 0.1])
    assert hp.clip(-0.5) == 0.0


def test_weight_decay_zero_everywhere_is_refused_with_the_fix():
    optimizer = torch.optim.AdamW([nn.Parameter(torch.zeros(2))], lr=1e-3, weight_decay=0.0)
    with pytest.raises(ValueError, match="--weight_decay 0.01"):
        weight_decay_hyperparameter(optimizer, spread=0.5, auto=False)


# ----------------------------------------------------------------------------- attention temperature
@pytest.mark.parametrize("build", [tiny_llama, tiny_gpt2])
def test_attention_temperature_divides_scaling_and_stays_positive(build):
    model = build()
    modules = [m for m in model.modules() if isinstance(getattr(m, "scaling", None), float)]
    original = [m.scaling for m in modules]
    assert len(modules) == 2 and original == pytest.approx([8**-0.5, 8**-0.5])  # head_dim 8
    hp = attention_temperature_hyperparameter(model, spread=0.5, auto=True)
    assert hp.base == 1.0
    hp.setter(2.0)
    assert [m.scaling for m in modules] == pytest.approx([s / 2.0 for s in original])
    assert hp.clip(-1.0) > 0 and hp.clip(0.0) > 0


def test_attention_temperature_without_scaling_is_refused():
    # BERT is no counterexample in transformers 5.24: BertSelfAttention has a float `scaling`.
    bert = BertForMaskedLM(
        BertConfig(
            vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    )
    assert attention_temperature_hyperparameter(bert, spread=0.5, auto=False).base == 1.0
    for model in (tiny_mpnet(), nn.Sequential(nn.Linear(4, 4))):
        with pytest.raises(ValueError, match="--hdet_attention_temperature_spread.*float `scaling`"):
            attention_temperature_hyperparameter(model, spread=0.5, auto=False)


# ---------------------------------------------------------------------------------- label smoothing
class _HasSmoother:
    def __init__(self, smoother):
        self.label_smoother = smoother


def test_label_smoothing_sets_the_smoother_and_stays_below_one():
    holder = _HasSmoother(LabelSmoother(epsilon=0.1))
    hp = label_smoothing_hyperparameter(holder, spread=0.5, auto=True)
    assert hp.base == 0.1
    hp.setter(0.15)
    assert holder.label_smoother.epsilon == 0.15
    assert hp.clip(3.0) == BELOW_ONE < 1.0 and hp.clip(-1.0) == 0.0


@pytest.mark.parametrize("smoother", [None, LabelSmoother(epsilon=0.0)])
def test_label_smoothing_factor_zero_is_refused_with_the_fix(smoother):
    with pytest.raises(ValueError, match="--label_smoothing_factor 0.1"):
        label_smoothing_hyperparameter(_HasSmoother(smoother), spread=0.5, auto=False)


# ------------------------------------------------------------------------------------- lr_param_groups
@pytest.mark.parametrize("build", [tiny_llama, tiny_gpt2])
def test_lr_param_groups_partition_the_parameters(build):
    model = build()
    decay = [
        n
        for n, _ in model.named_parameters()
        if not n.endswith("bias") and "norm" not in n and "ln_" not in n
    ]
    groups = lr_param_groups(model, decay, weight_decay=0.1)
    assert [g["name"] for g in groups] == LR_GROUPS
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len({id(p) for p in model.parameters()})  # each exactly once
    by_name = {g["name"]: g for g in groups}
    assert by_name["no_decay"]["weight_decay"] == 0.0
    assert all(by_name[n]["weight_decay"] == 0.1 for n in ("embeddings", "attention", "rest"))
    assert id(model.get_input_embeddings().weight) in {id(p) for p in by_name["embeddings"]["params"]}
    names = {id(p): n for n, p in model.named_parameters()}
    assert all("attn" in names[id(p)] for p in by_name["attention"]["params"])


# ---------------------------------------------------------------------- trainer errors (one process)
def _trainer(tmp_path, model, **overrides) -> HDETTrainer:
    args = dict(
        output_dir=str(tmp_path / "out"),
        hdet=True,
        hdet_sync_interval=2,
        hdet_gradient_sync="local",  # dropout, label smoothing and temperature are explored in local mode only
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )
    args.update(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HDETTrainer(model=model, args=HDETTrainingArguments(**args))


def _set_up(trainer: HDETTrainer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "HDET runs on a single process"
        trainer.create_optimizer_and_scheduler(num_training_steps=8)


@pytest.mark.parametrize(
    "model, flags, message",
    [
        (tiny_llama, {"hdet_dropout_spread": 0.5}, r"dropout 0 everywhere.*Pass --hdet_dropout_base 0\.1"),
        (tiny_gpt2, {"hdet_label_smoothing_spread": 0.5}, r"--label_smoothing_factor is 0.*0\.1"),
        (tiny_gpt2, {"hdet_weight_decay_spread": 0.5, "weight_decay": 0.0}, r"Pass --weight_decay 0\.01"),
        (tiny_mpnet, {"hdet_attention_temperature_spread": 0.5}, r"MPNetForMaskedLM has no attention module"),
    ],
    ids=["llama-dropout-0", "label-smoothing-0", "weight-decay-0", "mpnet-temperature"],
)
def test_trainer_refuses_a_spread_around_nothing(tmp_path, model, flags, message):
    trainer = _trainer(tmp_path, model(), **flags)
    with pytest.raises(ValueError, match=message):
        _set_up(trainer)


def test_trainer_with_dropout_base_sets_llama_attention_dropout(tmp_path):
    trainer = _trainer(tmp_path, tiny_llama(), hdet_dropout_spread=0.5, hdet_dropout_base=0.2)
    _set_up(trainer)
    # One process: multiplier 1, so every site runs at the base.
    values = [getattr(m, a) for m, a, _ in dropout_sites(trainer.model)]
    assert len(values) == 2 and values == pytest.approx([0.2, 0.2])


# -------------------------------------------------- probe signal with label smoothing (library bugs)
def _probe_trainer(tmp_path) -> HDETTrainer:
    ids = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(0)).tolist()
    data = [{"input_ids": x, "labels": x} for x in ids]
    trainer = _trainer(
        tmp_path,
        tiny_gpt2(),
        label_smoothing_factor=0.1,
        hdet_label_smoothing_spread=0.5,
        hdet_label_smoothing_auto=True,
        hdet_controller_signal="probe",
    )
    trainer.eval_dataset = data
    _set_up(trainer)
    return trainer


def test_probe_can_be_scored_twice_with_label_smoothing(tmp_path):
    probe = _probe_trainer(tmp_path).hdet_engine.probe_fn
    assert probe() == probe()


def test_probe_loss_does_not_depend_on_this_ranks_label_smoothing(tmp_path):
    trainer = _probe_trainer(tmp_path)
    scores = []
    for epsilon in (0.05, 0.15):
        trainer.label_smoother.epsilon = epsilon
        scores.append(trainer._make_probe_fn(8)())  # a fresh batch each time (see the test above)
    assert scores[0] == pytest.approx(scores[1])


# ====================================================================== 4 processes, Llama and GPT-2
COMMON = [
    "--hdet",
    "--hdet_gradient_sync",
    "local",
    "--hdet_lr_spread",
    str(SPREAD),
    "--hdet_lr_groups",
    "--hdet_sync_interval",
    "2",
    "--hdet_controller_time_scale",  # a vote at every converge (T 2 is shorter than the default interval)
    "run",
    "--max_steps",
    "8",
    "--per_device_train_batch_size",
    "4",
    "--learning_rate",
    "1e-2",
    "--weight_decay",
    "0.1",
    "--hdet_weight_decay_spread",
    str(SPREAD),
    "--hdet_weight_decay_auto",
    "--hdet_dropout_spread",
    str(SPREAD),
    "--hdet_dropout_auto",
    "--hdet_attention_temperature_spread",
    str(SPREAD),
    "--hdet_attention_temperature_auto",
    "--hdet_auto_lr_warmup_steps",
    "2",
    # Every value explored at every step (the default ends exploration halfway).
    "--hdet_explore_until",
    "1",
    "--report_to",
    "none",
    "--use_cpu",
    "--seed",
    "0",
    "--disable_tqdm",
    "true",
    "--save_strategy",
    "no",
    "--logging_steps",
    "1000",
]
# Llama has no dropout configured (base 0.1 set by the flag) and explores label smoothing; GPT-2 keeps its own
# dropout (0.1 everywhere) and uses the probe signal (label smoothing is covered by the probe tests above).
LLAMA_FLAGS = "--hdet_dropout_base 0.1 --label_smoothing_factor 0.1 --hdet_label_smoothing_spread 0.5 --hdet_label_smoothing_auto"
GPT2_FLAGS = "--hdet_controller_signal probe"
FAMILIES = ["llama", "gpt2"]
NON_LR = {
    "llama": ["weight_decay", "dropout", "label_smoothing", "attention_temperature", "custom_scale"],
    "gpt2": ["weight_decay", "dropout", "attention_temperature", "custom_scale"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hparams")
    torchrun(
        "hparam_worker.py",
        NPROC,
        [
            "--families",
            ",".join(FAMILIES),
            "--dump_dir",
            str(root / "dump"),
            "--out_root",
            str(root / "out"),
            "--llama_flags",
            LLAMA_FLAGS,
            "--gpt2_flags",
            GPT2_FLAGS,
            "--with_eval",
            *COMMON,
        ],
        timeout=420,
    )
    return {
        family: {"ranks": load_ranks(root / "dump" / family, NPROC), "out": root / "out" / family}
        for family in FAMILIES
    }


def _value(step: dict, name: str) -> float:
    return step["bases"][name] * step["multipliers"][name]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_rank_runs_its_own_value_at_every_step(runs, family):
    ranks = runs[family]["ranks"]
    neutral = ranks[0]["neutral_scaling"]
    assert [r["world_size"] for r in ranks] == [NPROC] * NPROC
    assert list(ranks[0]["hparams"]) == [f"lr/{g}" for g in LR_GROUPS] + NON_LR[family]
    for k in range(8):
        steps = [r["steps"][k] for r in ranks]
        assert {s["step"] for s in steps} == {k + 1}
        for name in ranks[0]["hparams"]:
            # Each hyperparameter: the 4 slots 1 -/+ spread over the ranks, around one shared base.
            assert sorted(s["multipliers"][name] for s in steps) == pytest.approx(
                spread_multipliers(NPROC, SPREAD)
            )
        for s in steps[1:]:
            assert s["bases"] == steps[0]["bases"] and s["lr_bases"] == steps[0]["lr_bases"]
        for s in steps:
            dropout, wd = _value(s, "dropout"), _value(s, "weight_decay")
            # Dropout: every site (Llama's attention_dropout attributes, GPT-2's nn.Dropout.p).
            assert s["dropout"] == pytest.approx([dropout] * len(s["dropout"])) and len(s["dropout"]) >= 2
            # Weight decay in the decaying groups, 0 in no_decay; LR = group base x the group's own multiplier.
            for (group, lr, decay), base_lr in zip(s["groups"], s["lr_bases"]):
                assert decay == (0.0 if group == "no_decay" else pytest.approx(wd))
                assert lr == pytest.approx(base_lr * s["multipliers"][f"lr/{group}"])
            temperature = _value(s, "attention_temperature")
            assert s["scaling"] == pytest.approx([x / temperature for x in neutral])
            assert s["custom"] == pytest.approx(_value(s, "custom_scale"))
            if family == "llama":
                assert s["epsilon"] == pytest.approx(_value(s, "label_smoothing"))
        # Four ranks, four different values of each explored quantity in the same step.
        assert len({s["dropout"][0] for s in steps}) == NPROC
        assert len({s["scaling"][0] for s in steps}) == NPROC
        assert len({s["groups"][0][2] for s in steps}) == NPROC


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_lr_groups_are_the_papers_groups_with_their_own_multipliers(runs, family):
    r = runs[family]["ranks"][0]
    assert [g[0] for g in r["steps"][0]["groups"]] == LR_GROUPS
    members = dict(zip(LR_GROUPS, r["group_members"]))
    assert sorted(n for g in r["group_members"] for n in g) == sorted(r["all_params"])
    assert "lm_head.weight" in members["embeddings"] or "transformer.wte.weight" in members["embeddings"]
    assert all(n not in r["decay_names"] for n in members["no_decay"])
    assert all("attn" in n for n in members["attention"])
    # On one rank, in one step, the four groups run under different multipliers (independent permutations).
    assert any(len({s["multipliers"][f"lr/{g}"] for g in LR_GROUPS}) > 1 for s in r["steps"])


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_forward_pass_changes_with_each_ranks_values_on_identical_weights(runs, family):
    ranks = runs[family]["ranks"]
    neutral = ranks[0]["neutral_scaling"]
    converges = [[r["converges"][i] for r in ranks] for i in range(len(ranks[0]["converges"]))]
    assert [c[0]["step"] for c in converges] == [2, 4, 6, 8]
    for conv in converges:
        for c in conv[1:]:
            assert torch.equal(c["params"], conv[0]["params"])  # same weights on every rank
            # Same weights, same temperature: same eval logits. Each rank's own temperature: different ones.
            assert torch.equal(c["eval_logits_neutral"], conv[0]["eval_logits_neutral"])
            assert c["nll_neutral"] == conv[0]["nll_neutral"]
        for i in range(NPROC):
            for j in range(i + 1, NPROC):
                assert not torch.equal(conv[i]["eval_logits"], conv[j]["eval_logits"])
        # Temperature (eval mode, no dropout): the logits move away from the neutral ones the further this
        # rank's scaling is from the neutral scaling (small-logit regime of a freshly initialised model).
        change = [abs(c["scaling"][0] / neutral[0] - 1) for c in conv]
        moved = [float((c["eval_logits"] - c["eval_logits_neutral"]).abs().max()) for c in conv]
        assert min(moved) > 0 and [m for _, m in sorted(zip(change, moved))] == sorted(moved), (change, moved)
        # Dropout (train mode, same seeds, same weights): the output moves further from eval mode the higher
        # this rank's dropout.
        by_dropout = sorted(conv, key=lambda c: c["dropout_sites"][0])
        deviation = [sum(c["train_deviation"]) / len(c["train_deviation"]) for c in by_dropout]
        assert deviation == sorted(deviation) and deviation[0] < deviation[-1], deviation
        for c in conv:
            # GPT-2's nn.Dropout modules zero the fraction p of their inputs that this rank set.
            for index, fraction in c["zero_fraction"].items():
                assert fraction == pytest.approx(c["dropout_p"][index], abs=0.03)
            assert len(c["zero_fraction"]) == (5 if family == "gpt2" else 0)  # attn_dropout runs inside SDPA
        if family == "llama":
            # The Trainer's loss on the same logits is (1 - eps) * NLL + eps * smooth term: linear in this
            # rank's epsilon, with one slope shared by all ranks.
            epsilons = [c["epsilon"] for c in conv]
            slopes = [(c["trainer_loss_neutral"] - c["nll_neutral"]) / c["epsilon"] for c in conv]
            assert len(set(epsilons)) == NPROC
            assert slopes == pytest.approx([slopes[0]] * NPROC, rel=1e-3) and slopes[0] != 0
        else:
            assert all(c["trainer_loss_neutral"] == pytest.approx(c["nll_neutral"]) for c in conv)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_permutations_are_shared_by_all_ranks_and_independent_per_hyperparameter(runs, family):
    ranks = runs[family]["ranks"]
    names = list(ranks[0]["hparams"])
    history = []
    for i in range(len(ranks[0]["converges"])):
        perms = [r["converges"][i]["permutations"] for r in ranks]
        assert all(p == perms[0] for p in perms[1:])  # identical on every rank, with no communication
        assert set(perms[0]) == set(names)
        history.append(perms[0])
        # Independent draws: at this converge some hyperparameters got different permutations.
        assert len({tuple(p) for p in perms[0].values()}) >= 2
    for name in names:
        assert len({tuple(h[name]) for h in history}) >= 2, name  # reassigned over the run
    for k in range(8):
        assert all(r["steps"][k]["permutations"] == ranks[0]["steps"][k]["permutations"] for r in ranks)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_custom_hyperparameter_end_to_end(runs, family):
    ranks = runs[family]["ranks"]
    schedule = json.loads((runs[family]["out"] / "hdet_schedule.json").read_text())
    for r in ranks:
        # The setter received this rank's value: once at registration (base x multiplier of the first
        # permutation) and after each regular converge.
        assert len(r["custom_calls"]) >= 1 + 4
        assert [s["custom"] for s in r["steps"]] == pytest.approx(
            [_value(s, "custom_scale") for s in r["steps"]]
        )
    assert len({r["custom_calls"][0] for r in ranks}) == NPROC
    assert schedule["values_per_step"]["custom_scale"] == pytest.approx(
        [s["bases"]["custom_scale"] for s in ranks[0]["steps"]]
    )
    assert all(
        "custom_scale" in t["base"] and len(t["multipliers"]["custom_scale"]) == NPROC
        for t in schedule["trajectory"]
    )
    # auto=True: the controller moved it.
    assert schedule["values_per_step"]["custom_scale"][-1] != 2.0


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_value_is_logged_recorded_and_plotted(runs, family, monkeypatch):
    r = runs[family]["ranks"][0]
    out = runs[family]["out"]
    schedule = json.loads((out / "hdet_schedule.json").read_text())
    assert (out / "hdet_schedule.png").stat().st_size > 0
    assert schedule["hyperparameters"] == list(r["hparams"])
    assert schedule["param_group_names"] == LR_GROUPS
    trajectory = schedule["trajectory"]
    assert [t["step"] for t in trajectory] == [2, 4, 6, 8]
    logs = [h for h in r["log_history"] if any(k.startswith("hdet/base_") for k in h)]
    assert [h["step"] for h in logs] == [2, 4, 6, 8]
    for name in NON_LR[family]:
        values = schedule["values_per_step"][name]
        assert len(values) == 8 and values == pytest.approx([s["bases"][name] for s in r["steps"]])
        for entry, log in zip(trajectory, logs):
            assert log[f"hdet/base_{name}"] == pytest.approx(entry["base"][name])
            assert entry["base"][name] == pytest.approx(values[entry["step"] - 1])
            assert sorted(entry["multipliers"][name]) == pytest.approx(spread_multipliers(NPROC, SPREAD))
        assert any(entry["controller_active"] and entry["delta"].get(name) for entry in trajectory)
    if family == "gpt2":
        assert all(len(t["probe_losses"]) == NPROC for t in trajectory if t["controller_active"])

    # The third panel of the plot draws every non-LR hyperparameter.
    figures = []

    class Recording(plotting.Figure):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            figures.append(self)

    monkeypatch.setattr(plotting, "Figure", Recording)
    plotting.plot_schedule(schedule, out / "replot.png")
    axes = figures[0].axes
    panel = next(ax for ax in axes if ax.get_title().startswith("Other explored hyperparameters"))
    labels = [line.get_label() for line in panel.get_lines()]
    assert all(name in labels for name in NON_LR[family])
    for name in NON_LR[family]:
        line = next(line for line in panel.get_lines() if line.get_label() == name)
        assert list(line.get_ydata()) == pytest.approx(schedule["values_per_step"][name])


@pytest.mark.slow
def test_after_training_every_rank_runs_the_base_values(runs):
    ranks = runs["llama"]["ranks"]
    neutral = ranks[0]["neutral_scaling"]
    for r in ranks:
        base = r["after_train"]["base_values"]
        assert r["after_train"]["scaling"] == pytest.approx(
            [s / base["attention_temperature"] for s in neutral]
        )
        assert r["after_train"]["epsilon"] == pytest.approx(base["label_smoothing"])


def test_plot_draws_values_recorded_only_at_syncs(tmp_path, monkeypatch):
    """Schedules without `values_per_step` (trajectory only) still get their third panel."""
    schedule = HDETSchedule(
        world_size=2,
        total_steps=4,
        sync_interval=2,
        lr_per_step=[[1e-3]] * 4,
        trajectory=[
            {
                "step": s,
                "base": {"lr": 1e-3, "dropout": d},
                "multipliers": {"lr": [0.5, 1.5], "dropout": [1.5, 0.5]},
            }
            for s, d in ((2, 0.1), (4, 0.12))
        ],
    )
    figures = []

    class Recording(plotting.Figure):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            figures.append(self)

    monkeypatch.setattr(plotting, "Figure", Recording)
    plotting.plot_schedule(schedule, tmp_path / "schedule.png")
    panel = figures[0].axes[-1]
    assert panel.get_title().startswith("Other explored hyperparameters")
    (line,) = [ln for ln in panel.get_lines() if ln.get_label() == "dropout"]
    assert list(line.get_xdata()) == [2, 4] and list(line.get_ydata()) == pytest.approx([0.1, 0.12])


# --------------------------------------------------------------------------- scripts/hparam_direction.py
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "hparam_direction.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("hparam_direction", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hparam_direction_help():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for flag in (
        "--quick",
        "--regimes",
        "--hparams",
        "--controller_signals",
        "--ground_truth",
        "--num_processes",
    ):
        assert flag in proc.stdout


def test_hparam_direction_judges_the_move_against_the_local_ground_truth(tmp_path):
    script = _load_script()
    assert script.overfit_split(0, 8, chunk=2) == ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9], [10, 11])

    def fixed(kind, value, loss):
        return {
            "name": f"{kind}{value}",
            "regime": "overfit",
            "hparam": "dropout",
            "kind": kind,
            "value": value,
            "test_loss": loss,
            "train_loss": 1.0,
            "train_loss_curve": [[10, 1.0]],
            "epochs": 25.0,
        }

    def hdet(signal, final, seed=0):
        multipliers = [0.5, 1.5]
        # Probe losses where the higher multiplier scored better: correlation -1 at every converge.
        syncs = [
            {
                "step": k,
                "multipliers": multipliers,
                "losses": [2.0, 2.1],
                "probe_losses": [3.1, 3.0],
                "active": True,
            }
            for k in (10, 20, 30, 40)
        ]
        return {
            "name": f"hdet_{signal}_s{seed}",
            "regime": "overfit",
            "hparam": "dropout",
            "kind": "hdet",
            "value": 0.1,
            "signal": signal,
            "hdet_seed": seed,
            "test_loss": 3.0,
            "start": 0.1,
            "final": final,
            "values_per_step": [0.1, final],
            "null_ratios": [0.9, 1.5],
            "null_values_per_step": [[1.0, 0.9], [1.0, 1.5]],
            "syncs": syncs,
        }

    records = [fixed("ddp", 0.0, 4.0), fixed("ddp", 0.1, 3.5), fixed("ddp", 0.3, 3.6)]
    records += [fixed("local", 0.0, 4.0), fixed("local", 0.1, 3.6), fixed("local", 0.3, 3.4)]
    records += [
        hdet("probe", 0.2, 0),
        hdet("probe", 0.12, 1),
        hdet("probe", 0.08, 2),
        hdet("train_loss", 0.0102),
    ]
    rows = {row["signal"]: row for row in script.analyse(records)}
    probe, train = rows["probe"], rows["train_loss"]
    assert probe["ddp_truth"] == "flat" and probe["local_truth"] == "up" and probe["truth"] == "up"
    assert probe["moved"] == ["up", "up", "down"] and probe["right"] == 2
    assert probe["median_ratio"] == pytest.approx(1.2) and not probe["beyond_noise"]  # inside x0.9..x1.5
    assert train["moved"] == ["down"] and train["right"] == 0 and train["beyond_noise"]  # x0.1
    assert probe["correlation"][0] == pytest.approx(-1.0)
    assert script.direction(1.04) == "flat"
    with open(tmp_path / script.RESULTS_JSONL, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    content = script.write_report(tmp_path, {"command": "x", "date": "2026-11-29"})
    assert len(content["summary"]) == 2
    assert (
        "| overfit | dropout | probe | 0.1 / 0.3 | up | 0.1 | x2.00, x1.20, x0.80 | 2/3 |"
        in (tmp_path / "results.md").read_text()
    )
    assert (tmp_path / "base_overfit.png").stat().st_size > 0
