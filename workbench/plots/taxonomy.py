"""Figures about the benchmark's taxonomies."""

from __future__ import annotations

from workbench.plots.save import new_figure


def plot_taxonomy_levels(bench, ax=None):
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
    if ax is None:
        ax = new_figure(7, 3.5).subplots()
    sns.barplot(frame, x="level", y="concepts", hue="group", ax=ax, palette="colorblind")
    ax.set_xlabel("taxonomy level (root = 0)")
    ax.set_ylabel("concepts")
    ax.legend(title="", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return ax.figure
