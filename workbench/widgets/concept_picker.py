"""Concept picker: search or browse the taxonomy, pick target concepts, see their neighbourhood.

The logic lives in :func:`search_options`, :func:`browse_options`, :func:`summary_html` (over
:func:`workbench.taxonomy.summary.concept_summary`); :class:`ConceptPicker` only wires them to widgets, so tests drive it by
setting ``.value``. Nothing is ever selected implicitly: a search lists matches (or says that
nothing matches, or how many more there are), and a concept is chosen only by clicking it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from workbench.taxonomy.benchmark import Benchmark
from workbench.taxonomy.summary import concept_summary

#: The label of the empty choice every option list starts with.
NOTHING = "— choose a concept —"


@dataclass(frozen=True)
class Options:
    """Options for the results list, and a line saying what they are."""

    options: list[tuple[str, str | None]]
    note: str


def _label(tax, cid: str, tag: str = "", indent: bool = True) -> str:
    c = tax[cid]
    kids = len(tax.children(cid))
    more = f", {kids} children" if kids else ""
    return f"{'  ' * tax.level(cid) if indent else ''}{c.name} (level {tax.level(cid)}{more}){tag}"


def search_options(bench: Benchmark, text: str, limit: int = 50) -> Options:
    """Concepts whose name or id contains ``text`` (shallowest first); the roots for empty text."""
    t = text.strip()
    if not t:
        return browse_options(bench, None)
    found = []
    for tax, tag in ((bench.atomic, ""), (bench.compositions, " [composition]")):
        found += [(tax, c, tag) for c in tax.find(t, limit=len(tax))]
    shown = found[:limit]
    options: list[tuple[str, str | None]] = [(NOTHING, None)] + [
        (_label(tax, c.id, tag, indent=False), c.id) for tax, c, tag in shown
    ]
    if not found:
        note = f"no concept matches {t!r}"
    elif len(found) > limit:
        note = f"showing {limit} of {len(found)} matches: type more to narrow the search"
    else:
        note = f"{len(found)} match{'es' if len(found) != 1 else ''}"
    return Options(options, note)


def browse_options(bench: Benchmark, concept_id: str | None) -> Options:
    """The tree one level at a time: the roots (``None``), or a concept's parent, itself and its
    children, so a person can walk down (or up) the taxonomy by clicking."""
    opts: list[tuple[str, str | None]]
    if concept_id is None:
        opts = [(NOTHING, None)]
        for tax, tag in ((bench.atomic, ""), (bench.compositions, " [composition]")):
            opts += [(_label(tax, r, tag, indent=False), r) for r in tax.roots]
        return Options(opts, "top-level concepts: select one and press 'open' to see its children")
    tax = bench.taxonomy_of(concept_id)
    c = tax[concept_id]
    opts = [(NOTHING, None)]
    if c.parent is not None:
        opts.append((f"↑ {tax[c.parent].name} (parent)", c.parent))
    opts.append((f"• {_label(tax, concept_id, indent=False)}", concept_id))
    opts += [(f"    {_label(tax, k, indent=False)}", k) for k in tax.children(concept_id)]
    n = len(tax.children(concept_id))
    return Options(
        opts, f"{c.name}: {n} child{'ren' if n != 1 else ''}" if n else f"{c.name} has no children"
    )


def summary_html(summary: dict[str, Any]) -> str:
    """The summary as a small HTML card."""
    e = html.escape

    def names(xs: list[str], total: int | None = None) -> str:
        shown = ", ".join(e(x) for x in xs) or "<i>none</i>"
        more = total - len(xs) if total is not None else 0
        return shown + (f" <i>and {more} more</i>" if more > 0 else "")

    rows = [
        ("path", " &rarr; ".join(e(x) for x in summary["path"])),
        ("kind / level", f"{e(summary['kind'])} / {summary['level']}"),
        ("ancestors A(c)", names(summary["ancestors"])),
        ("siblings S(c)", names(summary["siblings"])),
        ("descendants D(c)", names(summary["descendants"], summary["n_descendants"])),
    ]
    if summary["constituents"]:
        rows.append(("constituents", names(summary["constituents"])))
    if summary["gloss"]:
        rows.append(("gloss", e(summary["gloss"])))
    qs = "".join(f"<li>{e(q)}</li>" for q in summary["sample_questions"])
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{k}</th><td>{v}</td></tr>"
        for k, v in rows
    )
    return (
        f"<div class='wb-concept'><h4>{e(summary['name'])} <code>{e(summary['id'])}</code></h4>"
        f"<table>{body}</table><p><b>sample questions</b> ({summary['n_questions']} in all)</p>"
        f"<ul>{qs}</ul></div>"
    )


def targets_code(ids: list[str]) -> str:
    """The picks as a line to paste into a notebook's parameters cell."""
    return "targets = [" + ", ".join(repr(i) for i in ids) + "]"


class ConceptPicker:
    """Search or browse the taxonomy, inspect a concept, and build a list of target concepts.

    ``picker.selected`` is the concept clicked in the results (None until one is);
    ``picker.value`` is the list of picked targets (``targets=`` for a notebook: the
    ``targets_code`` box shows the line to paste); ``picker.widget`` is what to display. With
    ``pick=False`` (inside the steering inspector) only search, browse and details are shown.
    """

    def __init__(
        self,
        bench: Benchmark,
        initial: list[str] | None = None,
        rows: int = 10,
        pick: bool = True,
        limit: int = 50,
    ):
        import ipywidgets as w

        self.bench, self.limit = bench, limit
        wide = {"description_width": "initial"}
        self.search = w.Text(
            placeholder="search concepts (e.g. river, novel, scientist)",
            description="search",
            continuous_update=True,
            style=wide,
            layout=w.Layout(width="60%"),
        )
        first = browse_options(bench, None)
        self.results = w.Select(
            options=first.options,
            value=None,
            rows=rows,
            description="concepts",
            style=wide,
            layout=w.Layout(width="95%"),
        )
        self.note = w.HTML(html.escape(first.note))
        self.open_button = w.Button(
            description="open", icon="folder-open", tooltip="list the selected concept's children"
        )
        self.top_button = w.Button(description="top", icon="level-up", tooltip="back to the roots")
        self.details = w.HTML()
        self.add_button = w.Button(description="pick", icon="plus", button_style="primary")
        self.remove_button = w.Button(description="remove", icon="minus")
        self.picked = w.SelectMultiple(
            options=[], rows=5, description="targets", style=wide, layout=w.Layout(width="95%")
        )
        self.code = w.Text(
            description="targets code", style=wide, layout=w.Layout(width="95%"), disabled=True
        )
        for cid in initial or []:
            bench.concept(cid)  # fail fast on an unknown id
        self.picked.options = [(self._label(cid), cid) for cid in initial or []]
        self._update_code()
        self.search.observe(self._on_search, names="value")
        self.results.observe(self._on_select, names="value")
        self.open_button.on_click(lambda _: self.open(self.results.value))
        self.top_button.on_click(lambda _: self.open(None))
        self.add_button.on_click(lambda _: self.add_selected())
        self.remove_button.on_click(lambda _: self.remove_selected())
        rows_ = [w.HBox([self.search, self.open_button, self.top_button]), self.note, self.results]
        if pick:
            rows_ += [w.HBox([self.add_button, self.remove_button]), self.picked, self.code]
        self.widget = w.VBox(rows_ + [self.details])

    def _label(self, cid: str) -> str:
        return f"{self.bench.concept(cid).name} ({cid})"

    def _show(self, opts: Options) -> None:
        self.results.options = opts.options
        self.results.value = None  # never select implicitly
        self.note.value = html.escape(opts.note)

    def _on_search(self, change) -> None:
        self._show(search_options(self.bench, change["new"], self.limit))

    def open(self, concept_id: str | None) -> None:
        """Browse to ``concept_id`` (its parent, itself, its children), or to the roots."""
        self._show(browse_options(self.bench, concept_id))

    def _on_select(self, change) -> None:
        cid = change["new"]
        self.details.value = summary_html(concept_summary(self.bench, cid)) if cid else ""

    @property
    def selected(self) -> str | None:
        return self.results.value

    def add_selected(self) -> None:
        cid = self.results.value
        if cid and cid not in self.value:
            self.picked.options = list(self.picked.options) + [(self._label(cid), cid)]
        self._update_code()

    def remove_selected(self) -> None:
        drop = set(self.picked.value)
        self.picked.options = [o for o in self.picked.options if o[1] not in drop]
        self._update_code()

    def _update_code(self) -> None:
        self.code.value = targets_code(self.value)

    @property
    def value(self) -> list[str]:
        return [cid for _, cid in self.picked.options]

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from workbench.widgets.live import display_live

        display_live(
            self.widget,
            "the concept picker",
            "it only helps write a parameters cell's targets, and running this cell opens it again",
        )
