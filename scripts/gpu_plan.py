"""What ``scripts/gpu_check.sh`` runs on the GPUs it finds (pure: a GPU count in, a plan out).

NCCL puts one process on each GPU and refuses two ranks on one device, so:

- 0 GPUs: nothing to run (the check fails, naming the CPU route instead).
- 1 GPU: no NCCL multi-process test can run; the speed benchmark runs 2 processes that share the GPU over gloo
  (CUDA tensors, not NCCL: it checks the CUDA code paths and measures GPU compute, not NCCL).
- 2-3 GPUs: the NCCL tests at 2 processes; the benchmark on every GPU with NCCL.
- 4+ GPUs: also the 4-process NCCL tests and the HSDP path (2 replica groups x 2 shards); the benchmark on up
  to 8 GPUs (one node).

Example:
    >>> plan(8).bench_nprocs, plan(8).test_nprocs, plan(8).hsdp
    (8, (2, 4), True)
    >>> plan(1).bench_backend, plan(1).test_nprocs
    ('gloo', ())
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GpuPlan", "plan", "main"]

MAX_BENCH_GPUS = 8  # one node; the check must stay under 10 minutes


@dataclass(frozen=True)
class GpuPlan:
    """The parts of the GPU check that fit ``gpus`` devices."""

    gpus: int
    test_nprocs: tuple[int, ...]  # process counts of the NCCL multi-process tests (one GPU each)
    bench_nprocs: int  # processes of the speed benchmark
    bench_backend: str  # nccl, or gloo when processes share a GPU
    hsdp: bool  # 2 replica groups x 2 shards need 4 GPUs
    notes: tuple[str, ...]

    def as_shell(self) -> str:
        """``NAME=value`` lines for ``eval`` in bash."""
        values = {
            "PLAN_GPUS": str(self.gpus),
            "PLAN_TEST_NPROCS": " ".join(map(str, self.test_nprocs)),
            "PLAN_BENCH_NPROCS": str(self.bench_nprocs),
            "PLAN_BENCH_BACKEND": self.bench_backend,
            "PLAN_HSDP": "1" if self.hsdp else "0",
            "PLAN_NOTES": " ".join(self.notes),
        }
        return "\n".join(f"{k}={shlex.quote(v)}" for k, v in values.items())


def plan(gpus: int) -> GpuPlan:
    """The plan for ``gpus`` visible CUDA devices; ValueError when there are none."""
    if not isinstance(gpus, int) or gpus < 1:
        raise ValueError(
            f"Expected at least 1 CUDA device, but found {gpus!r}: scripts/gpu_check.sh needs a GPU "
            "(on CPU run `python -m pytest` and `python scripts/benchmark_speed.py` instead)"
        )
    if gpus == 1:
        return GpuPlan(
            gpus=1,
            test_nprocs=(),
            bench_nprocs=2,
            bench_backend="gloo",
            hsdp=False,
            notes=(
                "1 GPU: NCCL needs one GPU per process, so the NCCL multi-process tests and HSDP are skipped;",
                "the benchmark runs 2 processes sharing the GPU over gloo (CUDA compute, not NCCL).",
            ),
        )
    nprocs = min(gpus, MAX_BENCH_GPUS)
    notes: list[str] = []
    if gpus > MAX_BENCH_GPUS:
        notes.append(f"{gpus} GPUs: the benchmark uses {MAX_BENCH_GPUS} (one node).")
    if gpus < 4:
        notes.append(f"{gpus} GPUs: the 4-process tests and HSDP (2 groups x 2 shards) need 4; skipped.")
    return GpuPlan(
        gpus=gpus,
        test_nprocs=(2, 4) if gpus >= 4 else (2,),
        bench_nprocs=nprocs,
        bench_backend="nccl",
        hsdp=gpus >= 4,
        notes=tuple(notes),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print what scripts/gpu_check.sh runs for a GPU count.")
    parser.add_argument("--gpus", type=int, required=True, help="Visible CUDA devices.")
    parser.add_argument(
        "--format", choices=["shell", "text"], default="text", help="shell: NAME=value lines for eval."
    )
    args = parser.parse_args(argv)
    try:
        chosen = plan(args.gpus)
    except ValueError as exc:
        raise SystemExit(f"gpu_plan: {exc}") from None
    print(chosen.as_shell() if args.format == "shell" else chosen)


if __name__ == "__main__":
    main()
