"""Abstention Workbench: make language models abstain from (or be edited about) chosen concepts,
and measure how far that generalizes along a knowledge-graph taxonomy.

Data flows one way: taxonomy -> questions -> technique -> generations -> scores -> tables -> figures.
The verbs a session needs are here, imported when first used (``import workbench`` loads no
model library)::

    import workbench as wb

    lm = wb.load_model()           # the embedded model; "vllm:<model>", "openai:<model>" too
    bench = wb.load_benchmark()    # the shipped taxonomy and questions
    river = "wn:09411430-n"        # river (python -m workbench taxonomy find river)
    abstainer = wb.get_technique("zero_shot").prepare(lm, bench, river)
    table = wb.run_experiment({"targets": [river], "techniques": ["zero_shot"]})
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from workbench.errors import (
    ChatTemplateError,
    ConfigError,
    ModelLoadError,
    WorkbenchError,
)

if TYPE_CHECKING:  # what the lazy names below are, for type checkers and editors
    from workbench.backends import Backend, load_model
    from workbench.experiments import ExperimentConfig, Runner, run_experiment
    from workbench.generation import GenerationConfig, generate
    from workbench.registry import Registry
    from workbench.scoring import detect_refusal
    from workbench.scoring.detectors import detector_decisions
    from workbench.scoring.metrics import technique_table
    from workbench.taxonomy import Benchmark, load_benchmark
    from workbench.techniques import TECHNIQUES, Technique, get_technique, register

__version__ = "0.1.0"

#: Name -> the module that defines it (imported on first use).
_LAZY = {
    "load_model": "workbench.backends",
    "Backend": "workbench.backends",
    "load_benchmark": "workbench.taxonomy",
    "Benchmark": "workbench.taxonomy",
    "get_technique": "workbench.techniques",
    "register": "workbench.techniques",
    "Technique": "workbench.techniques",
    "TECHNIQUES": "workbench.techniques",
    "generate": "workbench.generation",
    "GenerationConfig": "workbench.generation",
    "ExperimentConfig": "workbench.experiments",
    "Runner": "workbench.experiments",
    "run_experiment": "workbench.experiments",
    "detect_refusal": "workbench.scoring",
    "detector_decisions": "workbench.scoring.detectors",
    "technique_table": "workbench.scoring.metrics",
    "Registry": "workbench.registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "TECHNIQUES",
    "Backend",
    "Benchmark",
    "ChatTemplateError",
    "ConfigError",
    "ExperimentConfig",
    "GenerationConfig",
    "ModelLoadError",
    "Registry",
    "Runner",
    "Technique",
    "WorkbenchError",
    "__version__",
    "detect_refusal",
    "detector_decisions",
    "generate",
    "get_technique",
    "load_benchmark",
    "load_model",
    "register",
    "run_experiment",
    "technique_table",
]
