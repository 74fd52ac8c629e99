"""Figures about raw generations."""

from __future__ import annotations

from workbench.plots.save import new_figure


def plot_answer_lengths(frame, ax=None):
    """Bar chart of generated tokens per prompt, coloured by why generation stopped."""
    import seaborn as sns

    if ax is None:
        ax = new_figure(6, 0.35 * len(frame) + 1.2).subplots()
    labels = [p if len(p) <= 48 else p[:45] + "..." for p in frame["prompt"]]
    sns.barplot(
        x=frame["n_tokens"],
        y=labels,
        hue=frame["finish_reason"],
        dodge=False,
        ax=ax,
        palette="colorblind",
    )
    ax.set_xlabel("generated tokens")
    ax.set_ylabel("")
    ax.legend(title="finished by", loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    return ax.figure
