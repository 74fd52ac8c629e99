"""Summary tables for papers (LaTeX with booktabs, intervals as ±, best per column in bold)."""

from workbench.tables.latex import (
    concepts_latex,
    editing_latex,
    latex_table,
    select_latex,
    side_by_side_latex,
    technique_latex,
    to_latex,
    unknown_latex,
    write_latex,
)

__all__ = [
    "concepts_latex",
    "editing_latex",
    "latex_table",
    "select_latex",
    "side_by_side_latex",
    "technique_latex",
    "to_latex",
    "unknown_latex",
    "write_latex",
]
