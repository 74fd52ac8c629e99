"""Saving figures consistently (PDF for papers, PNG for the README and notebooks)."""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from workbench.paths import repo_root

FIGURES_DIR = repo_root() / "figures"

#: Figure widths for papers, in inches: ``"column"`` is one column of a two-column paper
#: (ICML 3.25 in, ACL 3.3 in, IEEE 3.5 in: 3.25 fits them all), ``"page"`` the full text width
#: of a two-column paper (ICML 6.75 in; ACL 6.3 in and NeurIPS' single column 5.5 in scale it
#: down by less than a fifth). ``save_figure(..., width="column")`` saves at exactly that width.
FIGURE_WIDTHS = {"column": 3.25, "page": 6.75}

#: The size of every text in a figure, in points on the page: labels, ticks, legends, values
#: written on bars, annotations. 8 pt is the smallest text venues accept in a figure; the
#: figures are drawn at a paper width (``new_figure("column", ...)``), so saving them there
#: (``width="column"``) keeps it.
FONT_SIZE = 8
#: Titles of panels and figures: one step above :data:`FONT_SIZE`.
TITLE_SIZE = 9
#: matplotlib settings the figure functions draw under (:func:`workbench.plots.style.paper_figure`).
PAPER_RC = {
    "font.size": FONT_SIZE,
    "axes.titlesize": TITLE_SIZE,
    "axes.labelsize": FONT_SIZE,
    "xtick.labelsize": FONT_SIZE,
    "ytick.labelsize": FONT_SIZE,
    "legend.fontsize": FONT_SIZE,
    "legend.title_fontsize": FONT_SIZE,
    "figure.titlesize": TITLE_SIZE,
    "legend.frameon": False,
}

#: One colour per technique, the same in every figure.
TECHNIQUE_ORDER = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]


def technique_palette() -> dict[str, tuple]:
    import seaborn as sns

    colours = sns.color_palette("colorblind", len(TECHNIQUE_ORDER))
    return dict(zip(TECHNIQUE_ORDER, colours))


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """Width in points of ``text``'s widest line at ``size`` points (matplotlib's own font
    metrics)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop = FontProperties(size=size)
    return max(
        (
            text_to_path.get_text_width_height_descent(line, prop, ismath=False)[0]
            for line in text.split("\n")
        ),
        default=0.0,
    )


def _at_separators(text: str, limit: float, size: float) -> list[str]:
    """``text`` (one line) broken after ``@``, ``:``, ``/``, ``_`` or ``-`` into lines of at most
    ``limit`` points where it is wider: ``steering@`` / ``wn:09411430-n``, not ``wn:0`` /
    ``9411430-n``. A line with no separator to break at is left as it is."""
    if text_width(text, size) <= limit:
        return [text]
    lines, current = [], ""
    for piece in re.split(r"(?<=[@:/_-])", text):
        if current and text_width(current + piece, size) > limit:
            lines.append(current)
            current = piece
        else:
            current += piece
    return [*lines, current]


def fit_lines(parts: Sequence[str], inches: float, size: float = FONT_SIZE) -> str:
    """``parts`` (phrases) joined into lines no wider than ``inches`` at ``size`` points: a
    phrase stays on one line when it fits one, a longer one is broken between words (a word
    wider than a line, such as a long model id, within the word)."""
    limit = inches * 72
    pieces: list[str] = []
    for part in parts:
        if text_width(part, size) <= limit:
            pieces.append(part)
            continue
        for split_words in (False, True):  # a word wider than the line is cut only if need be
            chars = max(8, int(limit / (0.55 * size)))  # a first guess, narrowed until it fits
            chunk = textwrap.wrap(part, chars, break_long_words=split_words)
            while any(text_width(c, size) > limit for c in chunk) and chars > 8:
                chars -= 2
                chunk = textwrap.wrap(part, chars, break_long_words=split_words)
            if all(text_width(c, size) <= limit for c in chunk):
                break
            if not split_words:  # a word too wide: after its separators (@ : / _ -) if it fits
                soft = [line for c in chunk for line in _at_separators(c, limit, size)]
                if all(text_width(c, size) <= limit for c in soft):
                    chunk = soft
                    break
        pieces.extend(chunk)
    lines: list[str] = []
    for piece in pieces:
        if lines and text_width(f"{lines[-1]} {piece}", size) <= limit:
            lines[-1] = f"{lines[-1]} {piece}"
        else:
            lines.append(piece)
    return "\n".join(lines)


class NoFigure:
    """What a figure function returns for data it cannot draw meaningfully (one target, a
    probe that failed): the reason, shown in the notebook instead of an empty plot."""

    def __init__(self, reason: str):
        self.reason = reason

    def _repr_markdown_(self) -> str:
        return f"*No figure: {self.reason}.*"

    def __repr__(self) -> str:
        return f"NoFigure({self.reason!r})"


def figure_width(width: float | str) -> float:
    """Inches: a number as given, or a preset of :data:`FIGURE_WIDTHS` ("column", "page")."""
    if isinstance(width, str):
        if width not in FIGURE_WIDTHS:
            from workbench.errors import ConfigError

            raise ConfigError(
                f"unknown figure width {width!r}: a number of inches or one of "
                f"{sorted(FIGURE_WIDTHS)}"
            )
        return FIGURE_WIDTHS[width]
    return float(width)


def new_figure(width: float | str, height: float):
    """A matplotlib Figure outside pyplot's global state (safe from any thread, never shown
    twice, never leaked into a log). ``width``: inches or a preset ("column", "page")."""
    from matplotlib.figure import Figure

    return Figure(figsize=(figure_width(width), height), layout="constrained")


#: Metadata that would change between two saves of the same figure, left out: the PDF's
#: creation date. (A PNG from matplotlib carries no date: its only text is the software line,
#: which changes with matplotlib's version alone, pinned in requirements.lock.)
_STABLE_METADATA = {".pdf": {"CreationDate": None}, ".png": None}


def save_figure(
    fig,
    name: str,
    directory: str | os.PathLike | None = None,
    dpi: int = 200,
    width: float | str | None = None,
) -> list[Path]:
    """Save ``fig`` as ``<directory>/<name>.pdf`` and ``.png``; return both paths (none, with a
    printed note, for a :class:`NoFigure`).

    ``width`` ("column", "page" or inches; :data:`FIGURE_WIDTHS`) resizes the figure to that
    width, keeping its aspect ratio, and saves the page at exactly that size (no tight crop),
    ready for ``\\includegraphics`` at 100%. The same figure always gives the same bytes (no
    dates), so re-running a notebook does not dirty the checkout's figures/."""
    if isinstance(fig, NoFigure):
        print(f"no figure {name!r}: {fig.reason}")
        return []
    out = Path(directory) if directory else FIGURES_DIR
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    if width is not None:
        w, h = fig.get_size_inches()
        inches = figure_width(width)
        fig.set_size_inches(inches, h * inches / w)
        if fig.get_layout_engine() is None:
            fig.set_layout_engine("constrained")
    elif fig.get_layout_engine() is None:
        fig.tight_layout()
    for p in paths:
        fig.savefig(
            p,
            dpi=dpi,
            bbox_inches=None if width is not None else "tight",
            metadata=_STABLE_METADATA[p.suffix],
        )
    return paths


def run_figures(run_name: str) -> Path:
    """``runs/<run_name>/figures/``: where a notebook run saves its figures."""
    from workbench.paths import run_path

    path = run_path(run_name) / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


class SavedFigure(list):
    """The paths a figure was saved to; in a notebook it reads as one line naming them (the
    figure itself is shown above it)."""

    def _repr_markdown_(self) -> str:
        from workbench.paths import shown_path

        return "saved: " + ", ".join(f"`{shown_path(p)}`" for p in self) if self else ""

    def __repr__(self) -> str:  # the plain-text form of the same line
        from workbench.paths import shown_path

        return "saved: " + ", ".join(shown_path(p) for p in self) if self else "saved: nothing"


def show_inline(fig) -> bool:
    """Show ``fig`` in the output of the running notebook cell (as PNG, so it does not depend
    on which matplotlib backend the kernel has); nothing outside a kernel. True when shown."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the kernel
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    import io

    from IPython.display import Image, display

    buf = io.BytesIO()
    # 150 dpi: a column-wide figure (3.25 in) shows about 490 px wide, its 8 pt text at 17 px
    fig.savefig(buf, format="png", dpi=150, bbox_inches="tight")
    display(Image(data=buf.getvalue(), format="png"))
    return True


def _caption_numerics(fig, run_name: str, width: float | str | None = None) -> None:
    """Name speed-first numerics (bf16: answers depend on batch and CPU) in the figure's
    caption when the run recorded any (:func:`workbench.models.numerics.run_numerics_note`)."""
    from workbench.models.numerics import run_numerics_note
    from workbench.paths import run_path

    note = run_numerics_note(run_path(run_name))
    if not note:
        return
    current = fig._suptitle.get_text() if fig._suptitle is not None else ""
    if note not in current:
        inches = figure_width(width) if width is not None else fig.get_size_inches()[0]
        note = fit_lines([note], inches, FONT_SIZE)
        fig.suptitle(f"{current}\n{note}" if current else note, fontsize=FONT_SIZE, color="#9a3412")


def save_run_figure(fig, run_name: str, name: str, width: float | str | None = None) -> SavedFigure:
    """Save ``fig`` into the run's own figure folder (never ``figures/``) and, in a notebook,
    show it inline; a :class:`NoFigure` shows why there is none instead. ``width``: a paper
    width ("column", "page"; :data:`FIGURE_WIDTHS`) or inches, as :func:`save_figure`."""
    if not isinstance(fig, NoFigure):
        _caption_numerics(fig, run_name, width)
    paths = SavedFigure(save_figure(fig, name, run_figures(run_name), width=width))
    if not isinstance(fig, NoFigure):
        show_inline(fig)
    return paths


def export_run_figures(
    run_name: str, prefix: str, directory: str | os.PathLike | None = None
) -> list[Path]:
    """Copy a run's figures to ``figures/`` (or ``directory``) as ``<prefix>_<name>.{pdf,png}``:
    the explicit step that updates the README's figures."""
    import re
    import shutil

    if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix) or prefix in (".", ".."):
        from workbench.errors import ConfigError

        raise ConfigError(f"figure prefix {prefix!r} is not a plain file-name prefix (no folders)")
    out = Path(directory) if directory else FIGURES_DIR
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for f in sorted(run_figures(run_name).glob("*.p[dn][fg]")):
        target = out / f"{prefix}_{f.name}"
        shutil.copyfile(f, target)
        copied.append(target)
    return copied
