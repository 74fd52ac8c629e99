"""MkDocs hooks (mkdocs.yml ``hooks``).

A table cell holding a pipe inside code is written ``\\|`` in Markdown (``sft\\|sft_dpo.epochs``),
which GitHub shows as ``|``; Python-Markdown keeps the backslash inside code spans. This drops it
in table cells' code, so the site shows what GitHub shows; code blocks are left alone.
"""

from __future__ import annotations

import re

CELL = re.compile(r"<td[^>]*>.*?</td>", re.S)
CODE = re.compile(r"<code>(.*?)</code>", re.S)


def _unescape_pipes(cell: re.Match) -> str:
    return CODE.sub(lambda m: "<code>" + m[1].replace("\\|", "|") + "</code>", cell[0])


def on_page_content(html: str, **kwargs) -> str:
    return CELL.sub(_unescape_pipes, html)
