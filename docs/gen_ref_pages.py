"""Write the API reference at build time (mkdocs-gen-files): one page per module of
``workbench``, each package's page listing its modules, and ``reference/index.md`` listing the
packages, so a module added, renamed or split shows up without editing the docs. API pages rank
below the prose pages in the site's search."""

import ast
from pathlib import Path

import mkdocs_gen_files

#: front matter of every generated page: prose pages answer a search first
FRONT = "---\nsearch:\n  boost: 0.3\n---\n\n"

nav = mkdocs_gen_files.Nav()
root = Path(__file__).parent.parent


def summary(path: Path) -> str:
    """The first sentence of a module's docstring (its one-line summary)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") + "." if first else ""


def modules_of(package: Path) -> list[tuple[str, Path]]:
    """(dotted name, file) of a package's direct modules and subpackages."""
    out = []
    for child in sorted(package.iterdir()):
        if child.is_dir() and (child / "__init__.py").is_file():
            out.append((child.name, child / "__init__.py"))
        elif child.suffix == ".py" and child.stem not in ("__init__", "__main__"):
            out.append((child.stem, child))
    return out


def listing(package: Path, dotted: str) -> str:
    rows = [
        f"| [`{dotted}.{name}`]({name}{'/index' if path.name == '__init__.py' else ''}.md) "
        f"| {summary(path)} |"
        for name, path in modules_of(package)
    ]
    return "\n## Modules\n\n| module | what it holds |\n| --- | --- |\n" + "\n".join(rows) + "\n"


for path in sorted((root / "workbench").rglob("*.py")):
    module = path.relative_to(root).with_suffix("")
    parts = tuple(module.parts)
    if parts[-1] == "__main__":
        continue
    doc = Path("reference", *parts).with_suffix(".md")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        doc = doc.with_name("index.md")
    nav[parts] = doc.relative_to("reference").as_posix()
    dotted = ".".join(parts)
    with mkdocs_gen_files.open(doc, "w") as f:
        f.write(f"{FRONT}# `{dotted}`\n\n::: {dotted}\n")
        if path.name == "__init__.py":
            f.write(listing(path.parent, dotted))
    mkdocs_gen_files.set_edit_path(doc, path.relative_to(root))

with mkdocs_gen_files.open("reference/index.md", "w") as f:
    f.write(
        f"{FRONT}# API reference\n\nThe package `workbench` and its modules, generated from their "
        "docstrings. What most users need is exported from `workbench` itself "
        "([`workbench`](workbench/index.md)); [Development](../development.md#architecture) "
        "says how the packages are layered.\n"
        + listing(root / "workbench", "workbench").replace("](", "](workbench/")
    )

with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as f:
    # the navigation's source, also built as a page: kept out of the search
    f.write("---\nsearch:\n  exclude: true\n---\n\n")
    f.writelines(nav.build_literate_nav())
