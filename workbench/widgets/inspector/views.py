"""The HTML the steering inspector shows: the votes, the answers (marked when stale), the note on
a layer that does not vote and the plots' caption."""

from __future__ import annotations

import html

from workbench.widgets.inspector.state import Answer, LayerVote, Settings


def votes_html(votes: list[LayerVote], decision: bool, settings: Settings | None = None) -> str:
    rows = "".join(
        f"<tr><td>{v.layer}</td><td>{v.similarity:+.3f}</td><td>{v.threshold:+.3f}</td>"
        f"<td>{'fires' if v.fires else '-'}</td></tr>"
        for v in votes
    )
    verdict = "steer (about the concept)" if decision else "do not steer"
    rule = f" by vote <i>{settings.aggregate}</i>" if settings else ""
    return (
        f"<table><tr><th>layer</th><th>similarity</th><th>threshold</th><th></th></tr>{rows}</table>"
        f"<p><b>condition{rule}:</b> {verdict}</p>"
    )


def answers_html(answer: Answer, stale: str | None = None) -> str:
    """The unsteered and steered answers side by side, the question and settings that made them,
    and, when ``stale`` (what changed since), a plain stale label above them."""
    e = html.escape
    cell = "vertical-align:top;padding:4px 8px;border:1px solid #ccc;width:50%"
    label = "steered" if answer.fired else "not steered: the condition did not fire"
    made = e(answer.settings.describe())
    head = ""
    if stale:
        head = (
            f"<p style='color:#b35900'><b>stale: asked for '{e(answer.question)}' with {made}</b><br>"
            f"{e(stale)} changed since this answer: press 'answer' again</p>"
        )
    style = "opacity:0.55" if stale else ""
    took = f" in {answer.seconds:.1f} s" if answer.seconds is not None else ""
    note = (
        f"<p style='font-size:90%;color:#555'>answer {answer.number}{took}; asked: "
        f"'{e(answer.question)}'<br>made with {made}</p>"
    )
    return (
        f"{head}<div style='{style}'><table style='width:100%'><tr><th>unsteered</th><th>{label}</th></tr>"
        f"<tr><td style='{cell}'>{e(answer.plain)}</td><td style='{cell}'>{e(answer.steered)}</td></tr>"
        f"</table>{note}</div>"
    )


def view_note_html(view: int, layers: list[int]) -> str:
    """A plain note when the viewed layer (and so its threshold slider) takes no part in the vote."""
    if not layers:
        return (
            "<b style='color:#b35900'>no condition layers: nothing votes, steering never fires</b>"
        )
    if view not in layers:
        return (
            f"<b style='color:#b35900'>layer {view} does not vote</b> (condition layers "
            f"{', '.join(map(str, layers))}): its threshold changes nothing"
        )
    return ""


def plot_caption_html(name: str, concept: str, layer: int, votes: bool) -> str:
    """What the plots show: the concept and the histogram's layer."""
    note = "" if votes else " (not voting)"
    return (
        f"<small>plots: <b>{html.escape(name)}</b> <code>{html.escape(concept)}</code>; "
        f"histogram at layer {layer}{note}</small>"
    )
