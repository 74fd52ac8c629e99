"""Write a notebook from a py:percent-style source (cells split on '# %%'), outputs empty.

    python scripts/nbtool.py notebooks/src/00_quickstart.py notebooks/00_quickstart.ipynb

A cell whose first line is '# %% [parameters]' gets the papermill ``parameters`` tag; one whose
first line is '# %% [markdown]' becomes markdown (its lines lose a leading '# ').
"""

import sys

import nbformat


def convert(src: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "abstention-workbench", "display_name": "Abstention Workbench",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    chunks = src.split("# %%")[1:]
    for chunk in chunks:
        header, _, body = chunk.partition("\n")
        body = body.strip("\n")
        if "[markdown]" in header:
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines())
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            cell = nbformat.v4.new_code_cell(body)
            if "[parameters]" in header:
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    nbformat.write(convert(open(src).read()), dst)
