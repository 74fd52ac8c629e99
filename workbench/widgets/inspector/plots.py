"""The steering inspector's figures: validation similarity per layer and one layer's histogram.

Drawn without pyplot's global state (``new_figure``), so that two kernel threads may draw at once.
"""

from __future__ import annotations

import io

import torch

from workbench.plots.save import new_figure
from workbench.steering.gate import LayerStats

#: Figure size in inches and the PNG resolution: 6 x 2.4 in at 150 dpi is a 900 x 360 PNG, shown
#: at the output area's width up to ``PLOT_MAX_PX`` pixels (sharp on high-density screens).
PLOT_IN = (6.0, 2.4)
DPI = 150
PLOT_MAX_PX = 600
LEGEND_PT = 8


def fig_to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _legend_outside(fig, axes) -> None:
    """One legend for every labelled artist of ``axes``, one entry per label, right of the axes."""
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="outside right upper", fontsize=LEGEND_PT, frameon=False)


def gap_figure(
    table: list[LayerStats],
    chosen: list[int],
    behavior: list[int] | None = None,
    concept: str | None = None,
):
    """Mean related and unrelated validation similarity per layer: the gap shaded green where
    related questions score higher, red where lower; condition layers dotted, behaviour layers
    (where the refusal vector is added) dashed; validation AUROC (grey) on a second axis. Every
    line has a legend entry; the legend sits outside the curves; the title names ``concept``."""
    layers = [r.layer for r in table]
    rel = [r.mean_related for r in table]
    unrel = [r.mean_unrelated for r in table]
    fig = new_figure(*PLOT_IN)
    ax = fig.subplots()
    ax.plot(layers, rel, marker="o", ms=3, label="related")
    ax.plot(layers, unrel, marker="o", ms=3, label="unrelated")
    above = [r >= u for r, u in zip(rel, unrel)]
    ax.fill_between(
        layers,
        unrel,
        rel,
        where=above,
        interpolate=True,
        color="tab:green",
        alpha=0.15,
        label="related higher" if any(above) else "_nolegend_",
    )
    ax.fill_between(
        layers,
        unrel,
        rel,
        where=[not a for a in above],
        interpolate=True,
        color="tab:red",
        alpha=0.15,
        label="related lower" if not all(above) else "_nolegend_",
    )
    for layer in chosen:
        ax.axvline(layer, color="0.2", ls=":", lw=1.2, label="condition layer")
    for layer in behavior or []:
        ax.axvline(layer, color="tab:purple", ls="--", lw=1, label="steering layer")
    axes = [ax]
    if table and table[0].auroc == table[0].auroc:
        ax2 = ax.twinx()
        ax2.plot(layers, [r.auroc for r in table], color="0.5", lw=1, label="AUROC (right axis)")
        ax2.set_ylim(0, 1)
        ax2.set_ylabel("AUROC", fontsize=LEGEND_PT)
        ax2.tick_params(labelsize=LEGEND_PT)
        axes.append(ax2)
    ax.set_xlabel("layer", fontsize=9)
    ax.set_ylabel("mean cosine", fontsize=9)
    ax.tick_params(labelsize=LEGEND_PT)
    ax.set_title(
        "validation similarity per layer" + (f": {concept}" if concept else ""), fontsize=9
    )
    _legend_outside(fig, axes)
    return fig


def histogram_figure(
    related: torch.Tensor, unrelated: torch.Tensor, layer: int, threshold: float, votes: bool = True
):
    """Histogram of validation similarities at one layer with the threshold drawn (dashed and
    labelled "does not vote" when the layer is not a condition layer)."""
    fig = new_figure(*PLOT_IN)
    ax = fig.subplots()
    bins = torch.linspace(
        min(related.min(), unrelated.min()).item() - 0.05,
        max(related.max(), unrelated.max()).item() + 0.05,
        21,
    ).tolist()
    ax.hist(related.tolist(), bins=bins, alpha=0.6, label=f"related (n={len(related)})")
    ax.hist(unrelated.tolist(), bins=bins, alpha=0.6, label=f"unrelated (n={len(unrelated)})")
    label = f"threshold {threshold:+.3f}" + ("" if votes else " (not voting)")
    ax.axvline(threshold, color="k", lw=1.5, ls="-" if votes else "--", label=label)
    ax.set_xlabel(f"cosine similarity at layer {layer}", fontsize=9)
    ax.set_ylabel("questions", fontsize=9)
    ax.tick_params(labelsize=LEGEND_PT)
    if not votes:
        ax.set_title(f"layer {layer} does not vote", fontsize=9, color="#b35900")
    _legend_outside(fig, [ax])
    return fig
