"""Seed 001's refusal evaluation as a suite: named datasets with the behaviour expected of a
model, K sampled answers, every detector and an optional LLM judge, c(x) per prompt and the
splits that misbehave (``python -m workbench refusal-eval CONFIG.yaml``)."""

from workbench.refusal.config import (
    SAMPLING_PRESETS,
    SEED_PROTOCOL,
    AbstainerConfig,
    DatasetRef,
    JudgeConfig,
    SamplingConfig,
    SuiteConfig,
)
from workbench.refusal.datasets import (
    DATASETS,
    EXPECTED,
    DatasetError,
    PromptItem,
    PromptSet,
    load_dataset,
    read_prompt_file,
)
from workbench.refusal.suite import RefusalSuite, SuiteResult, run_suite

__all__ = [
    "DATASETS",
    "EXPECTED",
    "SAMPLING_PRESETS",
    "SEED_PROTOCOL",
    "AbstainerConfig",
    "DatasetError",
    "DatasetRef",
    "JudgeConfig",
    "PromptItem",
    "PromptSet",
    "RefusalSuite",
    "SamplingConfig",
    "SuiteConfig",
    "SuiteResult",
    "load_dataset",
    "read_prompt_file",
    "run_suite",
]
