"""The README is a front page and every relative link of it and of the docs resolves. (The site
itself is built by `make docs`, in strict mode, which `make test` runs before the suite.)"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the manual belongs in docs/"
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text


def _targets(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_to_files(page):
    missing = []
    for target in _targets(page):
        path = target.split("#", 1)[0]
        if path.startswith("reference/"):  # the API pages are generated at build time
            continue
        if path and not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").glob("*.md")]
    assert [p for p in pages if p not in nav] == []


def _script(name: str):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_stale_executed_notebook_and_a_machine_path_fail_the_check(tmp_path):
    """The docs' executed notebooks are run from the notebooks' current code, and no page
    prints a path of one machine; the repository as it stands passes."""
    import json
    import shutil

    check = _script("check_notebooks")
    assert check.docs_problems() == []
    (tmp_path / "docs" / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    executed = tmp_path / "docs" / "notebooks" / "00_quickstart.ipynb"
    nb = json.loads((ROOT / "docs" / "notebooks" / "00_quickstart.ipynb").read_text())
    assert check.docs_problems(tmp_path) == []
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[-1]["source"] = "print('an older version of this cell')"
    executed.write_text(json.dumps(nb))
    (tmp_path / "docs" / "page.md").write_text("ok\nsee /home/alice/abstention/runs/x.csv\n")
    found = check.docs_problems(tmp_path)
    assert found == [
        f"docs/notebooks/00_quickstart.ipynb was run from other code than "
        f"notebooks/00_quickstart.ipynb (code cell {len(code)} differs): refresh it with make "
        "docs-notebooks",
        "docs/page.md:2: a path of one machine (/home/alice): write it relative to the repository",
    ]


def test_the_site_loads_nothing_from_another_host():
    """nbconvert's CDN loader of mermaid (for diagrams the pages do not have) is dropped; any
    other script or stylesheet from another host fails the build."""
    import sys
    from types import SimpleNamespace

    from mkdocs.exceptions import PluginError

    sys.path.insert(0, str(ROOT / "docs"))
    import hooks

    page = SimpleNamespace(file=SimpleNamespace(src_uri="notebooks/x.ipynb"))
    loader = (
        '<script type="module">\n const d = document.querySelectorAll(".jp-Mermaid > pre");\n'
        ' const m = (await import("https://cdnjs.cloudflare.com/ajax/libs/mermaid/11.10.0/'
        'mermaid.esm.min.mjs")).default;\n</script>'
    )
    html = f'<html><script src=""> </script><p>text</p>{loader}</html>'
    assert hooks.on_post_page(html, page=page) == "<html><p>text</p></html>"
    with pytest.raises(PluginError, match="notebooks/x.ipynb loads something from another host"):
        hooks.on_post_page(
            '<script src="https://unpkg.com/@jupyter-widgets/html-manager/dist/embed-amd.js">'
            "</script>",
            page=page,
        )
