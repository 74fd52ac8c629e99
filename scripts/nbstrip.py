#!/usr/bin/env python3
"""git's clean filter for notebooks/*.ipynb (set up by scripts/setup.sh; see .gitattributes).

Reads a notebook on stdin and writes it as the repository stores it: no outputs, no execution
counts, notebook metadata limited to kernelspec, jupytext and language_info. Running a notebook
in JupyterLab (which saves its outputs into the .ipynb) therefore leaves ``git status`` clean; the
file on disk keeps its outputs. Plain json: it runs before any environment exists.

``language_info`` is stored as the project's kernel reports it (:data:`LANGUAGE_INFO`): JupyterLab
copies the kernel's ``language_info`` into a notebook it opens, and a notebook stored without it
(or with another one) opens marked unsaved. It is written the same whichever Python saved the
notebook, so that a save on another Python version changes nothing git would commit.
"""

import json
import sys

KEEP_METADATA = ("jupytext", "kernelspec", "language_info")

#: What the project's kernel (ipykernel) reports as ``language_info`` in the reference
#: environment, the Python of docs/results/demo.json (tests/test_nbstrip.py checks both).
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.11.7",
}


def strip(text: str) -> str:
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.get("metadata", {})
        for key in ("execution", "collapsed", "scrolled"):
            meta.pop(key, None)
    meta = {k: v for k, v in nb.get("metadata", {}).items() if k in KEEP_METADATA}
    if meta.get("kernelspec", {}).get("language", "python") == "python":
        meta["language_info"] = LANGUAGE_INFO
    nb["metadata"] = meta
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(strip(sys.stdin.read()))
