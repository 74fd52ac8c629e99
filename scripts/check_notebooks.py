#!/usr/bin/env python3
"""Check the notebooks as the repository holds them (a pre-commit hook, and ``make lint``).

Each ``notebooks/*.ipynb`` must (1) hold the same cells as its jupytext pair
``notebooks/src/*.py``, (2) be staged without outputs (the ``nbstrip`` git filter of
.gitattributes does that; a clone without the filter configured would commit outputs) and (3)
have a parameters cell papermill reads without a warning: papermill skips a line holding a second
``=`` (in a help comment or a string), so a help comment says ``base: ...``, not ``base = ...``.
Each executed copy the site shows, ``docs/notebooks/*.ipynb``, must (4) have been run from its
notebook's current code (``make docs-notebooks`` refreshes it), and no page of the docs may (5)
print a path of the machine that built or ran it. Prints one line per problem and exits 1 when
there is any.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from nbstrip import strip  # noqa: E402
from workbench.errors import ConfigError  # noqa: E402
from workbench.notebooks import load_notebook  # noqa: E402


def staged(path: Path) -> str | None:
    """The notebook as git's index holds it (None outside a checkout or when untracked)."""
    rel = path.relative_to(ROOT).as_posix()
    out = subprocess.run(["git", "show", f":{rel}"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def papermill_warnings(nb) -> list[str]:
    """What papermill logs while it reads the parameters cell of ``nb`` (a notebook node)."""
    import logging

    from papermill.translators import PythonTranslator

    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    logged: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("papermill")
    logger.addHandler(handler)
    try:
        for cell in cells[:1]:
            PythonTranslator.inspect(cell)
    finally:
        logger.removeHandler(handler)
    return logged


#: A path of one machine: a home folder, or an absolute path into a checkout's folders.
MACHINE_PATH = re.compile(
    r"(?<![\w.:/~-])(?:/(?:home|Users)/[\w.-]+|[A-Z]:\\\\?Users"
    r"|(?:/[\w.-]+)+/(?:runs|figures|data|notebooks|workbench|\.venv)/)"
)


def code_cells(cells) -> list[str]:
    """The code a notebook's cells hold, less papermill's injected parameters."""
    out = []
    for c in cells:
        if c["cell_type"] != "code" or "injected-parameters" in c["metadata"].get("tags", []):
            continue
        out.append("".join(c["source"]) if isinstance(c["source"], list) else c["source"])
    return out


def docs_problems(root: Path = ROOT) -> list[str]:
    """Executed copies run from other code than the notebooks' own, and machine paths."""
    out = []
    for executed in sorted((root / "docs" / "notebooks").glob("*.ipynb")):
        rel = executed.relative_to(root)
        source = root / "notebooks" / executed.name
        if not source.is_file():
            out.append(f"{rel} has no notebook notebooks/{executed.name}")
            continue
        ran = code_cells(json.loads(executed.read_text(encoding="utf-8"))["cells"])
        try:
            now = code_cells(load_notebook(source).cells)
        except ConfigError:
            continue  # reported by problems()
        if ran != now:
            changed = next((i for i, (a, b) in enumerate(zip(ran, now)) if a != b), len(ran))
            out.append(
                f"{rel} was run from other code than {source.relative_to(root)} (code cell "
                f"{changed + 1} differs): refresh it with make docs-notebooks"
            )
    pages = sorted((root / "docs").rglob("*.md")) + sorted((root / "docs").rglob("*.ipynb"))
    for page in pages:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            found = MACHINE_PATH.search(line)
            if found:
                out.append(
                    f"{page.relative_to(root)}:{n}: a path of one machine ({found[0]}): "
                    "write it relative to the repository"
                )
    return out


def problems() -> list[str]:
    out = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        try:
            node = load_notebook(nb)
        except ConfigError as e:
            out.append(str(e))
        else:
            out += [f"{nb.relative_to(ROOT)}: papermill: {w}" for w in papermill_warnings(node)]
        text = staged(nb)
        if text is not None and strip(text) != text:
            out.append(
                f"{nb.relative_to(ROOT)} is staged with outputs or metadata: run "
                "`git config filter.nbstrip.clean 'python3 scripts/nbstrip.py'` "
                "(make setup does) and stage it again"
            )
    return out + docs_problems()


if __name__ == "__main__":
    found = problems()
    for line in found:
        print(line)
    sys.exit(1 if found else 0)
