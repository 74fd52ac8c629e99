"""LoRA training loops (thin wrappers over trl's SFTTrainer and DPOTrainer).

SELECT's setting: rank-32 adapters on every linear layer except the embeddings, the output head
and the attention key projection. Conversations use the model's chat template; SFT's loss is on
the response only (trl's prompt/completion format), or on the whole conversation
(``loss="full"``, SELECT's: trl 0.13's SFTTrainer on ``messages`` with its default collator).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import torch
from pydantic import model_validator

from workbench.errors import ConfigError
from workbench.settings import Number, Positive, Settings

#: Linear layers LoRA never touches (SELECT: embeddings, unembedding, attention keys).
EXCLUDED_MODULES = ("k_proj", "lm_head", "embed_tokens", "wte", "c_attn_k")


class FinetuneParams(Settings):
    """LoRA and optimisation settings (defaults finish in minutes on 2 CPU cores for 135M).

    Later additions (left out of ``to_dict`` at their defaults, so artifact hashes stay):
    ``grad_accumulation``; ``scheduler`` and ``warmup_steps``; ``weight_decay``; ``optimizer``
    (a Trainer ``optim`` name, "" for its default; ``paged_*`` optimizers fall back to
    ``adamw_torch``, the same update, without CUDA or bitsandbytes); ``bf16`` (mixed precision,
    on a CUDA device that supports it only); ``gradient_checkpointing``; ``loss``
    (``completion`` or ``full``); ``dpo_batch_size`` and ``dpo_max_length`` (0: as SFT's).
    """

    label: ClassVar[str] = "parameter"

    rank: Positive = 32
    alpha: Positive = 64
    dropout: Number = 0.05
    learning_rate: Number = 1e-3
    epochs: Positive = 2
    batch_size: Positive = 8
    max_length: Positive = 160
    dpo_beta: Number = 0.1
    dpo_learning_rate: Number = 5e-4
    dpo_epochs: Positive = 1
    grad_accumulation: Positive = 1
    scheduler: str = "linear"
    warmup_steps: int = 2
    weight_decay: Number = 0.0
    optimizer: str = ""
    bf16: bool = False
    gradient_checkpointing: bool = False
    loss: Literal["completion", "full"] = "completion"
    dpo_batch_size: int = 0
    dpo_max_length: int = 0

    @model_validator(mode="before")
    @classmethod
    def _loss(cls, data: Any) -> Any:
        """``loss`` in these words, before the types are checked."""
        if isinstance(data, dict) and data.get("loss", "completion") not in ("completion", "full"):
            raise ConfigError(f"loss must be completion or full, got {data['loss']!r}")
        return data

    def to_dict(self) -> dict:
        return omit_added_defaults(super().to_dict())


#: FinetuneParams fields added after artifacts were first saved, with their defaults.
ADDED_DEFAULTS = {
    "grad_accumulation": 1,
    "scheduler": "linear",
    "warmup_steps": 2,
    "weight_decay": 0.0,
    "optimizer": "",
    "bf16": False,
    "gradient_checkpointing": False,
    "loss": "completion",
    "dpo_batch_size": 0,
    "dpo_max_length": 0,
}


def omit_added_defaults(d: dict, added: dict | None = None) -> dict:
    """``d`` without the later-added fields that are at their defaults."""
    added = ADDED_DEFAULTS if added is None else added
    return {k: v for k, v in d.items() if k not in added or v != added[k]}


def _linear_names(model: torch.nn.Module) -> list[str]:
    return [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _blocks_prefix(model: torch.nn.Module) -> str | None:
    from workbench.generation.hooks import UnsupportedModelError, decoder_blocks

    try:
        return decoder_blocks(model)[0]
    except UnsupportedModelError:
        return None


def lora_target_modules(model: torch.nn.Module) -> list[str]:
    """Names (last component) of the linear layers of the model's decoder blocks that LoRA
    adapts (all of the model's linear layers where its blocks are not found). Fused projections
    are adapted whole: Phi-3's ``qkv_proj`` includes the key projection."""
    prefix = _blocks_prefix(model)
    names = {
        name.rsplit(".", 1)[-1]
        for name in _linear_names(model)
        if prefix is None or name.startswith(prefix + ".")
    }
    return sorted(n for n in names if n not in EXCLUDED_MODULES)


def lora_excluded(model: torch.nn.Module) -> str | None:
    """peft's ``exclude_modules``: where layers named as :func:`lora_target_modules` also live
    outside the decoder blocks (an image-text model's vision tower), a pattern matching every
    module outside the blocks; else None (``target_modules`` stays a list of names either way)."""
    import re

    names, prefix = lora_target_modules(model), _blocks_prefix(model)
    if prefix is None or not any(
        not name.startswith(prefix + ".") and name.rsplit(".", 1)[-1] in names
        for name in _linear_names(model)
    ):
        return None
    return rf"(?!(.*\.)?{re.escape(prefix)}\.).*"


def lora_config(model, params: FinetuneParams):
    from peft import LoraConfig

    return LoraConfig(
        r=params.rank,
        lora_alpha=params.alpha,
        lora_dropout=params.dropout,
        target_modules=lora_target_modules(model),
        exclude_modules=lora_excluded(model),
        task_type="CAUSAL_LM",
        bias="none",
    )


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
                with (
                    contextlib.redirect_stderr(io.StringIO()),
                    contextlib.redirect_stdout(io.StringIO()),
                ):
                    yield
    finally:
        hf_logging.set_verbosity(old)
        for lg, lvl in zip(loggers, levels):
            lg.setLevel(lvl)


def _optimizer(name: str, cuda: bool) -> str:
    """``name``, or ``adamw_torch`` for a bitsandbytes (paged) optimizer that cannot run here
    (off CUDA, or without bitsandbytes)."""
    if name.startswith("paged_") or "bnb" in name or "8bit" in name:
        import importlib.util

        if not cuda or importlib.util.find_spec("bitsandbytes") is None:
            return "adamw_torch"
    return name


def _common_args(
    model,
    params: FinetuneParams,
    seed: int,
    progress: bool,
    lr: float,
    epochs: int,
    batch_size: int | None = None,
    max_length: int | None = None,
) -> dict:
    # where the model is, not whether the machine has a GPU: a model on the CPU trains there
    cuda = next(model.parameters()).device.type == "cuda"
    args = dict(
        output_dir=tempfile.mkdtemp(prefix="wb-train-"),
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size or params.batch_size,
        learning_rate=lr,
        lr_scheduler_type=params.scheduler,
        warmup_steps=params.warmup_steps,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        seed=seed,
        data_seed=seed,
        disable_tqdm=not progress,
        use_cpu=not cuda,
        bf16=bool(params.bf16 and cuda and torch.cuda.is_bf16_supported()),
        fp16=False,
        dataloader_num_workers=0,
        max_length=max_length or params.max_length,
        gradient_accumulation_steps=params.grad_accumulation,
        weight_decay=params.weight_decay,
        gradient_checkpointing=params.gradient_checkpointing,
    )
    if params.optimizer:
        args["optim"] = _optimizer(params.optimizer, cuda)
    return args


def train_sft(
    model,
    tokenizer,
    pairs: Sequence[tuple[str, str]],
    params: FinetuneParams,
    seed: int = 0,
    progress: bool = False,
):
    """LoRA-SFT ``model`` on (question, response) pairs; returns the trained PeftModel."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    data = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": q}],
                "completion": [{"role": "assistant", "content": a}],
            }
            for q, a in pairs
        ]
    )
    torch.manual_seed(seed)
    with _quiet_training(progress):
        args = SFTConfig(
            **_common_args(model, params, seed, progress, params.learning_rate, params.epochs),
            completion_only_loss=params.loss == "completion",
            packing=False,
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
            peft_config=lora_config(model, params),
        )
        trainer.train()
    return _trained(trainer, args)


def train_dpo(
    model,
    tokenizer,
    triples: Sequence[tuple[str, str, str]],
    params: FinetuneParams,
    seed: int = 0,
    progress: bool = False,
):
    """LoRA-DPO ``model`` on (question, chosen, rejected); the reference is ``model`` itself
    (the adapter disabled). A ``PeftModel`` with a trainable adapter is trained further, with a
    frozen copy of that adapter as the reference (trl's "ref" adapter: SELECT's continuation of
    its SFT adapter). Returns the trained PeftModel."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    data = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": q}],
                "chosen": [{"role": "assistant", "content": c}],
                "rejected": [{"role": "assistant", "content": r}],
            }
            for q, c, r in triples
        ]
    )
    torch.manual_seed(seed)
    with _quiet_training(progress):
        args = DPOConfig(
            **_common_args(
                model,
                params,
                seed,
                progress,
                params.dpo_learning_rate,
                params.dpo_epochs,
                params.dpo_batch_size,
                params.dpo_max_length,
            ),
            beta=params.dpo_beta,
        )
        peft_config = None if _is_peft(model) else lora_config(model, params)
        trainer = DPOTrainer(
            model=model,
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainer.train()
    return _trained(trainer, args)


def _trained(trainer, args):
    """The trained model in eval mode, the trainer's scratch output directory removed."""
    trained = trainer.model
    assert trained is not None  # the trainer holds the model it was given
    trained.eval()
    assert args.output_dir is not None  # _common_args gives a temporary directory
    _cleanup(args.output_dir)
    return trained


def _is_peft(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, PeftModel)


def _cleanup(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
