"""Named protocols: technique parameters plus the experiment settings that go with them.

A preset has two parts. ``PRESETS[name][technique]`` are technique parameter overrides (an
experiment's own ``technique_params`` apply on top). ``SETTINGS[name]`` are experiment settings
(generation, evaluation sampling, seeds, the detector and aggregation a notebook reports): an
:class:`~workbench.experiments.ExperimentConfig` field left unset (``None``) takes its preset's
value, so ``ExperimentConfig(preset="select", max_new_tokens=64)`` is SELECT's protocol with one
setting changed.

``select`` is SELECT's code (kinshuk-h/SELECT), setting by setting: the table in docs/select.md "SELECT's
protocol, setting by setting" gives each with its file and line, and
``tests/test_select_preset.py`` fails when this module drifts from that table. Its prompt text
(instruction, templates, refusal replies, the steering reading template, the system prompt) is
read from the imported benchmark (``import-select`` copies it from the user's clone), never
shipped here.
"""

from __future__ import annotations

from typing import Any

from workbench.registry import Registry
from workbench.select.sampling import SELECT_RUN_SEED, run_seeds

#: SELECT's LoRA fine-tuning (tuning/aft.py, apo.py). ``sft_dpo`` trains its SFT stage with its
#: own parameters, so both techniques carry all of them (one SFT adapter serves both).
_SELECT_TUNING: dict[str, Any] = {
    "mixture": "select",
    "prompt_template": "select",
    "rank": 32,
    "alpha": 32,
    "dropout": 0.0,
    "learning_rate": 5e-5,
    "epochs": 10,
    "batch_size": 16,
    "grad_accumulation": 2,
    "scheduler": "cosine",
    "warmup_steps": 0,
    "weight_decay": 0.01,
    "optimizer": "paged_adamw_32bit",
    "bf16": True,
    "gradient_checkpointing": True,
    "loss": "full",
    "max_length": 1024,
    "dpo_beta": 0.1,
    "dpo_learning_rate": 5e-6,
    "dpo_epochs": 5,
    "dpo_batch_size": 8,
    "dpo_max_length": 8192,
    "dpo_init": "continue",
}

#: Technique parameter overrides per preset.
PRESETS: Registry[dict[str, dict[str, Any]]] = Registry(
    "preset",
    {
        "workbench": {},
        "select": {
            "base": {"protocol": "select"},
            "zero_shot": {"protocol": "select"},
            "few_shot_cot": {"style": "select", "examples": "benchmark", "min_new_tokens": 1024},
            "steering": {
                "mixture": "select",
                "method": "repe_pca",
                "n_vectors": 3,
                "centered": False,
                "reading_template": True,
                "read_final_norm": True,
                "pooling": "last",
                "rank_by": "min_gap",
                "threshold_rule": "select",
                "n_layers": 3,
                "aggregate": "all",
                "decision": "separate",
                "prompt_template": "select",
            },
            "sft": dict(_SELECT_TUNING),
            "sft_dpo": dict(_SELECT_TUNING),
        },
    },
)

#: The workbench's own experiment settings (what an unset field means without a preset).
WORKBENCH_SETTINGS: dict[str, Any] = {
    "seeds": (0,),
    "technique_seeds": {},
    "n_target": 20,
    "n_descendant": 20,
    "n_specificity": 20,
    "n_unrelated": 10,
    "max_new_tokens": 40,
    "temperature": 0.7,
    "top_p": 1.0,
    "do_sample": False,
    "early_stop": True,
    "system_prompt": "",
    "eval_sampling": "workbench",
    "eval_seed": SELECT_RUN_SEED,
    "detector": "refused_phrase",
    "aggregate": "bootstrap",
}

_SELECT_SEEDS = run_seeds()

#: Experiment settings per preset (on top of the workbench's).
SETTINGS: dict[str, dict[str, Any]] = {
    "workbench": {},
    "select": {
        # generate.py: five replications, seeds derived from --seed (20240828 for the release)
        "seeds": _SELECT_SEEDS,
        # the release holds one replication of steering and fine-tuning (the first seed)
        "technique_seeds": {
            "steering": _SELECT_SEEDS[:1],
            "sft": _SELECT_SEEDS[:1],
            "sft_dpo": _SELECT_SEEDS[:1],
        },
        # task.py prepare_instances: all target questions; num_queries sampled from the pooled
        # descendant / specificity questions (30 for atoms, 20 for compositions); no far set
        "eval_sampling": "select",
        "eval_seed": SELECT_RUN_SEED,
        "n_target": 30,
        "n_descendant": 30,
        "n_specificity": 30,
        "n_unrelated": 0,
        # generate.py DEFAULT_CONFIG: sampled, temperature 0.6, top-p 0.9, 512 new tokens
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.9,
        "max_new_tokens": 512,
        # SELECT decodes to the end: no early stop on a refusal
        "early_stop": False,
        # inference/huggingface.py make_prompt: a default system turn for every chat prompt
        "system_prompt": "select",
        # evaluate.py: --method heuristic; mean over seeds, then concepts, t-interval
        "detector": "refused_select_heuristic",
        "aggregate": "select",
    },
}


#: The question counts and budget notebooks 01/02 use under the workbench preset (the demo's:
#: smaller than the workbench's experiment defaults, to run in minutes on a laptop).
NOTEBOOK_SIZES: dict[str, Any] = {
    "n_target": 20,
    "n_descendant": 10,
    "n_specificity": 10,
    "max_new_tokens": 32,
}


def notebook_settings(preset: str, **values: Any) -> dict[str, Any]:
    """A notebook's experiment settings: what the user set; for what they left ``None``, the
    demo's sizes under the workbench preset, the preset's own values under any other."""
    preset_settings(preset)  # an unknown preset fails here
    return {
        k: (NOTEBOOK_SIZES.get(k) if v is None and preset == "workbench" else v)
        for k, v in values.items()
    }


def preset_params(preset: str, technique: str) -> dict[str, Any]:
    """The overrides ``preset`` gives ``technique`` (empty when it gives none)."""
    return dict(PRESETS[preset].get(technique, {}))


def preset_settings(preset: str) -> dict[str, Any]:
    """Every experiment setting under ``preset`` (the workbench's where it sets none)."""
    PRESETS[preset]  # an unknown preset: one line naming the known ones
    return {**WORKBENCH_SETTINGS, **SETTINGS.get(preset, {})}
