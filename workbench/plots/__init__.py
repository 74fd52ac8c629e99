"""Figures: one function per figure; every figure is saved as PDF and PNG."""

from workbench.plots.generation import plot_answer_lengths
from workbench.plots.save import (
    FIGURE_WIDTHS,
    FIGURES_DIR,
    NoFigure,
    export_run_figures,
    new_figure,
    run_figures,
    save_figure,
    save_run_figure,
    technique_palette,
)

__all__ = [
    "FIGURES_DIR",
    "FIGURE_WIDTHS",
    "NoFigure",
    "export_run_figures",
    "new_figure",
    "plot_answer_lengths",
    "run_figures",
    "save_figure",
    "save_run_figure",
    "technique_palette",
]
