"""HDET with TRL: SFTConfig/SFTTrainer through the mixin, model cards of Trainer subclasses, and TRL's stock
``sft.py`` run through ``hdet_hf.launch -m`` on 2 processes with LoRA, offline."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest
import tiny_lm
import torch
from accelerate.state import AcceleratorState
from datasets import Dataset

from hdet_hf import HDETTrainer, HDETTrainerMixin, HDETTrainingArguments, launch
from hdet_hf.testing.processes import offline_cpu_env, torchrun_command
from hdet_hf.training_args import with_hdet_arguments

trl = pytest.importorskip("trl", reason="the TRL tests need `pip install 'hdet_hf[trl]'`")
pytest.importorskip("peft", reason="the TRL tests need `pip install 'hdet_hf[trl]'`")

single_process = pytest.mark.filterwarnings("ignore:HDET runs on a single process")


@pytest.fixture
def clean_accelerate_state():
    """In-process runs build a Trainer, which fixes Accelerate's process-wide state (device, CPU)."""
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def sft_args(output_dir, **kwargs):
    from trl import SFTConfig

    defaults = dict(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,  # TRL's default is bf16 on; these checks compare float32 weights bit for bit
        report_to="none",
        disable_tqdm=True,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        max_steps=4,
        logging_steps=1,
        hdet=True,
        hdet_sync_interval=2,
    )
    return with_hdet_arguments(SFTConfig)(**{**defaults, **kwargs})


# ----------------------------------------------------------------------- arguments class of another base
def test_generated_arguments_pickle_and_load_in_a_process_that_never_generated_them(tmp_path):
    from trl import SFTConfig

    args = sft_args(tmp_path, hdet_sync_interval=7, max_length=32)
    assert with_hdet_arguments(SFTConfig) is type(args)  # one class per base
    assert type(pickle.loads(pickle.dumps(args))) is type(args)
    path = tmp_path / "training_args.bin"
    torch.save(args, path)
    code = (
        "import sys, torch; args = torch.load(sys.argv[1], weights_only=False); "
        "print(type(args).__name__, type(args).__mro__[1].__module__, args.hdet_config.sync_interval, "
        "args.max_length)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=offline_cpu_env()
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["HDETSFTConfig", "trl.trainer.sft_config", "7", "32"]


class HDETSFTTrainer(HDETTrainerMixin, trl.SFTTrainer):
    """What a user writes to get HDET in TRL's SFT without the launcher."""


def sft_trainer(output_dir, **kwargs):
    return HDETSFTTrainer(
        model=tiny_lm.model(),
        args=sft_args(output_dir, **kwargs),
        train_dataset=Dataset.from_dict({"text": tiny_lm.texts(32)}),
        processing_class=tiny_lm.tokenizer(),
    )


@single_process
def test_sft_trainer_with_the_mixin_saves_checkpoints_and_resumes_bit_for_bit(
    tmp_path, clean_accelerate_state
):
    straight = sft_trainer(tmp_path / "straight", save_strategy="no")
    straight.train()
    expected = {n: p.detach().clone() for n, p in straight.model.named_parameters()}

    first = sft_trainer(tmp_path / "resumed", save_strategy="steps", save_steps=2)
    first.train()  # crashed at the first checkpoint before: torch.save(args) could not pickle HDETSFTConfig
    checkpoint = tmp_path / "resumed" / "checkpoint-2"
    assert (checkpoint / "training_args.bin").is_file() and (checkpoint / "hdet_state_rank0.pt").is_file()
    resumed = sft_trainer(tmp_path / "resumed", save_strategy="steps", save_steps=2)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.hdet_engine.step == 4 and len(resumed.hdet_engine.trajectory) == 2
    for name, param in resumed.model.named_parameters():
        assert torch.equal(param, expected[name]), f"{name} differs after resume"
    assert any(not torch.equal(p, tiny_lm.model().get_parameter(n)) for n, p in expected.items())


# ----------------------------------------------------------------------- model cards of Trainer subclasses
class CardWithoutSuper(HDETTrainer):
    """Like TRL's trainers: writes its own card and never calls super().create_model_card()."""

    def create_model_card(self, **kwargs):
        with open(f"{self.args.output_dir}/README.md", "w") as f:
            f.write("---\ntags:\n- mine\n---\n# My card\n")


class CardWithSuper(HDETTrainer):
    def create_model_card(self, **kwargs):
        super().create_model_card(**kwargs)


def trained(cls, output_dir):
    ids = torch.randint(0, 34, (16, 6), generator=torch.Generator().manual_seed(0)).tolist()
    args = HDETTrainingArguments(
        output_dir=str(output_dir),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        per_device_train_batch_size=4,
        max_steps=4,
        hdet=True,
        hdet_sync_interval=2,
    )
    trainer = cls(
        model=tiny_lm.model(), args=args, train_dataset=Dataset.from_dict({"input_ids": ids, "labels": ids})
    )
    trainer.train()
    return trainer


@single_process
@pytest.mark.parametrize("cls", [HDETTrainer, CardWithSuper, CardWithoutSuper])
def test_every_trainer_subclass_gets_one_hdet_section_and_the_tag(tmp_path, cls, clean_accelerate_state):
    from huggingface_hub import ModelCard

    trainer = trained(cls, tmp_path)
    assert not (tmp_path / "README.md").exists()  # no card unless someone writes one
    trainer.create_model_card()
    trainer.create_model_card()  # again: replaced, not repeated
    text = (tmp_path / "README.md").read_text()
    assert text.count("## HDET schedule") == 1 and "hdet_schedule.png" in text
    tags = ModelCard.load(tmp_path / "README.md").data.tags
    assert "hdet" in tags and ("mine" in tags) == (cls is CardWithoutSuper)


@single_process
def test_a_card_written_during_training_gets_the_final_schedule_at_train_end(
    tmp_path, clean_accelerate_state
):
    class CardAtFirstSave(CardWithoutSuper):
        def _save_checkpoint(self, model, trial):
            self.create_model_card()  # as TRL's trainers do, with the schedule so far
            super()._save_checkpoint(model, trial)

    ids = torch.randint(0, 34, (16, 6), generator=torch.Generator().manual_seed(0)).tolist()
    args = HDETTrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", save_strategy="steps", save_steps=2,
        disable_tqdm=True, per_device_train_batch_size=4, max_steps=6, hdet=True, hdet_sync_interval=2,
    )  # fmt: skip
    CardAtFirstSave(
        model=tiny_lm.model(), args=args, train_dataset=Dataset.from_dict({"input_ids": ids, "labels": ids})
    ).train()
    text = (tmp_path / "README.md").read_text()
    assert text.count("## HDET schedule") == 1 and "- Converges: 3" in text


# ----------------------------------------------------------------------- the launcher's -m
def test_launcher_module_errors_name_the_module(capsys):
    assert launch.main(["-m", "no_such_package.scripts.sft", "--hdet"]) == 2
    err = capsys.readouterr().err
    assert "no module named 'no_such_package.scripts.sft'" in err and "pip install" in err
    assert launch.main(["-m"]) == 2
    assert "-m needs a module name, e.g. -m trl.scripts.sft" in capsys.readouterr().err


@pytest.mark.slow
def test_stock_trl_sft_script_with_lora_runs_with_hdet_through_the_launcher(tmp_path):
    """`torchrun ... -m hdet_hf.launch -m trl.scripts.sft ...`: the route for `trl sft` (whose CLI rejects
    --hdet). Offline: a tiny model and tokenizer saved from config, a local jsonl dataset."""
    from huggingface_hub import ModelCard
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model_dir = tiny_lm.save_tiny_lm(tmp_path / "base")
    data_dir = tiny_lm.save_text_dataset(tmp_path / "data")
    out = tmp_path / "out"
    cmd = torchrun_command(
        ["-m", "hdet_hf.launch", "-m", "trl.scripts.sft"],
        2,
        [
            "--model_name_or_path", str(model_dir), "--dataset_name", str(data_dir), "--output_dir", str(out),
            "--max_steps", "6", "--per_device_train_batch_size", "4", "--learning_rate", "1e-3",
            "--save_steps", "4", "--logging_steps", "1", "--report_to", "none", "--bf16", "false",
            "--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj",
            "--hdet", "--hdet_sync_interval", "3",
        ],
    )  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=offline_cpu_env(), cwd=tmp_path
    )
    assert proc.returncode == 0, (
        f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}"
    )

    schedule = json.loads((out / "hdet_schedule.json").read_text())
    assert schedule["world_size"] == 2 and [t["step"] for t in schedule["trajectory"]] == [3, 6]
    text = (out / "README.md").read_text()
    assert text.count("## HDET schedule") == 1 and "- Converges: 2" in text
    tags = ModelCard.load(out / "README.md").data.tags
    assert {"hdet", "trl", "sft", "lora"} <= set(tags)
    args = torch.load(out / "checkpoint-4" / "training_args.bin", weights_only=False)
    assert type(args).__name__ == "SFTConfig" and args.hdet and args.hdet_config.sync_interval == 3
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), out)
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.abs().sum() > 0 for p in lora_b)  # trained: LoRA starts B at zero
