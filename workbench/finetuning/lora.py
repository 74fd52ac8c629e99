"""LoRA training loops (thin wrappers over trl's SFTTrainer and DPOTrainer).

SELECT's setting: rank-32 adapters on every linear layer except the embeddings, the output head
and the attention key projection. Conversations use the model's chat template; SFT's loss is on
the response only (trl's prompt/completion format).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

#: Linear layers LoRA never touches (SELECT: embeddings, unembedding, attention keys).
EXCLUDED_MODULES = ("k_proj", "lm_head", "embed_tokens", "wte", "c_attn_k")


@dataclass(frozen=True)
class FinetuneParams:
    """LoRA and optimisation settings (defaults finish in minutes on 2 CPU cores for 135M)."""

    rank: int = 32
    alpha: int = 64
    dropout: float = 0.05
    learning_rate: float = 1e-3
    epochs: int = 2
    batch_size: int = 8
    max_length: int = 160
    dpo_beta: float = 0.1
    dpo_learning_rate: float = 5e-4
    dpo_epochs: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


def lora_target_modules(model: torch.nn.Module) -> list[str]:
    """Names (last component) of the model's linear layers that LoRA adapts."""
    names = {name.rsplit(".", 1)[-1] for name, m in model.named_modules()
             if isinstance(m, torch.nn.Linear)}
    return sorted(n for n in names if n not in EXCLUDED_MODULES)


def lora_config(model, params: FinetuneParams):
    from peft import LoraConfig

    return LoraConfig(r=params.rank, lora_alpha=params.alpha, lora_dropout=params.dropout,
                      target_modules=lora_target_modules(model), task_type="CAUSAL_LM", bias="none")


@contextlib.contextmanager
def _quiet_training(progress: bool):
    from transformers.utils import logging as hf_logging

    old = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    loggers = [logging.getLogger(n) for n in ("trl", "peft", "accelerate")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if progress:
                yield
            else:  # the Trainer prints its log dicts to stdout and bars to stderr
                with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                    yield
    finally:
        hf_logging.set_verbosity(old)
        for lg, lvl in zip(loggers, levels):
            lg.setLevel(lvl)


def _common_args(params: FinetuneParams, seed: int, progress: bool, lr: float, epochs: int) -> dict:
    return dict(output_dir=tempfile.mkdtemp(prefix="wb-train-"), num_train_epochs=epochs,
                per_device_train_batch_size=params.batch_size, learning_rate=lr,
                lr_scheduler_type="linear", warmup_steps=2, logging_steps=10, save_strategy="no",
                report_to=[], seed=seed, data_seed=seed, disable_tqdm=not progress,
                use_cpu=not torch.cuda.is_available(), bf16=False, fp16=False,
                dataloader_num_workers=0, max_length=params.max_length)


def train_sft(model, tokenizer, pairs: Sequence[tuple[str, str]], params: FinetuneParams,
              seed: int = 0, progress: bool = False):
    """LoRA-SFT ``model`` on (question, response) pairs; returns the trained PeftModel."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": q}],
                               "completion": [{"role": "assistant", "content": a}]} for q, a in pairs])
    torch.manual_seed(seed)
    with _quiet_training(progress):
        args = SFTConfig(**_common_args(params, seed, progress, params.learning_rate, params.epochs),
                         completion_only_loss=True, packing=False)
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                             peft_config=lora_config(model, params))
        trainer.train()
    trained = trainer.model
    trained.eval()
    _cleanup(args.output_dir)
    return trained


def train_dpo(model, tokenizer, triples: Sequence[tuple[str, str, str]], params: FinetuneParams,
              seed: int = 0, progress: bool = False):
    """LoRA-DPO ``model`` on (question, chosen, rejected); the reference is ``model`` itself
    (the adapter disabled). Returns the trained PeftModel."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": q}],
                               "chosen": [{"role": "assistant", "content": c}],
                               "rejected": [{"role": "assistant", "content": r}]} for q, c, r in triples])
    torch.manual_seed(seed)
    with _quiet_training(progress):
        args = DPOConfig(**_common_args(params, seed, progress, params.dpo_learning_rate, params.dpo_epochs),
                         beta=params.dpo_beta)
        trainer = DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                             peft_config=lora_config(model, params))
        trainer.train()
    trained = trainer.model
    trained.eval()
    _cleanup(args.output_dir)
    return trained


def _cleanup(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
