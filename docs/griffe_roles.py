"""A griffe extension for the API pages: the docstrings' Sphinx roles (``:class:`~a.B```,
``:func:`f```) become mkdocstrings cross-references, so each renders as a link and a reference
that resolves to nothing fails the strict build."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`<>]+?)(?:\(\))?`")


def _link(m: re.Match) -> str:
    short, target = m.group(1), m.group(2).strip()
    text = target.rsplit(".", 1)[-1] if short else target
    return f"[`{text}`][{target}]"


class SphinxRoles(Extension):
    """Rewrite Sphinx roles in every docstring as Markdown cross-references."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_link, obj.docstring.value)
