#!/usr/bin/env python3
"""Refresh the executed notebooks the documentation site shows (``make docs-notebooks``).

Runs each notebook headless with its default parameters (``workbench.notebooks.run_notebook``,
as ``python -m workbench run NAME`` does) and copies the executed copy to
``docs/notebooks/NAME.ipynb``, outputs and all (the git filter that strips outputs applies to
``notebooks/*.ipynb`` only). ``--copy`` takes an executed copy a run already wrote (for example
``runs/demo/01_select_abstention.ipynb`` after ``make demo``) instead of running it again.

    .venv/bin/python scripts/docs_notebooks.py                       # every notebook below
    .venv/bin/python scripts/docs_notebooks.py 00_quickstart
    .venv/bin/python scripts/docs_notebooks.py --copy runs/demo/01_select_abstention.ipynb
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The notebooks the site shows executed (each must fit the site: under about 2 MB).
DOCS_NOTEBOOKS = ("00_quickstart", "00_build_taxonomy", "01_select_abstention")
MAX_BYTES = 2_000_000


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def offline(nb: dict) -> dict:
    """``nb`` as the site shows it: without live widgets' state (the site would load their
    renderer from a public CDN, and it must work offline; each widget output keeps its text form,
    a progress bar's last line, and an output with nothing else is dropped), and with the
    checkout's absolute path written relative to it (``runs/demo/...``), as the workbench
    prints paths inside the checkout."""
    root = f"{ROOT.as_posix()}/"
    nb = json.loads(json.dumps(nb).replace(json.dumps(root)[1:-1], ""))
    nb["metadata"].pop("widgets", None)
    for cell in nb["cells"]:
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data is not None:
                data.pop(WIDGET_VIEW, None)
                if not data:
                    continue
            kept.append(out)
        if cell["cell_type"] == "code":
            cell["outputs"] = kept
    return nb


def publish(executed: Path) -> Path:
    """Write an executed notebook into docs/notebooks/ under its stem, without widget state."""
    if executed.stat().st_size > MAX_BYTES:
        raise SystemExit(f"{executed} is {executed.stat().st_size:,} bytes, over {MAX_BYTES:,}")
    name = executed.name.removesuffix(".ipynb").removesuffix(".input")
    out = ROOT / "docs" / "notebooks" / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nb = offline(json.loads(executed.read_text(encoding="utf-8")))
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", default=list(DOCS_NOTEBOOKS))
    ap.add_argument("--copy", action="store_true", help="copy executed notebooks given as paths")
    args = ap.parse_args(argv)
    if args.copy:
        for path in args.notebooks:
            print(f"docs: {publish(Path(path))}")
        return 0
    from workbench.notebooks import run_notebook

    for name in args.notebooks:
        print(f"== {name}", flush=True)
        print(f"docs: {publish(run_notebook(name, log_output=True))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
