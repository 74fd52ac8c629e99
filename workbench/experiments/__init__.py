"""Experiment grids: typed configs, a resumable runner, tidy result rows."""

from workbench.experiments.config import ExperimentConfig
from workbench.experiments.runner import (
    Cell,
    CellFailures,
    Runner,
    evaluation_questions,
    run_experiment,
)

__all__ = [
    "Cell",
    "CellFailures",
    "ExperimentConfig",
    "Runner",
    "evaluation_questions",
    "run_experiment",
]
