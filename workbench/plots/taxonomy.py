"""Figures about the benchmark's taxonomies (drawn at one column's width:
:mod:`workbench.plots.style`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.plots.save import new_figure
from workbench.plots.style import count_axis, figure_height, legend_below, paper_figure

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark


@paper_figure
def plot_taxonomy_levels(bench: Benchmark, ax=None):
    """Concepts per taxonomy level, one bar group per root type (atomic) plus compositions."""
    import pandas as pd
    import seaborn as sns

    rows = [
        {"level": bench.atomic.level(c.id), "group": bench.atomic[bench.atomic.root_of(c.id)].name}
        for c in bench.atomic
        if c.parent is not None
    ]
    rows += [
        {"level": bench.compositions.level(c.id), "group": "compositions"}
        for c in bench.compositions
    ]
    frame = pd.DataFrame(rows).groupby(["level", "group"]).size().reset_index(name="concepts")
    groups = list(dict.fromkeys(frame["group"]))
    if ax is None:
        ax = new_figure("column", figure_height(1.9, 0, groups)).subplots()
    sns.barplot(
        frame, x="level", y="concepts", hue="group", ax=ax, palette="colorblind", errorbar=None
    )
    ax.set_xlabel("taxonomy level (root = 0)")
    ax.set_ylabel("concepts")
    count_axis(ax.yaxis)
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    legend_below(ax.figure, handles, labels)
    return ax.figure
