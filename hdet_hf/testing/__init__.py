"""Test and benchmark plumbing: not part of HDET, and not imported by ``import hdet_hf``.

- `hdet_hf.testing.processes`: an offline CPU environment and torchrun command lines for real multi-process
  runs (gloo) from tests and benchmark scripts.
- `hdet_hf.testing.benchmarks`: what the benchmark scripts share (worker prologue, machine record, results.jsonl
  I/O and launch, JSON-safe numbers).
- `hdet_hf.testing.error_cases`: every invalid input we try and the message it must produce; the tests
  assert them and ``scripts/make_error_table.py`` writes them to ``docs/invalid_inputs.md``.
"""
