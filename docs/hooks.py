"""MkDocs hooks (mkdocs.yml ``hooks``).

A table cell holding a pipe inside code is written ``\\|`` in Markdown (``sft\\|sft_dpo.epochs``),
which GitHub shows as ``|``; Python-Markdown keeps the backslash inside code spans. This drops it
in table cells' code, so the site shows what GitHub shows; code blocks are left alone.

The site works offline: the executed notebooks' pages come with nbconvert's loader of mermaid
(from a public CDN, for diagrams none of them has) and an empty MathJax script tag; both are
dropped, and a page that still loads a script or a stylesheet from another host fails the build.
"""

from __future__ import annotations

import re

from mkdocs.exceptions import PluginError

CELL = re.compile(r"<td[^>]*>.*?</td>", re.S)
CODE = re.compile(r"<code>(.*?)</code>", re.S)


def _unescape_pipes(cell: re.Match) -> str:
    return CODE.sub(lambda m: "<code>" + m[1].replace("\\|", "|") + "</code>", cell[0])


def on_page_content(html: str, **kwargs) -> str:
    return CELL.sub(_unescape_pipes, html)


#: nbconvert's module script that imports mermaid from a CDN when a page has a diagram
MERMAID = re.compile(
    r'<script type="module">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*</script>', re.S
)
DIAGRAM = re.compile(r'class="[^"]*\bjp-Mermaid\b')
EMPTY_SCRIPT = re.compile(r'<script src="">\s*</script>')
#: a script, module import or stylesheet from another host
EXTERNAL = re.compile(
    r'<script[^>]*\ssrc="(?:https?:)?//[^"]+"|import\(\s*["\'](?:https?:)?//[^"\']+'
    r'|<link[^>]*rel="stylesheet"[^>]*href="(?:https?:)?//[^"]+"'
    r'|["\'](?:https?:)?//[^"\']+\.m?js["\']'
)


def on_post_page(output: str, page, **kwargs) -> str:
    if not DIAGRAM.search(output):  # (the loader itself names the class, in a selector)
        output = MERMAID.sub("", output)
    output = EMPTY_SCRIPT.sub("", output)
    found = EXTERNAL.search(output)
    if found:
        raise PluginError(
            f"{page.file.src_uri} loads something from another host ({found[0][:120]}): the "
            "site must work offline"
        )
    return output


def on_post_build(config, **kwargs) -> None:
    """The site holds no build script, and the API reference has its own front page."""
    from pathlib import Path

    site = Path(config["site_dir"])
    scripts = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.py"))
    if scripts:
        raise PluginError(f"build scripts published in the site: {', '.join(scripts)}")
    if not (site / "reference" / "index.html").is_file():
        raise PluginError("the API reference has no front page (reference/index.html)")
