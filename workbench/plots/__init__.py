"""Figures: one function per figure; every figure is saved as PDF and PNG."""

from workbench.plots.generation import plot_answer_lengths
from workbench.plots.save import FIGURES_DIR, save_figure, technique_palette

__all__ = ["plot_answer_lengths", "FIGURES_DIR", "save_figure", "technique_palette"]
