"""HDETAccelerate with a plain ``Accelerator()`` (or ``Accelerator(cpu=True)`` with --cpu) under torchrun."""

import sys

import torch
from accelerate import Accelerator

from hdet_hf import HDETAccelerate, HDETConfig
from hdet_hf.process import finish_distributed

if __name__ == "__main__":
    accelerator = Accelerator(cpu="--cpu" in sys.argv)
    hdet = HDETAccelerate(accelerator, HDETConfig(sync_interval=2), total_steps=4)
    model = torch.nn.Linear(4, 1)
    model, optimizer, _ = hdet.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    print(f"rank {accelerator.process_index} of {accelerator.num_processes}", flush=True)
    finish_distributed()
