"""LoRA fine-tuning with peft and trl: SFT on (question, response) pairs, DPO on preferences."""

from workbench.finetuning.lora import (
    FinetuneParams,
    lora_target_modules,
    train_dpo,
    train_sft,
)

__all__ = ["FinetuneParams", "lora_target_modules", "train_dpo", "train_sft"]
