"""The package's shape, read from its imports (no module is imported): no file-level import
circle, and no import from a lower layer to a higher one.

Layers follow the flow of data (taxonomy -> questions -> technique -> generations -> scores ->
tables -> figures), with the engines every stage generates through beneath them and the
orchestration that runs whole experiments above them. A module may import modules of its own
layer or of lower ones. Every module must be placed: a new module is a new line in LAYERS (or
falls under its package's prefix).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workbench"

#: Layers, lowest first.
ORDER = (
    "core",  # errors, paths, files, paper protocols as data
    "engines",  # models, the generation engine, back ends, adapters
    "taxonomy",  # concepts, questions, published data sets
    "techniques",  # abstention techniques, steering, editors
    "scores",  # detectors, judges, metrics
    "tables",  # summaries and imported results
    "figures",  # plots
    "runs",  # grids, suites and evaluations that run the stages above
    "interface",  # command lines, notebooks, widgets, test helpers
)

#: Module prefix -> layer; the longest matching prefix wins.
LAYERS = {
    "workbench": "core",
    "workbench.errors": "core",
    "workbench.paths": "core",
    "workbench.code_reading": "core",
    "workbench.yamlfile": "core",
    "workbench.fieldtypes": "core",
    "workbench.runlock": "core",
    "workbench.progress": "core",
    "workbench.releases": "core",
    "workbench.releases.known": "interface",
    "workbench.releases.__main__": "interface",
    "workbench.select": "core",
    "workbench.select.protocol": "core",
    "workbench.select.prompts": "core",
    "workbench.select.sampling": "taxonomy",
    "workbench.select.refusal": "scores",
    "workbench.select.results": "tables",
    "workbench.select.compare": "tables",
    "workbench.models": "engines",
    "workbench.generation": "engines",
    "workbench.backends": "engines",
    "workbench.backends.serve": "interface",
    "workbench.finetuning": "engines",
    "workbench.taxonomy": "taxonomy",
    "workbench.taxonomy.__main__": "interface",
    "workbench.unknown": "runs",
    "workbench.unknown.datasets": "taxonomy",
    "workbench.unknown.names": "taxonomy",
    "workbench.unknown.measures": "scores",
    "workbench.unknown.__main__": "interface",
    "workbench.editing": "runs",
    "workbench.editing.data": "taxonomy",
    "workbench.editing.corpus": "taxonomy",
    "workbench.editing.editors": "techniques",
    "workbench.editing.presets": "scores",  # settings of editors and of scoring
    "workbench.editing.taxi": "techniques",
    "workbench.editing.scoring": "scores",
    "workbench.refusal": "runs",
    "workbench.refusal.datasets": "taxonomy",
    "workbench.refusal.scores": "scores",
    "workbench.refusal.plots": "figures",
    "workbench.refusal.views": "figures",
    "workbench.techniques": "techniques",
    "workbench.steering": "techniques",
    # the gate's math and an abstainer as data: what an engine runs inside itself (vLLM's workers)
    "workbench.steering.spec": "engines",
    "workbench.steering.concept": "engines",
    "workbench.steering.gate": "engines",
    "workbench.steering.evaluation": "runs",
    "workbench.scoring": "scores",
    "workbench.scoring.__main__": "interface",
    "workbench.tables": "tables",
    "workbench.plots": "figures",
    "workbench.experiments": "runs",
    "workbench.experiments.demo": "interface",  # runs the demo notebook
    "workbench.widgets": "interface",
    "workbench.widgets.live": "interface",
    "workbench.notebooks": "interface",
    "workbench.lab_extension": "interface",
    "workbench.__main__": "interface",
    "workbench.testing": "interface",
}


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that ``module`` imports, at module level or inside functions
    (a lazy import still ties the two files). ``from pkg import name`` is an import of
    ``pkg.name`` when that is a module, else of ``pkg`` (its ``__init__``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for name in names:
            if name == "workbench" or name.startswith("workbench."):
                target = _resolve(name, modules)
                if target and target != module:
                    found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def layer_of(module: str) -> str | None:
    best = max(
        (p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None
    )
    return LAYERS[best] if best else None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def test_every_module_has_a_layer():
    missing = [m for m in module_files() if layer_of(m) is None]
    assert not missing, f"modules with no layer in LAYERS: {missing}"


def test_no_import_circle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles between files: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_lower_layers_never_import_higher_ones():
    rank = {name: i for i, name in enumerate(ORDER)}
    bad = [
        f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})"
        for m, targets in sorted(import_graph().items())
        for t in sorted(targets)
        if rank[layer_of(t)] > rank[layer_of(m)]
    ]
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from workbench.a import b\n", {"workbench.a.b"}),
        ("from workbench.a import c\n", {"workbench.a"}),
        ("from . import b\n", {"workbench.a.b"}),
        ("def f():\n    import workbench.a.b\n", {"workbench.a.b"}),
    ],
)
def test_imports_are_read_as_python_resolves_them(tmp_path, source, expected):
    modules = {
        "workbench.a": tmp_path / "__init__.py",
        "workbench.a.b": tmp_path / "b.py",
        "workbench.a.m": tmp_path / "m.py",
    }
    (tmp_path / "m.py").write_text(source)
    assert imports_of("workbench.a.m", tmp_path / "m.py", modules) == expected


def test_a_circle_is_found():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
