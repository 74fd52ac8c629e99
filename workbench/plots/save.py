"""Saving figures consistently (PDF for papers, PNG for the README and notebooks)."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.paths import repo_root

FIGURES_DIR = repo_root() / "figures"

#: One colour per technique, the same in every figure.
TECHNIQUE_ORDER = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]


def technique_palette() -> dict[str, tuple]:
    import seaborn as sns

    colours = sns.color_palette("colorblind", len(TECHNIQUE_ORDER))
    return dict(zip(TECHNIQUE_ORDER, colours))


def save_figure(fig, name: str, directory: str | os.PathLike | None = None, dpi: int = 200) -> list[Path]:
    """Save ``fig`` as ``<directory>/<name>.pdf`` and ``.png``; return both paths."""
    out = Path(directory) if directory else FIGURES_DIR
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=dpi, bbox_inches="tight")
    return paths
