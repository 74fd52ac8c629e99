"""Showing a widget so that it says plainly when it needs the kernel again.

A widget is alive only while the kernel that made it runs. After a kernel restart its controls
stay on screen but do nothing (ipywidgets marks every view ``jupyter-widgets-disconnected``);
in a saved notebook opened again JupyterLab finds no model and prints "Error displaying widget:
model not found". :func:`display_live` shows a short note before the widget that is hidden
while the widget is alive and shown in both of those cases, saying what happened, that nothing
is lost and how to get the widget back; while disconnected, the widget is dimmed and takes no
clicks. The note and its style are ordinary notebook output (HTML), so a saved notebook keeps
them; where JupyterLab drops the style (an untrusted notebook), the note simply stays visible.
"""

from __future__ import annotations

import html

#: The class of a widget shown by :func:`display_live`.
LIVE_CLASS = "wb-live"

#: Rules scoped to the output of a cell that shows a live widget: hide the note while the
#: widget is connected; dim a disconnected widget (one banner, not a broken-link icon on every
#: control); replace JupyterLab's "model not found" text (an output with no element inside)
#: by the note.
LIVE_CSS = f"""
.jp-OutputArea:has(.{LIVE_CLASS}:not(.jupyter-widgets-disconnected)) .wb-kernel-note {{
  display: none;
}}
.{LIVE_CLASS}.jupyter-widgets-disconnected {{ opacity: 0.4; pointer-events: none; }}
.{LIVE_CLASS}.jupyter-widgets-disconnected::before,
.{LIVE_CLASS} .jupyter-widgets-disconnected::before {{ display: none; }}
.jp-OutputArea:has(.wb-kernel-note) .jp-OutputArea-output.jupyter-widgets:not(:has(*)) {{
  display: none;
}}
"""


def kernel_note_html(what: str, kept: str) -> str:
    """The note (and its style) for a widget described as ``what`` ("the labeller"); ``kept``
    says what survives without the kernel ("every label is in labels.jsonl")."""
    return (
        f"<style>{LIVE_CSS}</style>"
        "<div class='wb-kernel-note' style='border-left:4px solid #d9a53f;padding:4px 10px;"
        "background:#fdf6e3;margin:4px 0'>"
        f"<b>{html.escape(what[:1].upper() + what[1:])} needs this notebook's kernel</b>, and the "
        "kernel that made it is gone (restarted, or the notebook was opened again), so it no "
        f"longer responds. Nothing is lost: {html.escape(kept)}. "
        "<b>To use it again, run this cell</b> (Shift+Enter), or Run ▸ Run All Cells."
        "</div>"
    )


def display_live(widget, what: str, kept: str) -> None:
    """Display ``widget`` after its kernel note (see the module's docstring)."""
    from IPython.display import HTML, display

    widget.add_class(LIVE_CLASS)
    display(HTML(kernel_note_html(what, kept)))
    display(widget)
