"""Concept picker: search or browse the taxonomy, pick target concepts, see their neighbourhood.

The logic lives in :func:`search_options`, :func:`concept_summary` and :func:`summary_html`;
:class:`ConceptPicker` only wires them to widgets, so tests drive it by setting ``.value``.
"""

from __future__ import annotations

import html
from typing import Any

from workbench.taxonomy.benchmark import Benchmark


def search_options(bench: Benchmark, text: str, limit: int = 50) -> list[tuple[str, str]]:
    """(label, concept id) options for concepts matching ``text``; empty text lists the roots."""
    out: list[tuple[str, str]] = []
    for tax, tag in ((bench.atomic, ""), (bench.compositions, " [composition]")):
        hits = [tax[r] for r in tax.roots] if not text.strip() else tax.find(text, limit)
        for c in hits:
            out.append((f"{'  ' * tax.level(c.id)}{c.name} (level {tax.level(c.id)}){tag}", c.id))
    return out[:limit]


def concept_summary(bench: Benchmark, concept_id: str, n_questions: int = 3, n_listed: int = 8) -> dict[str, Any]:
    """What a researcher wants to see before picking a target: its place and its questions."""
    tax = bench.taxonomy_of(concept_id)
    c = tax[concept_id]
    desc = tax.descendants(concept_id)
    qs = bench.questions[concept_id] if concept_id in bench.questions else None
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "level": tax.level(concept_id),
        "gloss": c.gloss,
        "path": [tax[x].name for x in tax.path(concept_id)],
        "ancestors": [tax[x].name for x in tax.ancestors(concept_id)],
        "siblings": [tax[x].name for x in tax.siblings(concept_id)],
        "children": [tax[x].name for x in tax.children(concept_id)],
        "n_descendants": len(desc),
        "descendants": [tax[x].name for x in desc[:n_listed]],
        "constituents": [bench.concept(x).name for x in c.constituents],
        "n_questions": len(qs) if qs else 0,
        "sample_questions": (qs.train[:n_questions] if qs and qs.train else
                             (qs.eval[:n_questions] if qs else [])),
    }


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
    body = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (f"<div class='wb-concept'><h4>{e(summary['name'])} <code>{e(summary['id'])}</code></h4>"
            f"<table>{body}</table><p><b>sample questions</b> ({summary['n_questions']} in all)</p>"
            f"<ul>{qs}</ul></div>")


class ConceptPicker:
    """Search the taxonomy, inspect a concept, and build a list of target concepts.

    ``picker.value`` is the list of picked concept ids; ``picker.widget`` is what to display.
    """

    def __init__(self, bench: Benchmark, initial: list[str] | None = None, rows: int = 10):
        import ipywidgets as w

        self.bench = bench
        self.search = w.Text(placeholder="search concepts (e.g. river, novel, scientist)",
                             description="search", continuous_update=True)
        self.results = w.Select(options=search_options(bench, ""), rows=rows, description="concepts",
                                layout=w.Layout(width="95%"))
        self.details = w.HTML()
        self.add_button = w.Button(description="pick", icon="plus", button_style="primary")
        self.remove_button = w.Button(description="remove", icon="minus")
        self.picked = w.SelectMultiple(options=[], rows=5, description="targets",
                                       layout=w.Layout(width="95%"))
        for cid in initial or []:
            bench.concept(cid)  # fail fast on an unknown id
        self.picked.options = [(self._label(cid), cid) for cid in initial or []]
        self.search.observe(self._on_search, names="value")
        self.results.observe(self._on_select, names="value")
        self.add_button.on_click(lambda _: self.add_selected())
        self.remove_button.on_click(lambda _: self.remove_selected())
        self.widget = w.VBox([
            w.HBox([self.search]),
            self.results,
            w.HBox([self.add_button, self.remove_button]),
            self.picked,
            self.details,
        ])

    def _label(self, cid: str) -> str:
        return f"{self.bench.concept(cid).name} ({cid})"

    def _on_search(self, change) -> None:
        self.results.options = search_options(self.bench, change["new"])

    def _on_select(self, change) -> None:
        cid = change["new"]
        self.details.value = summary_html(concept_summary(self.bench, cid)) if cid else ""

    def add_selected(self) -> None:
        cid = self.results.value
        if cid and cid not in self.value:
            self.picked.options = list(self.picked.options) + [(self._label(cid), cid)]

    def remove_selected(self) -> None:
        drop = set(self.picked.value)
        self.picked.options = [o for o in self.picked.options if o[1] not in drop]

    @property
    def value(self) -> list[str]:
        return [cid for _, cid in self.picked.options]

    def _ipython_display_(self):  # pragma: no cover - needs a front end
        from IPython.display import display

        display(self.widget)
