"""HDET on a LoRA model (PEFT): only the adapter is trained, so only the adapter is averaged.

Real 2-process runs (gloo on CPU): adapters differ between converges and are bit-identical at converges, the
frozen base weights never change, and the saved adapter loads with `peft` onto a fresh base model.
"""

from __future__ import annotations

import pytest
import tiny_lm
import torch
from distributed import load_ranks, torchrun

peft = pytest.importorskip("peft", reason="the PEFT tests need `pip install 'hdet_hf[trl]'`")

SYNC_INTERVAL = 3
MAX_STEPS = 6


def differs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return any(not torch.equal(a[name], b[name]) for name in a)


@pytest.mark.slow
@pytest.mark.parametrize("gradient_sync", ["shared", "local"])
def test_lora_adapters_converge_bit_for_bit_and_base_weights_never_change(tmp_path, gradient_sync):
    model_dir = tiny_lm.save_tiny_lm(tmp_path / "base")
    out, dump = tmp_path / "out", tmp_path / "dump"
    torchrun(
        "peft_worker.py",
        2,
        [
            "--model_dir", str(model_dir), "--dump_dir", str(dump), "--output_dir", str(out),
            "--max_steps", str(MAX_STEPS), "--per_device_train_batch_size", "4", "--learning_rate", "1e-2",
            "--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true",
            "--hdet", "--hdet_sync_interval", str(SYNC_INTERVAL), "--hdet_lr_spread", "0.5",
            "--hdet_gradient_sync", gradient_sync, "--hdet_explore_until", "1",  # spread between all converges
        ],
    )  # fmt: skip
    ranks = load_ranks(dump, 2)
    assert [r["is_ddp"] for r in ranks] == [gradient_sync == "shared"] * 2
    steps = ranks[0]["adapter_per_step"]
    assert sorted(steps) == list(range(1, MAX_STEPS + 1))
    names = set(steps[1])
    assert names and all("lora_" in name for name in names)  # only the adapter is trainable
    for step in steps:
        ours, theirs = steps[step], ranks[1]["adapter_per_step"][step]
        if step % SYNC_INTERVAL == 0:
            assert not differs(ours, theirs), f"adapters differ right after the converge at step {step}"
        else:
            assert differs(ours, theirs), f"adapters identical between converges (step {step}): no spread"
    # Training moved the adapter, and never the base weights (on either rank, which hold the same ones).
    assert differs(steps[1], steps[MAX_STEPS])
    for rank in ranks:
        assert rank["frozen_before"].keys() == rank["frozen_after"].keys()
        assert not differs(rank["frozen_before"], rank["frozen_after"])
        assert not differs(rank["frozen_after"], ranks[0]["frozen_after"])
    assert torch.equal(ranks[0]["logits"], ranks[1]["logits"])

    # The saved adapter is a PEFT adapter of the converged weights: a fresh base model plus
    # PeftModel.from_pretrained reproduces the trained model's outputs.
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    saved = load_file(out / "adapter_model.safetensors")
    final = {name.replace(".default", ""): t for name, t in steps[MAX_STEPS].items()}
    assert saved.keys() == final.keys()
    assert all(torch.equal(saved[name], final[name]) for name in saved)
    fresh_base = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        base_logits = fresh_base(input_ids=ranks[0]["probe"]).logits
    loaded = PeftModel.from_pretrained(fresh_base, out).eval()
    with torch.no_grad():
        logits = loaded(input_ids=ranks[0]["probe"]).logits
    torch.testing.assert_close(logits, ranks[0]["logits"], rtol=0, atol=1e-6)
    assert not torch.allclose(logits, base_logits, atol=1e-4)  # the adapter changes the outputs


@pytest.mark.filterwarnings("ignore:HDET runs on a single process")
def test_the_adapter_card_peft_writes_on_save_gets_the_hdet_section_and_tag(tmp_path):
    """PEFT's save_pretrained writes (and rewrites the tags of) its own README.md after training ended."""
    from accelerate.state import AcceleratorState
    from datasets import Dataset
    from huggingface_hub import ModelCard
    from peft import LoraConfig, get_peft_model

    from hdet_hf import HDETTrainer, HDETTrainingArguments

    model = get_peft_model(tiny_lm.model(), LoraConfig(r=2, target_modules=["q_proj"], lora_dropout=0.0))
    ids = torch.randint(0, 34, (16, 6), generator=torch.Generator().manual_seed(0)).tolist()
    args = HDETTrainingArguments(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True,
        per_device_train_batch_size=4, max_steps=4, hdet=True, hdet_sync_interval=2,
    )  # fmt: skip
    trainer = HDETTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({"input_ids": ids, "labels": ids})
    )
    try:
        trainer.train()
        assert not (tmp_path / "out" / "README.md").exists()
        for folder in (tmp_path / "out", tmp_path / "elsewhere"):
            trainer.save_model(str(folder))
            text = (folder / "README.md").read_text()
            assert text.count("## HDET schedule") == 1 and "- Converges: 2" in text
            assert ("hdet_schedule.png" in text) == (folder.name == "out")  # the plot is in output_dir only
            assert {"hdet", "lora"} <= set(ModelCard.load(folder / "README.md").data.tags)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
