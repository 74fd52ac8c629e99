"""The reliability diagram of a detector's calibrated probabilities."""

from __future__ import annotations

from workbench.plots.save import new_figure


def plot_reliability(table, title: str = "refusal probe, models held out"):
    """Observed share of refusals against mean predicted P(refused) per bin (``table`` as
    :func:`workbench.scoring.probe.loso.reliability` gives it), the diagonal for reference and
    each bin's count beside its point."""
    fig = new_figure("column", 3.0)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfectly calibrated")
    ax.plot(table["predicted"], table["observed"], marker="o", lw=1.5, label="probe")
    for x, y, n in zip(table["predicted"], table["observed"], table["n"]):
        ax.annotate(
            f"{n:,}", (x, y), textcoords="offset points", xytext=(5, -4), fontsize=8, va="top"
        )
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="predicted P(refused)", ylabel="observed refusals")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return fig
