"""Demo material for the examples, tests and benchmarks: not part of HDET, and not imported by ``import hdet_hf``.

- `hdet_hf.examples.data`: the offline default task (the Python standard library's docstrings as a corpus, a
  small tokenizer trained on it, a tiny Llama built from ``model_configs/tiny_llama.json``).
- `hdet_hf.examples.metrics`: offline `evaluate` metrics (perplexity, token accuracy) for the example script.
"""
