"""The package's shape, read from its imports (no module is imported): no file-level import
circle, no circle between folders, and no import from a folder of a lower layer to a folder of a
higher one.

Layers follow the flow of data (taxonomy -> questions -> technique -> generations -> scores ->
tables -> figures), with the engines every stage generates through beneath them and the
orchestration that runs whole experiments above them. Each folder of the package (a top-level
module counts as a folder of its own) sits in exactly one layer, and a module may import modules
of its own folder, of folders of its own layer or of lower ones. Every folder must be placed: a
new folder is a new line in LAYERS.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workbench"

#: Layers, lowest first.
ORDER = (
    "core",  # errors, paths, files, the registry type, paper protocols as data
    "engines",  # models, the generation engine, back ends, adapters, steering vectors
    "taxonomy",  # concepts, questions
    "techniques",  # abstention techniques
    "scores",  # detectors, judges, metrics
    "tables",  # summaries and imported results
    "figures",  # plots
    "runs",  # grids, suites and paper workflows that run the stages above
    "interface",  # the command line, notebooks, widgets, test helpers
)

#: Folder (a subpackage or a top-level module of ``workbench``) -> its layer.
LAYERS = {
    "workbench": "interface",  # the package's __init__: the front door, imported lazily
    "errors": "core",
    "paths": "core",
    "registry": "core",
    "code_reading": "core",
    "yamlfile": "core",
    "settings": "core",
    "runlock": "core",
    "progress": "core",
    "releases": "core",
    "resumable": "core",
    "select": "taxonomy",  # SELECT's prompts and its sampling of questions from a benchmark
    "models": "engines",
    "generation": "engines",
    "backends": "engines",
    "finetuning": "engines",
    "steering": "engines",
    "taxonomy": "taxonomy",
    "techniques": "techniques",
    "scoring": "scores",
    "tables": "tables",
    "plots": "figures",
    "experiments": "runs",
    "refusal": "runs",  # seed 001's suite: its data sets, scores, views and runs
    "unknown": "runs",  # UnknownBench: its data sets, measures and runs
    "editing": "runs",  # taxi: its data, editors, scores and evaluation
    "cli": "interface",
    "notebooks": "interface",
    "widgets": "interface",
    "lab_extension": "interface",
    "testing": "interface",
    "__main__": "interface",
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


def folder_of(module: str) -> str:
    """``workbench.x.y`` -> ``x``; the package itself -> ``workbench``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> str | None:
    return LAYERS.get(folder_of(module))


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder -> the other folders its modules import."""
    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        here = folder_of(m)
        out.setdefault(here, set()).update(folder_of(t) for t in targets if folder_of(t) != here)
    return out


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a module to a module of a folder in a higher layer."""
    rank = {name: i for i, name in enumerate(ORDER)}
    return [
        f"{m} ({folder_of(m)}: {layer_of(m)}) imports {t} ({folder_of(t)}: {layer_of(t)})"
        for m, targets in sorted(graph.items())
        for t in sorted(targets)
        if rank[layer_of(t)] > rank[layer_of(m)]
    ]


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


def test_every_folder_has_a_layer():
    missing = sorted({folder_of(m) for m in module_files() if layer_of(m) is None})
    assert not missing, f"folders with no layer in LAYERS: {missing}"
    stale = sorted(set(LAYERS) - {folder_of(m) for m in module_files()})
    assert not stale, f"LAYERS names folders that do not exist: {stale}"


def test_no_import_circle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles between files: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_circle_between_folders():
    cycles = find_cycles(folder_graph(import_graph()))
    assert not cycles, "folders importing each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_lower_layers_never_import_higher_ones():
    bad = upward_imports(import_graph())
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_a_planted_upward_import_is_found(tmp_path):
    """The check reads the real package: one planted import from a low folder (errors) to a
    high one (cli) is reported, and only that one."""
    graph = import_graph()
    graph["workbench.errors"] = graph["workbench.errors"] | {"workbench.cli"}
    assert upward_imports(graph) == [
        "workbench.errors (errors: core) imports workbench.cli (cli: interface)"
    ]
    assert find_cycles(folder_graph(graph))  # errors -> cli -> errors


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


def test_every_lm_and_bench_parameter_is_typed():
    """The two objects every technique takes are typed (``lm: Backend`` or an engine's own
    class, ``bench: Benchmark``, or a union with them) wherever the package takes them, so the
    type checker checks every use."""
    untyped = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    if arg.arg in ("lm", "bench") and arg.annotation is None:
                        untyped.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
                    want = {"lm": ("Backend", "HFModel"), "bench": ("Benchmark",)}.get(arg.arg)
                    if want and arg.annotation is not None:
                        text = ast.unparse(arg.annotation)
                        assert any(w in text for w in want), (path, node.name, arg.arg, text)
    assert not untyped, untyped


def test_the_front_door_names_the_verbs_and_imports_them_only_when_used():
    """``import workbench`` loads no model library; each name it offers resolves to the object
    its home module defines."""
    import importlib
    import json
    import subprocess
    import sys

    script = (
        "import sys, json, workbench\n"
        "heavy = [m for m in ('torch', 'transformers', 'pandas') if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'all': workbench.__all__, "
        "'lazy': workbench._LAZY}))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["heavy"] == []
    import workbench

    for name, module in got["lazy"].items():
        assert name in got["all"]
        assert getattr(workbench, name) is getattr(importlib.import_module(module), name)
    for verb in ("load_model", "load_benchmark", "get_technique", "run_experiment", "Runner"):
        assert verb in got["all"]
