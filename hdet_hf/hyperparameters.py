"""Scalar hyperparameters HDET can explore besides the learning rate, and how each reaches the model.

A `Hyperparameter` is a name, a spread, a base value, a legal range and a setter that applies this rank's
value. The engine owns the multipliers, the permutation (one per hyperparameter, so their signals do not
confound) and the controller; this module only knows where each value lives:

- weight decay: the optimizer's param groups that decay (no-decay groups stay at 0);
- dropout: every ``nn.Dropout`` module and the float attributes HF attention modules read at forward time
  (``attention_dropout`` in Llama-family attention; GPT-2 and BERT read their ``nn.Dropout`` modules' ``p``);
- label smoothing: the Trainer's ``LabelSmoother`` (also for causal LMs, where it shifts labels);
- attention temperature: the ``scaling`` of attention modules that expose it (Llama-family, GPT-2,
  Mistral, Qwen2, ...): logits are divided by the temperature.

Custom ones: any getter/setter pair, e.g.

    >>> import torch
    >>> from hdet_hf.hyperparameters import Hyperparameter
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    >>> hp = Hyperparameter("init_scale", spread=0.2, base=1.0, setter=lambda v: None, low=0.0)
    >>> hp.clip(-1.0)
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "Hyperparameter",
    "DROPOUT_ATTRIBUTES",
    "dropout_sites",
    "dropout_hyperparameter",
    "weight_decay_hyperparameter",
    "attention_temperature_hyperparameter",
    "label_smoothing_hyperparameter",
    "lr_param_groups",
]

# Float attributes read at forward time by HF attention implementations (checked on transformers 5.24:
# Llama/Mistral/Qwen2-family attention reads ``self.attention_dropout``; GPT-2 and BERT use nn.Dropout).
DROPOUT_ATTRIBUTES = ("attention_dropout",)
# Largest value for quantities whose legal range is [0, 1): keeps a multiplier from reaching 1.
BELOW_ONE = 0.95


@dataclass
class Hyperparameter:
    """One explored scalar. ``base`` is None for learning rates, whose base comes from the LR schedule."""

    name: str
    spread: float
    base: float | None = None
    setter: Callable[[float], None] | None = None
    auto: bool = False
    low: float = 0.0
    high: float = math.inf
    # Learning rates are handled by the engine's per-param-group machinery, not by a setter.
    is_lr: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.spread < 1.0:
            raise ValueError(f"Expected spread for {self.name!r} in [0, 1), but got {self.spread!r}")
        if self.auto and self.spread == 0:
            raise ValueError(f"Auto control of {self.name!r} needs a spread > 0 to measure a hypergradient")
        if not self.is_lr and (self.base is None or self.setter is None):
            raise ValueError(f"Hyperparameter {self.name!r} needs a base value and a setter")

    def clip(self, value: float) -> float:
        return min(max(value, self.low), self.high)


def dropout_sites(model: nn.Module) -> list[tuple[nn.Module, str, float]]:
    """Every place dropout is read at forward time: (module, attribute, configured probability)."""
    sites = []
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            sites.append((module, "p", float(module.p)))
        for attr in DROPOUT_ATTRIBUTES:
            value = getattr(module, attr, None)
            if isinstance(value, float) and not isinstance(value, bool):
                sites.append((module, attr, value))
    return sites


def dropout_hyperparameter(model: nn.Module, spread: float, auto: bool, base: float = 0.0) -> Hyperparameter:
    """Dropout, scaled relative to each site's configured probability (so their ratios are kept).

    With ``base > 0`` every site is first set to ``base``. A model whose dropout is 0 everywhere has nothing
    to spread around: that is refused with the fix.
    """
    sites = dropout_sites(model)
    if not sites:
        raise ValueError(
            f"--hdet_dropout_spread {spread}: {type(model).__name__} has no dropout modules or attention dropout "
            "attributes, so there is no dropout to explore (--hdet_dropout_base cannot add any)."
        )
    if base > 0:
        sites = [(module, attr, base) for module, attr, _ in sites]
    reference = max((p for _, _, p in sites), default=0.0)
    if reference == 0.0:
        raise ValueError(
            f"--hdet_dropout_spread {spread} explores nothing: {type(model).__name__} has "
            "dropout 0 everywhere, and a spread around 0 is 0. Pass --hdet_dropout_base 0.1 to set a base "
            "dropout first."
        )

    def set_dropout(value: float) -> None:
        for module, attr, configured in sites:
            setattr(module, attr, min(configured * value / reference, BELOW_ONE))

    return Hyperparameter("dropout", spread, base=reference, setter=set_dropout, auto=auto, high=BELOW_ONE)


def weight_decay_hyperparameter(
    optimizer: torch.optim.Optimizer, spread: float, auto: bool
) -> Hyperparameter:
    """Weight decay of the param groups that decay; their relative values are kept, no-decay groups stay 0."""
    configured = [float(g.get("weight_decay", 0.0)) for g in optimizer.param_groups]
    reference = max(configured, default=0.0)
    if reference == 0.0:
        raise ValueError(
            "--hdet_weight_decay_spread explores nothing: every param group has weight_decay 0. "
            "Pass --weight_decay 0.01 (or another base) first."
        )

    def set_weight_decay(value: float) -> None:
        for group, base in zip(optimizer.param_groups, configured):
            if base > 0:
                group["weight_decay"] = base * value / reference

    return Hyperparameter("weight_decay", spread, base=reference, setter=set_weight_decay, auto=auto)


def attention_temperature_hyperparameter(model: nn.Module, spread: float, auto: bool) -> Hyperparameter:
    """Temperature t of attention logits: ``scaling = head_dim**-0.5 / t`` on every attention module that
    exposes a float ``scaling`` attribute (Llama-family, GPT-2, Mistral, Qwen2, Gemma, ...)."""
    sites = [
        (module, float(module.scaling))
        for module in model.modules()
        if isinstance(getattr(module, "scaling", None), float) and "Attention" in type(module).__name__
    ]
    if not sites:
        raise ValueError(
            f"--hdet_attention_temperature_spread: {type(model).__name__} has no attention module with a float "
            "`scaling` attribute, so its attention temperature cannot be changed at run time. Supported: "
            "models whose attention modules expose a float `scaling` (Llama-family, GPT-2, BERT, DistilBERT, ...)."
        )

    def set_temperature(value: float) -> None:
        for module, scaling in sites:
            module.scaling = scaling / value

    return Hyperparameter(
        "attention_temperature", spread, base=1.0, setter=set_temperature, auto=auto, low=1e-3
    )


def label_smoothing_hyperparameter(trainer, spread: float, auto: bool) -> Hyperparameter:
    """Label smoothing through the Trainer's ``LabelSmoother`` (causal LMs included: it shifts labels)."""
    smoother = getattr(trainer, "label_smoother", None)
    if smoother is None or smoother.epsilon == 0:
        raise ValueError(
            "--hdet_label_smoothing_spread explores nothing: --label_smoothing_factor is 0, and a spread around 0 "
            "is 0. Pass --label_smoothing_factor 0.1 (or another base) first."
        )

    def set_label_smoothing(value: float) -> None:
        smoother.epsilon = value

    return Hyperparameter(
        "label_smoothing",
        spread,
        base=float(smoother.epsilon),
        setter=set_label_smoothing,
        auto=auto,
        high=BELOW_ONE,
    )


def lr_param_groups(model: nn.Module, decay_parameter_names: list[str], weight_decay: float) -> list[dict]:
    """The paper's LR groups: embeddings, no_decay (biases, norms), attention, rest (empty ones dropped)."""
    embedding_ids = set()
    for get in ("get_input_embeddings", "get_output_embeddings"):
        module = getattr(model, get, lambda: None)()
        if module is not None:
            embedding_ids.update(id(p) for p in module.parameters())
    if not embedding_ids:
        embedding_ids = {
            id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
        }
    decay = set(decay_parameter_names)
    buckets: dict[str, list[tuple[str, nn.Parameter]]] = {
        "embeddings": [],
        "no_decay": [],
        "attention": [],
        "rest": [],
    }
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if id(param) in embedding_ids:
            buckets["embeddings"].append((name, param))
        elif name not in decay:
            buckets["no_decay"].append((name, param))
        elif "attn" in name or "attention" in name:
            buckets["attention"].append((name, param))
        else:
            buckets["rest"].append((name, param))
    groups = []
    for group_name, members in buckets.items():
        if members:
            decays = group_name != "no_decay" and all(n in decay for n, _ in members)
            groups.append(
                {
                    "params": [p for _, p in members],
                    "weight_decay": weight_decay if decays else 0.0,
                    "name": group_name,
                }
            )
    return groups
