"""Dump what a worker sees of its launch: the launcher's environment, the process group, sys.argv, threads.

``launch_env_worker.py OUT_DIR [fail]``: with ``fail``, rank 1 raises after joining the group while the other
ranks wait in a barrier that never completes (the launcher must stop them).
"""

import json
import os
import sys

import torch
import torch.distributed as dist

LAUNCH_KEYS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE",
    "MASTER_ADDR", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS",
)  # fmt: skip

if __name__ == "__main__":
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"worker {rank} of {dist.get_world_size()} up", flush=True)
    if sys.argv[2:] == ["fail"]:
        if rank == 1:
            raise RuntimeError("rank 1 fails on purpose")
        dist.barrier()  # never completes: rank 1 is gone
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "env": {key: os.environ.get(key) for key in LAUNCH_KEYS},
                "rank": rank,
                "world": dist.get_world_size(),
                "argv": sys.argv[1:],
                "name": __name__,
                "threads": torch.get_num_threads(),
                "cwd": os.getcwd(),
            },
            f,
        )
    dist.destroy_process_group()
