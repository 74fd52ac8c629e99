"""Experiment grids: typed configs, a resumable runner, tidy result rows."""

from workbench.experiments.config import ExperimentConfig
from workbench.experiments.runner import Cell, Runner, evaluation_questions, run_experiment

__all__ = ["Cell", "ExperimentConfig", "Runner", "evaluation_questions", "run_experiment"]
