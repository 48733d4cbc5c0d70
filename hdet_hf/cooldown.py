"""Score a replica by the loss it would reach if its run ended now: a short LR cool-down on cloned state.

The window train loss ranks replicas by where they are *now*, so the noise that a larger step adds (and that
the run's final decay removes) counts against it: short-horizon bias (arXiv 1803.02021). A constant LR
followed by a short cool-down reaches the loss of a full decay (arXiv 2405.18392), so the loss *after* a few
cool-down steps is a cheap estimate of each replica's end-of-run loss. Here every replica:

1. swaps its trainable parameters and its optimizer state for copies (the real ones are untouched),
2. takes ``steps`` optimizer steps at its current LR times ``(steps - i) / (steps + 1)`` (linear to 0) on
   cool-down batches that are the same on every rank (a paired comparison), with its *own* gradients (no
   gradient sync: each replica follows its own cool-down),
3. is scored by the probe (a held-out batch, also the same on every rank),
4. gets its real parameters, gradients, optimizer state and LRs back.

Nothing here communicates. The shell supplies the two callables: ``loss_fn(i)`` (the training loss of the
unwrapped model on cool-down batch ``i``, with its autograd graph) and ``probe()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch

__all__ = ["cooldown_lr_factors", "cooldown_score", "on_copies"]


def cooldown_lr_factors(steps: int) -> list[float]:
    """LR factors of a linear cool-down to 0 over ``steps`` steps (the last step still moves)."""
    if steps < 1:
        raise ValueError(f"Expected at least one cool-down step, but got {steps}")
    return [(steps - i) / (steps + 1) for i in range(steps)]


@contextlib.contextmanager
def on_copies(params: Sequence[torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> Iterator[None]:
    """Inside: ``params`` hold copies of their values and the optimizer copies of their state. On exit (also
    on an error) the real tensors, gradients, optimizer state and param-group LRs are back, untouched."""
    saved_data = [p.data for p in params]
    saved_grad = [p.grad for p in params]
    saved_state = {p: optimizer.state[p] for p in params if p in optimizer.state}
    saved_lrs = [group["lr"] for group in optimizer.param_groups]
    try:
        for p in params:
            # Swap storage for a copy rather than copying values back later: the real tensor is never written.
            p.data = p.data.clone()
            if p in saved_state:
                optimizer.state[p] = {
                    k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in saved_state[p].items()
                }
        yield
    finally:
        for p, data, grad in zip(params, saved_data, saved_grad):
            p.data = data
            p.grad = grad
            if p in saved_state:
                optimizer.state[p] = saved_state[p]
            else:
                optimizer.state.pop(p, None)
        for group, lr in zip(optimizer.param_groups, saved_lrs):
            group["lr"] = lr


def cooldown_score(
    params: Sequence[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[int], torch.Tensor],
    probe: Callable[[], float],
    steps: int,
    max_grad_norm: float | None = None,
    lr_scale: float = 1.0,
) -> float:
    """``probe()`` after ``steps`` cool-down steps taken on copies of ``params`` and their optimizer state.

    Gradients come from ``torch.autograd.grad``, not ``backward()``: nothing accumulates into ``.grad`` through
    autograd, so a DDP wrapper's gradient hooks never fire (no gradient sync, no half-finished reducer).
    The cool-down starts from the current LRs times ``lr_scale``. ``max_grad_norm`` clips like the training
    loop does. Parameters, gradients, optimizer state, LRs and the
    random stream are restored afterwards, also when ``loss_fn`` raises.
    """
    params = [p for p in params if p.requires_grad]
    owned = set(map(id, params))
    # Parameters the optimizer holds that are not ours (frozen, another module's) must not move in the cool-down.
    others = [p for group in optimizer.param_groups for p in group["params"] if id(p) not in owned]
    base_lrs = [group["lr"] * lr_scale for group in optimizer.param_groups]
    # Dropout in the cool-down must not shift the random stream that the real training draws from next.
    devices = sorted({p.device.index or 0 for p in params if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices), on_copies(params + others, optimizer):
        for p in others:
            p.grad = None
        for i, factor in enumerate(cooldown_lr_factors(steps)):
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group["lr"] = lr * factor
            # The engine scores inside its no-grad converge: the cool-down needs gradients.
            with torch.enable_grad():
                grads = torch.autograd.grad(loss_fn(i), params, allow_unused=True)
            for p, grad in zip(params, grads):
                p.grad = grad
            if max_grad_norm:
                torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], max_grad_norm)
            optimizer.step()
        with torch.no_grad():
            return float(probe())
