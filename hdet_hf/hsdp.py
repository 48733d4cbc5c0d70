"""HDET across HSDP replica groups: one ensemble member per group of processes, sharded inside it with FSDP2.

The world is a 2-D device mesh ``(dp_replicate, dp_shard)``: ranks ``g*S .. g*S + S-1`` form replica group
``g`` (consecutive ranks, so with ``S`` = GPUs per node a group is a node and only the replicate dimension
crosses nodes). Each group holds one replica of the model, sharded over its ``S`` ranks by FSDP2; HDET
treats group ``g`` as ensemble member ``g``:

- the engine runs on the ``dp_replicate`` group of this rank (the ranks holding the same shard in every
  group), with the replica-group rank as its rank, so every rank of a group gets the same multipliers;
- a converge is one fused all-reduce of this rank's local shards over that group; the shard layouts are
  identical in every group, so the shard-wise average is exactly the average of the replicas;
- statistics are made identical inside a group before they travel (the group's summed window loss and
  item count, one health verdict, one probe loss), so every column of the mesh decides the same.

Gradient sync:

- ``shared``: FSDP2 on the 2-D mesh (HSDP): reduce-scatter inside the group, then FSDP2's own gradient
  all-reduce across groups, every step.
- ``local``: FSDP2 on the group's 1-D ``dp_shard`` mesh: reduce-scatter inside the group only, and nothing
  crosses groups between converges. (FSDP2's ``set_requires_all_reduce(False)`` is not this: it is meant for
  gradient accumulation and keeps the reduce-scattered gradient aside for the next all-reducing backward,
  without writing ``.grad``, so the optimizer would not step.)

Accelerate's own FSDP2 plugin cannot run on CPU (Accelerate 1.15 uses FSDP only for multi-GPU-type
distributed types and refuses ``ParallelismConfig`` for MULTI_CPU), so HDET builds the mesh and applies
``fully_shard`` itself (`shard_model`); the same code runs with NCCL on GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .collectives import local_data
from .config import HDETConfig
from .engine import ConvergeReport, HDETEngine
from .engine_state import PARAMETER_SHAPED_FIELDS, merge_optimizer_states

__all__ = [
    "HSDPLayout",
    "HSDPEngine",
    "build_layout",
    "reshard",
    "check_no_accelerate_sharding",
    "sources_for",
    "saved_files",
    "reshard_state",
    "regroup_window_sums",
    "resume_from_files",
    "shard_model",
    "full_model_state_dict",
    "sharded_state",
    "load_sharded_state",
    "CHECKPOINT_FILENAME",
    "HSDP_STATE_VERSION",
]

CHECKPOINT_FILENAME = "hdet_hsdp_rank{rank}.pt"
HSDP_STATE_VERSION = 1
DIM_NAMES = ("dp_replicate", "dp_shard")


@dataclass(frozen=True)
class HSDPLayout:
    """Where this process sits in the ``(dp_replicate, dp_shard)`` mesh."""

    mesh: Any  # torch.distributed.device_mesh.DeviceMesh, 2-D
    gradient_sync: str

    @property
    def replicate_group(self) -> dist.ProcessGroup:
        return self.mesh.get_group("dp_replicate")

    @property
    def shard_group(self) -> dist.ProcessGroup:
        return self.mesh.get_group("dp_shard")

    @property
    def replica_rank(self) -> int:
        return self.mesh.get_local_rank("dp_replicate")

    @property
    def num_replicas(self) -> int:
        return self.mesh.size(0)

    @property
    def shard_rank(self) -> int:
        return self.mesh.get_local_rank("dp_shard")

    @property
    def shard_size(self) -> int:
        return self.mesh.size(1)

    @property
    def device(self) -> torch.device:
        return torch.device(self.mesh.device_type)

    @property
    def fsdp_mesh(self) -> Any:
        """The mesh FSDP2 shards on: 2-D (HSDP) in ``shared`` mode, the group's 1-D shard mesh in ``local``."""
        return self.mesh if self.gradient_sync == "shared" else self.mesh["dp_shard"]

    def describe(self) -> dict[str, int]:
        return {"num_replicas": self.num_replicas, "shard_size": self.shard_size}


def build_layout(config: HDETConfig, device_type: str) -> HSDPLayout:
    """The 2-D mesh for ``config.hsdp_shard_size`` processes per replica group (torch.distributed initialized)."""
    from torch.distributed.device_mesh import init_device_mesh

    shard = config.hsdp_shard_size
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            f"--hdet_hsdp_shard_size {shard} needs a distributed launch (torchrun / accelerate launch); "
            "torch.distributed is not initialized. Launch several processes, or drop --hdet_hsdp_shard_size."
        )
    world = dist.get_world_size()
    if shard < 1 or world % shard != 0 or world // shard < 2:
        raise ValueError(
            f"--hdet_hsdp_shard_size {shard} does not fit {world} processes: the world size must be a multiple "
            "of it with at least 2 replica groups (one ensemble member per group). Use a divisor of "
            f"{world} that is at most {world // 2} (e.g. {max(world // 2, 1)}), or launch more processes."
        )
    mesh = init_device_mesh(device_type, (world // shard, shard), mesh_dim_names=DIM_NAMES)
    return HSDPLayout(mesh=mesh, gradient_sync=config.gradient_sync)


def check_no_accelerate_sharding(accelerator: Any, hsdp: bool) -> None:
    """Refuse an Accelerator that shards the model by itself (FSDP plugin, DeepSpeed) under HDET.

    Without HSDP a model sharded over every process leaves no replicas to average; with HSDP, HDET shards the
    model itself and Accelerate must not shard it again.
    """
    kind = str(getattr(accelerator, "distributed_type", ""))
    if "FSDP" not in kind and "DEEPSPEED" not in kind:
        return
    if hsdp:
        raise ValueError(
            f"--hdet_hsdp_shard_size shards the model with FSDP2 itself, but the Accelerator is set up for {kind} "
            "(by the accelerate config or environment). Launch with a plain multi-process config (e.g. "
            "accelerate_configs/gpu_2nodes_8each_hsdp.yaml, or --multi_gpu) and keep --hdet_hsdp_shard_size."
        )
    raise ValueError(
        f"--hdet does not run under Accelerate's {kind} (set by the accelerate config or environment): a model "
        "sharded over every process leaves no replicas to average. For a model that does not fit on one device "
        "use HDET's HSDP route: a plain multi-process launch plus --hdet_hsdp_shard_size N (FSDP2 inside each "
        "group of N processes, one ensemble member per group; see the README)."
    )


def _blocks(model: nn.Module) -> list[nn.Module]:
    """The modules FSDP2 wraps separately: a transformers model's ``_no_split_modules`` (its decoder layers)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if m is not model and type(m).__name__ in names]


def shard_model(
    model: nn.Module, layout: HSDPLayout, optimizer: torch.optim.Optimizer | None = None
) -> nn.Module:
    """Apply FSDP2 ``fully_shard`` to each block and the root, on `HSDPLayout.fsdp_mesh`.

    ``fully_shard`` replaces every parameter by a new (DTensor) one; an ``optimizer`` built on the old
    parameters is pointed at the new ones (it must not have state yet). Returns ``model`` (sharded in place).
    """
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if isinstance(model, FSDPModule):
        raise ValueError(
            "The model is already sharded with FSDP2; --hdet_hsdp_shard_size shards it itself. Pass the plain "
            "model (and do not configure Accelerate's FSDP plugin)."
        )
    before = {name: id(p) for name, p in model.named_parameters()}
    for block in _blocks(model):
        fully_shard(block, mesh=layout.fsdp_mesh)
    fully_shard(model, mesh=layout.fsdp_mesh)
    if optimizer is not None:
        if any(optimizer.state.values()):
            raise ValueError("shard_model() needs an optimizer that has not stepped yet (its state is not empty)")
        new = {before[name]: p for name, p in model.named_parameters()}
        for group in optimizer.param_groups:
            group["params"] = [new.get(id(p), p) for p in group["params"]]
    return model


def reshard(model: nn.Module | None) -> None:
    """Put every FSDP2 module back in its sharded state (a no-op for those that are).

    FSDP2 keeps the root module's parameters unsharded after a forward until the backward (its
    ``reshard_after_forward`` is False); after a forward without backward (a probe, an evaluation) the module
    would keep computing with those gathered copies and list them as its parameters. HDET reads and writes the
    sharded storage, so it reshards first.
    """
    from torch.distributed.fsdp import FSDPModule

    if model is None:
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


class HSDPEngine(HDETEngine):
    """`HDETEngine` whose replicas are HSDP replica groups (see the module docstring).

    Its rank and world size are the replica-group rank and count; collectives of the protocol run on the
    ``dp_replicate`` group, and the statistics are combined over the ``dp_shard`` group first.
    """

    def __init__(
        self,
        config: HDETConfig,
        model: nn.Module | None,
        optimizer: torch.optim.Optimizer,
        total_steps: int,
        *,
        layout: HSDPLayout,
    ) -> None:
        self.layout = layout
        self._model = model
        super().__init__(
            config,
            model,
            optimizer,
            total_steps,
            rank=layout.replica_rank,
            world_size=layout.num_replicas,
            group=layout.replicate_group,
        )

    def _check_settings_agree(self) -> None:
        # Across every process, not only this column of the mesh: two columns that disagree would hang apart.
        group, self.group = self.group, None
        try:
            super()._check_settings_agree()
        finally:
            self.group = group

    def _group_reduce(self, values: list[float], op: Any = dist.ReduceOp.SUM) -> list[float]:
        """One small all-reduce over this rank's replica group (identical result on every rank of it)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.layout.device)
        if self.layout.shard_size > 1:
            dist.all_reduce(tensor, op=op, group=self.layout.shard_group)
        return tensor.tolist()

    def converge(self, regular: bool = True) -> ConvergeReport:
        reshard(self._model)  # the averaged shards must be what the next forward gathers
        return super().converge(regular)

    def _window_stats(self) -> tuple[float | None, float | None, float]:
        # The group's loss is its ranks' items together: the window sums and item counts summed over the group,
        # so every rank of the group scores (and every column of the mesh gathers) the same number. The
        # window itself keeps this rank's own sums (a forced converge keeps the window). The group mean's
        # variance is sum(W_k^2 var_k) / (sum W_k)^2 over its ranks' item counts W_k (NaN if one has none).
        window = self.window
        weight = float(window.loss_weight)
        group_sum, group_weight, group_spread, mark_sum, mark_weight = self._group_reduce(
            [
                float(window.loss_sum), weight, weight**2 * window.mean_variance() if weight > 0 else 0.0,
                window.mark_sum, window.mark_weight,
            ]
        )  # fmt: skip
        if window.steps == 0 or group_weight <= 0:
            return None, None, math.nan
        recent_weight = group_weight - mark_weight
        recent = (group_sum - mark_sum) / recent_weight if recent_weight > 0 else None
        return group_sum / group_weight, recent, group_spread / group_weight**2

    def _is_healthy(self, window_loss: float | None, probe_loss: float | None) -> bool:
        # Each rank checks its own shard; the group is healthy only if all of them are (one verdict per group).
        healthy = super()._is_healthy(window_loss, probe_loss)
        (verdict,) = self._group_reduce([1.0 if healthy else 0.0], op=dist.ReduceOp.MIN)
        return verdict > 0.5

    def _probe_loss(self, at_average: bool) -> float:
        window = self.window
        if at_average and window.average_count and window.average is not None:
            return self._probe_at(window.average)
        assert self.probe_fn is not None
        loss = float(self.probe_fn())
        reshard(self._model)
        return self._group_mean(loss)

    def _probe_at(self, weights: list[torch.Tensor]) -> float:
        assert self.probe_fn is not None
        # FSDP2 reads its own sharded storage, so the weights are copied in (and back), not swapped.
        local = self.replica.param_data()
        own = [t.clone() for t in local]
        try:
            torch._foreach_copy_(local, weights)
            loss = float(self.probe_fn())
        finally:
            reshard(self._model)  # drop the gathered weights
            torch._foreach_copy_(local, own)
        return self._group_mean(loss)

    def _group_mean(self, loss: float) -> float:
        # Every rank of a group scores the same gathered weights on the same batch; the mean makes it exact.
        (total,) = self._group_reduce([loss])
        return total / self.layout.shard_size

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["hsdp"] = {**self.layout.describe(), "shard_rank": self.layout.shard_rank}
        return state


def full_model_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's state dict as plain CPU tensors on global rank 0 (empty elsewhere).

    A collective: every rank must call it (each group gathers its shards; groups are identical after a
    converge, so rank 0's copy is the ensemble's model).
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    reshard(model)
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def _map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    """``value`` (tensors nested in dicts and lists, as in optimizer state) with ``fn`` applied to every tensor."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_tensors(fn, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_tensors(fn, v) for v in value]
    return value


def _localise(value: Any) -> Any:
    """``value`` with every tensor replaced by a CPU copy of this rank's local shard."""
    return _map_tensors(lambda t: local_data(t).detach().clone().cpu(), value)


def sharded_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, layout: HSDPLayout, engine: HSDPEngine | None = None
) -> dict[str, Any]:
    """This rank's checkpoint: its parameter shards and optimizer state (shards), and its HDET state if
    ``engine`` is given (the Trainer writes that to its own file); plain tensors.

    Loadable with ``torch.load(weights_only=True)``. Each group's shards together are one replica, so the
    files of one group are a full checkpoint of that replica.
    """
    reshard(model)
    state = {
        "version": HSDP_STATE_VERSION,
        "layout": {**layout.describe(), "replica_rank": layout.replica_rank},
        "shard_rank": layout.shard_rank,
        "model": {name: _localise(p) for name, p in model.named_parameters()},
        "buffers": {name: _localise(b) for name, b in model.named_buffers()},
        "optimizer": _localise(optimizer.state_dict()),
    }
    if engine is not None:
        state["engine"] = engine.state_dict()
    return state


def sources_for(replica_rank: int, saved_replicas: int, replicas: int) -> list[int]:
    """Saved replica groups whose per-rank optimizer state this replica group continues (the Trainer's rule).

    Same count: its own. Growing: ``r mod saved``. Shrinking: ``r, r + N, r + 2N, ...`` (moments averaged).
    """
    if saved_replicas > replicas:
        return list(range(replica_rank, saved_replicas, replicas))
    return [replica_rank % saved_replicas]


def saved_files(layout: HSDPLayout, saved_replicas: int, saved_shard_size: int) -> list[list[int]]:
    """The saved files (by global rank) this rank resumes from: one list per saved replica group it continues
    (`sources_for`). With the saved shard size, the file of its own shard; with another, every shard file of
    that group (`reshard_state` cuts this rank's rows out of them)."""
    groups = sources_for(layout.replica_rank, saved_replicas, layout.num_replicas)
    if saved_shard_size == layout.shard_size:
        return [[g * saved_shard_size + layout.shard_rank] for g in groups]
    return [[g * saved_shard_size + s for s in range(saved_shard_size)] for g in groups]


def _rows(length: int, parts: int, index: int) -> tuple[int, int]:
    """Rows ``[start, stop)`` of dim 0 that FSDP2 gives shard ``index`` of ``parts`` (``torch.chunk``: chunks of
    ``ceil(length / parts)`` rows, the last shorter, trailing shards empty)."""
    size = -(-length // parts)
    start = min(index * size, length)
    return start, min(start + size, length)


def _cut(pieces: Sequence[torch.Tensor], start: int, stop: int) -> torch.Tensor:
    """Rows ``[start, stop)`` of the dim-0 concatenation of ``pieces``, reading only those rows (a copy)."""
    out, offset = [], 0
    for piece in pieces:
        lo, hi = max(start - offset, 0), min(stop - offset, piece.shape[0])
        if lo < hi:
            out.append(piece[lo:hi])
        offset += piece.shape[0]
    return torch.cat(out) if out else pieces[0][:0].clone()


def _recut(pieces: Sequence[Any], param: torch.Tensor, shard_size: int, shard_rank: int) -> torch.Tensor | None:
    """This rank's shard of ``param`` (a DTensor sharded on dim 0 inside the group) from the saved shards
    ``pieces`` of the same tensor (one per saved shard rank); None if they are not shards of it."""
    full = tuple(param.shape)
    if not full or not all(isinstance(t, torch.Tensor) and tuple(t.shape[1:]) == full[1:] for t in pieces):
        return None
    if sum(t.shape[0] for t in pieces) != full[0] or any(t.dim() != len(full) for t in pieces):
        return None
    start, stop = _rows(full[0], shard_size, shard_rank)
    cut = _cut(pieces, start, stop)
    if tuple(cut.shape) != tuple(local_data(param).shape):
        raise ValueError(
            f"Re-cutting a saved shard for shard {shard_rank} of {shard_size} gave shape {tuple(cut.shape)}, but "
            f"FSDP2 holds {tuple(local_data(param).shape)} of the {full} parameter here (an FSDP2 version that "
            "splits dim 0 differently). Resume with the saved --hdet_hsdp_shard_size."
        )
    return cut


def _owned(value: Any) -> Any:
    """``value`` with every tensor copied (files read with ``mmap`` stay untouched and can be rotated away)."""
    return _map_tensors(torch.Tensor.clone, value)


def reshard_state(
    files: Sequence[dict[str, Any]],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    engine: HSDPEngine,
    engine_states: Sequence[dict[str, Any]] | None = None,
    source: str = "HSDP checkpoint",
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One saved replica group's `sharded_state` files (every saved shard rank, in order) as this rank's file
    under this run's shard size; with ``engine_states`` (the group's HDET states, the Trainer's
    ``hdet_state_rank*.pt``), that state re-cut too.

    FSDP2 splits each parameter along dim 0 in shard-rank order, so a replica's tensor is its shards
    concatenated: parameters, the optimizer's per-parameter tensors (moments) and HDET's parameter-shaped
    tensors (interval mean, outer anchors and momentum) are cut again for this rank; per-process scalars
    (the optimizer's step) are the group's; the window's loss sums (per process; the group's loss is their
    sum) go to shard 0. Only the rows this rank needs are read (files loaded with ``mmap`` stay mostly on disk).
    """
    layout = engine.layout
    size, rank = layout.shard_size, layout.shard_rank
    first = files[0]
    _check_version(first, source)
    params = dict(model.named_parameters())
    model_state = {}
    for name, saved in first["model"].items():
        param = params.get(name)
        if param is None:  # `load_sharded_state` names the parameters that do not match
            model_state[name] = saved
            continue
        cut = _recut([f["model"][name] for f in files], param, size, rank)
        if cut is None:
            raise ValueError(
                f"{source}: the saved shards of parameter {name!r} do not make up this model's "
                f"{tuple(param.shape)} parameter. Resume with the model that wrote the checkpoint."
            )
        model_state[name] = cut
    ordered = [p for group in optimizer.param_groups for p in group["params"]]
    optimizer_state: dict[Any, dict[str, Any]] = {}
    for index, param_state in first["optimizer"]["state"].items():
        param = ordered[int(index)] if 0 <= int(index) < len(ordered) else None
        optimizer_state[index] = {}
        for key, value in param_state.items():
            cut = None
            if param is not None and isinstance(value, torch.Tensor) and value.dim():
                cut = _recut([f["optimizer"]["state"][index][key] for f in files], param, size, rank)
            optimizer_state[index][key] = cut if cut is not None else _owned(value)
    state = {
        "version": first["version"],
        # Cut for this shard size; the saved group count stays (an elastic resume is told from it).
        "layout": {**first["layout"], "shard_size": size},
        "shard_rank": rank,
        "model": model_state,
        "buffers": _owned(first["buffers"]),
        "optimizer": {"state": optimizer_state, "param_groups": _owned(first["optimizer"]["param_groups"])},
    }
    if "engine" in first:
        state["engine"] = _reshard_engine_state([f["engine"] for f in files], engine)
    engine_state = None if engine_states is None else _reshard_engine_state(engine_states, engine)
    return state, engine_state


def regroup_window_sums(states: Sequence[dict[str, Any]], shard_rank: int) -> dict[str, Any]:
    """The score window's sums for shard ``shard_rank`` of a new layout, from one saved group's states: each process
    sums its own items and the group's loss is the sum over the group (`HSDPEngine._window_stats`), so the group's
    totals go whole to shard 0 and every other shard starts at 0. The same for the sums at the window's last
    converge (``loss_mark``, `ScoreWindow.mark`), so the group's mean since then survives the re-cut."""
    regrouped: dict[str, Any] = {}
    for key in ("loss_sum", "loss_weight"):
        if key in states[0]:
            regrouped[key] = float(sum(float(s[key]) for s in states)) if shard_rank == 0 else 0.0
    if "loss_mark" in states[0]:
        marks = [s.get("loss_mark", (0.0, 0.0)) for s in states]
        regrouped["loss_mark"] = [float(sum(m[i] for m in marks)) if shard_rank == 0 else 0.0 for i in (0, 1)]
    return regrouped


def _reshard_engine_state(states: Sequence[dict[str, Any]], engine: HSDPEngine) -> dict[str, Any]:
    layout = engine.layout
    state = _owned({k: v for k, v in states[0].items() if k not in PARAMETER_SHAPED_FIELDS})
    for key in PARAMETER_SHAPED_FIELDS:
        saved = [s.get(key) for s in states]
        if saved[0] is None:
            state[key] = None
            continue
        if not all(isinstance(t, list) and len(t) == len(engine.replica.params) for t in saved):
            raise ValueError(
                f"HDET state field {key!r} does not match this model's {len(engine.replica.params)} trainable "
                "parameters. Resume with the model that wrote the checkpoint."
            )
        state[key] = []
        for i, param in enumerate(engine.replica.params):
            cut = _recut([t[i] for t in saved], param, layout.shard_size, layout.shard_rank)
            if cut is None:
                raise ValueError(
                    f"HDET state field {key!r}: the saved shards of trainable parameter {i} do not make up this "
                    f"model's {tuple(param.shape)} parameter. Resume with the model that wrote the checkpoint."
                )
            state[key].append(cut)
    state.update(regroup_window_sums(states, layout.shard_rank))
    state.pop("loss_noise", None)  # the window's noise estimate restarts (`ScoreWindow.load_state_dict`)
    if isinstance(state.get("config"), dict):
        state["config"]["hsdp_shard_size"] = layout.shard_size  # now a state of this layout
    state["hsdp"] = {**state.get("hsdp", {}), "shard_size": layout.shard_size, "shard_rank": layout.shard_rank}
    return state


def resume_from_files(
    read: Callable[[int, bool], dict[str, Any]],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    engine: HSDPEngine,
    *,
    saved_replicas: int,
    saved_shard_size: int,
    read_engine_state: Callable[[int], dict[str, Any]] | None = None,
    source: str = "HSDP checkpoint",
) -> list[str]:
    """Resume this rank from a checkpoint of `sharded_state` files saved with ``saved_replicas`` replica groups of
    ``saved_shard_size`` processes. ``read(global_rank, mmap)`` loads one rank's file; ``read_engine_state``
    loads one rank's HDET state when it is kept apart (the Trainer's ``hdet_state_rank*.pt``; else the files'
    ``"engine"``).

    A changed number of replica groups is the elastic resume (`load_sharded_state`); a changed shard size
    re-cuts the saved group's shards for this layout (`reshard_state`). Both may change at once. Returns
    notes on what changed (empty for an exact resume).
    """
    layout = engine.layout
    groups = saved_files(layout, saved_replicas, saved_shard_size)
    if saved_shard_size == layout.shard_size:
        states = [read(files[0], False) for files in groups]
        engine_state = None if read_engine_state is None else read_engine_state(groups[0][0])
    else:
        states, engine_state = [], None
        for i, files in enumerate(groups):
            engine_states = None
            if i == 0 and read_engine_state is not None:
                engine_states = [read_engine_state(r) for r in files]
            state, cut = reshard_state(
                [read(r, True) for r in files], model, optimizer, engine, engine_states, source=source
            )
            states.append(state)
            engine_state = cut if i == 0 else engine_state
    notes = load_sharded_state(states, model, optimizer, engine, engine_state=engine_state, source=source)
    if saved_shard_size != layout.shard_size:
        notes.append(
            f"shard size {saved_shard_size} -> {layout.shard_size}: parameter, optimizer and HDET shards re-cut "
            f"from each saved group's {saved_shard_size} files; group {layout.replica_rank} continues saved "
            f"group(s) {sources_for(layout.replica_rank, saved_replicas, layout.num_replicas)}"
        )
    return notes


def load_sharded_state(
    states: list[dict[str, Any]],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    engine: HSDPEngine,
    *,
    engine_state: dict[str, Any] | None = None,
    source: str = "HSDP checkpoint",
) -> list[str]:
    """Restore `sharded_state` files (``states[0]`` first; several when fewer replica groups resume more).

    The states must be cut for this rank's shard (same shard size and shard rank: a checkpoint of another shard
    size goes through `reshard_state` first, as `resume_from_files` does); the number of replica groups may
    change (the HDET state's elastic resume: multipliers recomputed, base values and controller kept;
    optimizer moments of several saved groups averaged). Returns the engine's notes.
    """
    first = states[0]
    _check_version(first, source)
    layout = engine.layout
    saved_shard = first["layout"]["shard_size"]
    if saved_shard != layout.shard_size or first["shard_rank"] != layout.shard_rank:
        raise ValueError(
            f"{source} holds shard {first['shard_rank']} of {saved_shard} (--hdet_hsdp_shard_size {saved_shard}), "
            f"but this process is shard {layout.shard_rank} of {layout.shard_size}. Load the checkpoint with "
            "hdet_hf.hsdp.resume_from_files (HDETTrainer's resume and HDETAccelerate.load_checkpoint do), which "
            "re-cuts the saved shards for another shard size."
        )
    reshard(model)
    params = dict(model.named_parameters())
    if set(first["model"]) != set(params):
        raise ValueError(
            f"{source} holds parameters {sorted(set(first['model']) ^ set(params))[:5]} that this model does "
            "not match. Resume with the model that wrote the checkpoint."
        )
    with torch.no_grad():
        for name, p in params.items():
            target = local_data(p)
            saved = first["model"][name]
            if tuple(saved.shape) != tuple(target.shape):
                raise ValueError(
                    f"{source}: parameter {name!r} has shard shape {tuple(saved.shape)}, this run "
                    f"{tuple(target.shape)}. Resume with the model and shard size that wrote the checkpoint."
                )
            target.copy_(saved)
        for name, b in model.named_buffers():
            if name in first["buffers"]:
                local_data(b).copy_(first["buffers"][name])
    notes = engine.load_state_dict(
        first["engine"] if engine_state is None else engine_state,
        elastic=first["layout"]["num_replicas"] != layout.num_replicas,
        source=source,
    )
    optimizer.load_state_dict(_globalise(merge_optimizer_states([s["optimizer"] for s in states]), optimizer))
    return notes


def _check_version(state: Any, source: str) -> None:
    if not isinstance(state, dict) or state.get("version") != HSDP_STATE_VERSION:
        raise ValueError(
            f"{source}: expected an HSDP checkpoint of version {HSDP_STATE_VERSION} written by "
            f"hdet_hf.hsdp.sharded_state, but got {state.get('version') if isinstance(state, dict) else state!r}."
        )


def _globalise(state: dict[str, Any], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Saved local moments back into DTensors laid out like their parameters (what the optimizer steps with)."""
    from torch.distributed.tensor import DTensor

    params = [p for group in optimizer.param_groups for p in group["params"]]
    for index, param_state in state["state"].items():
        param = params[int(index)]
        if not isinstance(param.data, DTensor):
            continue
        for key, value in list(param_state.items()):
            if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(local_data(param).shape) and value.dim():
                param_state[key] = DTensor.from_local(
                    value.to(param.device),
                    param.device_mesh,
                    param.placements,
                    run_check=False,
                    shape=param.shape,
                    stride=param.stride(),
                )
    return state
