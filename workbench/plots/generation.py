"""Figures about raw generations (drawn at one column's width: :mod:`workbench.plots.style`)."""

from __future__ import annotations

from workbench.plots.save import FIGURE_WIDTHS, new_figure
from workbench.plots.style import count_axis, figure_height, legend_below, paper_figure, text_width

#: The widest a prompt's label may be (points): the rest of a column is left to its bar.
PROMPT_LABEL_POINTS = 0.45 * FIGURE_WIDTHS["column"] * 72


def _shorten(prompt: str) -> str:
    if text_width(prompt) <= PROMPT_LABEL_POINTS:
        return prompt
    while prompt and text_width(prompt + "...") > PROMPT_LABEL_POINTS:
        prompt = prompt[:-1]
    return prompt.rstrip() + "..."


@paper_figure
def plot_answer_lengths(frame, ax=None):
    """Bar chart of generated tokens per prompt, coloured by why generation stopped."""
    import seaborn as sns

    reasons = list(dict.fromkeys(frame["finish_reason"]))
    if ax is None:
        ax = new_figure("column", figure_height(0.16 * len(frame) + 0.2, 0, reasons)).subplots()
    sns.barplot(
        x=frame["n_tokens"],
        y=[_shorten(p) for p in frame["prompt"]],
        hue=frame["finish_reason"],
        dodge=False,
        ax=ax,
        palette="colorblind",
        errorbar=None,
    )
    ax.set_xlabel("generated tokens")
    ax.set_ylabel("")
    count_axis(ax.xaxis)
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    legend_below(ax.figure, handles, labels, title="finished by")
    return ax.figure
