#!/usr/bin/env python3
"""Check the notebooks as the repository holds them (a pre-commit hook, and ``make lint``).

Each ``notebooks/*.ipynb`` must (1) hold the same cells as its jupytext pair
``notebooks/src/*.py``, (2) be staged without outputs (the ``nbstrip`` git filter of
.gitattributes does that; a clone without the filter configured would commit outputs) and (3)
have a parameters cell papermill reads without a warning: papermill skips a line holding a second
``=`` (in a help comment or a string), so a help comment says ``base: ...``, not ``base = ...``.
Prints one line per problem and exits 1 when there is any.
"""

from __future__ import annotations

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
    return out


if __name__ == "__main__":
    found = problems()
    for line in found:
        print(line)
    sys.exit(1 if found else 0)
