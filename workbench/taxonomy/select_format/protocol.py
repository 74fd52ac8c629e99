"""SELECT's protocol text, read from the user's clone of its release (kinshuk-h/SELECT).

The workbench ships none of SELECT's wording. :func:`read_protocol` reads it from the clone:
the YAML templates and configs as they are, and the constants of its Python sources by parsing
them with ``ast`` (literals only; ``range(...)`` and list concatenation are evaluated by a
small interpreter, never by ``eval``). :func:`write_protocol` stores it in a benchmark
directory (``select_protocol/``) with hashes, :func:`load_protocol` reads it back and checks them.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.code_reading import fstring_template
from workbench.errors import WorkbenchError

#: Release-relative paths of the files the protocol is read from.
SOURCES = {
    "prompts": "templates/prompts.yaml",
    "strings": "templates/strings.yaml",
    "techniques": "config/techniques.yaml",
    "models": "config/models.yaml",
    "refusal": "src/evaluation/refusal.py",
    "tuning": "src/techniques/tuning/base.py",
    "steering": "src/techniques/steering/repe.py",
    "inference": "src/inference/huggingface.py",
    "prompting": "src/techniques/prompting/core.py",
}
YAML_FIELDS = ("prompts", "strings", "techniques", "models")
DIRNAME = "select_protocol"
INDEX = "protocol.json"
FORMAT = 1
LFS_MAGIC = b"version https://git-lfs"


def is_lfs_pointer(raw: bytes) -> bool:
    """Whether a file's bytes are a Git LFS pointer (its blob was never downloaded)."""
    return raw.startswith(LFS_MAGIC)


_RANGE_LIMIT = 100_000


class ProtocolError(WorkbenchError):
    """SELECT's protocol files are missing, malformed, or differ from their recorded hashes."""


@dataclass(frozen=True)
class SelectProtocol:
    """SELECT's protocol text as read from a release clone (see the module docstring)."""

    prompts: dict[str, str]
    strings: dict[str, Any]
    techniques: dict[str, dict]
    models: dict[str, str]
    refusal_keywords: tuple[str, ...]
    contraction_rules: tuple[tuple[str, str], ...]
    refusal_templates: tuple[str, ...]
    reading_template: str
    refusal_instruction: str
    refusal_prefills: dict[str, tuple[str, ...]]
    refusal_control: dict[str, dict]
    system_prompt: str
    plain_answer_prompt: str
    files: dict[str, str]
    # The YAML files' text as read, so that written copies are verbatim (not an init argument:
    # a ``dataclasses.replace`` copy falls back to dumping the fields).
    _texts: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)


# -- reading a clone -----------------------------------------------------------------------------
def find_protocol_root(directory: str | os.PathLike, levels: int = 2) -> Path | None:
    """The folder holding ``templates/prompts.yaml``: ``directory`` or one of its ``levels``
    parents (so a clone's ``data/`` or ``data/SELECT/`` finds the clone); None if none has it."""
    d = Path(directory).resolve()
    for cand in (d, *list(d.parents)[:levels]):
        if (cand / SOURCES["prompts"]).is_file():
            return cand
    return None


def _raw(root: Path, rel: str, files: dict[str, str]) -> bytes:
    path = root / rel
    if not path.is_file():
        raise ProtocolError(f"SELECT protocol file missing: {path}")
    raw = path.read_bytes()
    if is_lfs_pointer(raw):
        raise ProtocolError(
            f"{path} is a Git LFS pointer, not the file (run `git lfs pull` in the clone)"
        )
    files[rel] = hashlib.sha256(raw).hexdigest()
    return raw


def _text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _yaml(path: Path, text: str, what: str) -> Any:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        from workbench.yamlfile import yaml_problem

        raise ProtocolError(f"{path}: invalid YAML: {yaml_problem(e)}") from None
    if not isinstance(data, dict) or not data:
        raise ProtocolError(f"{path}: expected a mapping of {what}")
    return data


def _check_yaml(paths: dict[str, Path], data: dict[str, Any]) -> None:
    for name in ("prompts", "models"):
        bad = [k for k, v in data[name].items() if not isinstance(v, str)]
        if bad:
            raise ProtocolError(f"{paths[name]}: {bad[0]!r} is not a string")
    for alias, tech in data["techniques"].items():
        if not isinstance(tech, dict):
            raise ProtocolError(f"{paths['techniques']}: technique {alias!r} is not a mapping")
        missing = [k for k in ("name", "short_name", "instruction", "template") if k not in tech]
        if missing:
            raise ProtocolError(f"{paths['techniques']}: technique {alias!r} lacks {missing[0]!r}")
        if tech["template"] not in data["prompts"]:
            raise ProtocolError(
                f"{paths['techniques']}: technique {alias!r} names template "
                f"{tech['template']!r}, which {paths['prompts'].name} lacks"
            )
        if tech["instruction"] is not None and tech["instruction"] not in data["strings"]:
            raise ProtocolError(
                f"{paths['techniques']}: technique {alias!r} names instruction "
                f"{tech['instruction']!r}, which {paths['strings'].name} lacks"
            )


def _parse(path: Path, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise ProtocolError(f"{path}: not valid Python (line {e.lineno}: {e.msg})") from None


def _assigned(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """``name -> value`` of the simple assignments in a module or class body."""
    out: dict[str, ast.expr] = {}
    for node in body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
    return out


def _class_attr(tree: ast.Module, name: str) -> ast.expr | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            value = _assigned(node.body).get(name)
            if value is not None:
                return value
    return None


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ),
        None,
    )


class _Unsupported(Exception):
    pass


def _value(node: ast.expr) -> Any:
    """A literal, extended with ``dict(k=...)``, ``list(...)``, ``range(ints)``, unary minus and
    ``+`` of lists or numbers: what SELECT's constants use, and nothing that runs code."""
    if isinstance(node, ast.Constant) and isinstance(
        node.value, (str, int, float, bool, type(None))
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    elif isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    elif isinstance(node, ast.Dict) and None not in node.keys:
        # ``k is not None`` drops nothing (checked above); it narrows the keys for the checker
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values) if k is not None}
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _value(node.left), _value(node.right)
        if (isinstance(a, list) and isinstance(b, list)) or all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)
        ):
            return a + b
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn, args, kws = node.func.id, node.args, node.keywords
        if fn == "dict" and not args and all(k.arg for k in kws):
            return {k.arg: _value(k.value) for k in kws}
        if fn == "list" and len(args) == 1 and not kws:
            v = _value(args[0])
            if isinstance(v, list):
                return list(v)
        if fn == "range" and 1 <= len(args) <= 3 and not kws:
            vals = [_value(a) for a in args]
            if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                r = range(*vals) if vals[-1] != 0 or len(vals) < 3 else None
                if r is not None and len(r) <= _RANGE_LIMIT:
                    return list(r)
    raise _Unsupported(ast.unparse(node)[:80])


def _const(path: Path, node: ast.expr | None, what: str, kind: type | tuple) -> Any:
    if node is None:
        raise ProtocolError(f"{path}: no {what}")
    try:
        value = _value(node)
    except _Unsupported as e:
        raise ProtocolError(f"{path}: {what} is not a literal (cannot evaluate {e})") from None
    if not isinstance(value, kind):
        raise ProtocolError(
            f"{path}: {what} is a {type(value).__name__}, not a {getattr(kind, '__name__', kind)}"
        )
    return value


def _str_list(path: Path, value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise ProtocolError(f"{path}: {what} is not a non-empty list of strings")
    return tuple(value)


def _keywords(path: Path, tree: ast.Module) -> tuple[str, ...]:
    """The module-level list of refusal prefixes (``__REFUSAL_PREFIXES__``, else the one list
    of strings whose name mentions REFUSAL)."""
    names = _assigned(tree.body)
    node = names.get("__REFUSAL_PREFIXES__")
    if node is None:
        cands = [v for k, v in names.items() if "REFUSAL" in k.upper() and isinstance(v, ast.List)]
        node = cands[0] if len(cands) == 1 else None
    return _str_list(
        path,
        _const(path, node, "module-level list of refusal prefixes (__REFUSAL_PREFIXES__)", list),
        "the refusal prefixes",
    )


def _contractions(path: Path, tree: ast.Module) -> tuple[tuple[str, str], ...]:
    """``AMBIGUITY_RULES``: ``{regex.compile(r"pattern"): "replacement"}`` as pairs, in order."""
    node = _assigned(tree.body).get("AMBIGUITY_RULES")
    if not isinstance(node, ast.Dict) or not node.keys:
        raise ProtocolError(f"{path}: no module-level AMBIGUITY_RULES dict (the contraction rules)")
    out = []
    for k, v in zip(node.keys, node.values):
        ok_key = (
            isinstance(k, ast.Call)
            and k.args
            and isinstance(k.args[0], ast.Constant)
            and isinstance(k.args[0].value, str)
            and (
                (isinstance(k.func, ast.Attribute) and k.func.attr == "compile")
                or (isinstance(k.func, ast.Name) and k.func.id == "compile")
            )
        )
        if not ok_key or not (isinstance(v, ast.Constant) and isinstance(v.value, str)):
            raise ProtocolError(
                f'{path}: an AMBIGUITY_RULES entry is not compile(r"..."): "..." '
                # k is None for a ``**mapping`` entry
                f"({(ast.unparse(k) if k is not None else '**' + ast.unparse(v))[:60]})"
            )
        # ok_key holds: k is compile(<a str constant>); str() of that str is the str itself
        assert isinstance(k, ast.Call) and isinstance(k.args[0], ast.Constant)
        out.append((str(k.args[0].value), v.value))
    return tuple(out)


def _system_prompt(path: Path, tree: ast.Module) -> str:
    """make_prompt's default system prompt: a string assigned to ``system_prompt`` inside it,
    else the parameter's string default."""
    fn = _function(tree, "make_prompt")
    if fn is None:
        raise ProtocolError(f"{path}: no make_prompt function (the default system prompt)")
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "system_prompt" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    params = fn.args.args[len(fn.args.args) - len(fn.args.defaults) :]
    for p, d in [*zip(params, fn.args.defaults), *zip(fn.args.kwonlyargs, fn.args.kw_defaults)]:
        if p.arg == "system_prompt" and isinstance(d, ast.Constant) and isinstance(d.value, str):
            return d.value
    raise ProtocolError(f"{path}: make_prompt sets no default system_prompt string")


def _format_template(node: ast.expr) -> str | None:
    """A string constant or an f-string of plain names, as a ``str.format`` template."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if not isinstance(node, ast.JoinedStr):
        return None
    return fstring_template(node, lambda e: e.id if isinstance(e, ast.Name) else None)


def _plain_prompt(path: Path, tree: ast.Module) -> str:
    """The prompt get_plain_response passes to make_prompt, with ``{query}``."""
    fn = _function(tree, "get_plain_response")
    if fn is None:
        raise ProtocolError(f"{path}: no get_plain_response function (the plain-answer prompt)")
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and node.args
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "make_prompt")
                or (isinstance(node.func, ast.Name) and node.func.id == "make_prompt")
            )
        ):
            template = _format_template(node.args[0])
            if template is not None and "{query}" in template:
                return template
    raise ProtocolError(f"{path}: get_plain_response passes make_prompt no prompt with {{query}}")


def read_protocol(release_dir: str | os.PathLike) -> SelectProtocol:
    """SELECT's protocol from a release clone (its root; its ``data/`` or ``data/SELECT/`` too).

    Raises :class:`ProtocolError` with one line naming the file and what it lacks.
    """
    root = find_protocol_root(release_dir)
    if root is None:
        raise ProtocolError(
            f"no SELECT release clone at {release_dir} (no {SOURCES['prompts']} "
            "there or in its two parent folders)"
        )
    files: dict[str, str] = {}
    paths = {k: root / v for k, v in SOURCES.items()}
    texts = {k: _text(paths[k], _raw(root, SOURCES[k], files)) for k in SOURCES}
    what = {
        "prompts": "prompt templates",
        "strings": "instruction strings",
        "techniques": "technique configurations",
        "models": "model aliases",
    }
    data = {k: _yaml(paths[k], texts[k], what[k]) for k in YAML_FIELDS}
    _check_yaml(paths, data)

    p = paths["refusal"]
    tree = _parse(p, texts["refusal"])
    keywords, contractions = _keywords(p, tree), _contractions(p, tree)

    p = paths["tuning"]
    templates = _str_list(
        p,
        _const(
            p,
            _class_attr(_parse(p, texts["tuning"]), "REFUSAL_TEMPLATES"),
            "class attribute REFUSAL_TEMPLATES",
            list,
        ),
        "REFUSAL_TEMPLATES",
    )

    p = paths["steering"]
    tree = _parse(p, texts["steering"])
    reading = _const(
        p, _class_attr(tree, "READING_TEMPLATE"), "class attribute READING_TEMPLATE", str
    )
    instruction = _const(
        p, _class_attr(tree, "REFUSAL_INSTRUCTION"), "class attribute REFUSAL_INSTRUCTION", str
    )
    prefills = _const(
        p,
        _class_attr(tree, "REFUSAL_COMPLIANCE_PREFILLS"),
        "class attribute REFUSAL_COMPLIANCE_PREFILLS",
        dict,
    )
    prefills = {
        str(k): _str_list(p, v, f"REFUSAL_COMPLIANCE_PREFILLS[{k!r}]") for k, v in prefills.items()
    }
    control = _const(
        p,
        _assigned(tree.body).get("KNOWN_CONTROL_KWARGS_FOR_REFUSAL"),
        "module-level KNOWN_CONTROL_KWARGS_FOR_REFUSAL",
        dict,
    )
    for model, kw in control.items():
        layers = kw.get("layer_ids") if isinstance(kw, dict) else None
        if (
            not isinstance(kw, dict)
            or not isinstance(layers, list)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in layers)
        ):
            raise ProtocolError(
                f"{p}: KNOWN_CONTROL_KWARGS_FOR_REFUSAL[{model!r}] has no list of integer layer_ids"
            )

    system = _system_prompt(paths["inference"], _parse(paths["inference"], texts["inference"]))
    plain = _plain_prompt(paths["prompting"], _parse(paths["prompting"], texts["prompting"]))
    protocol = SelectProtocol(
        prompts=data["prompts"],
        strings=data["strings"],
        techniques=data["techniques"],
        models=data["models"],
        refusal_keywords=keywords,
        contraction_rules=contractions,
        refusal_templates=templates,
        reading_template=reading,
        refusal_instruction=instruction,
        refusal_prefills=prefills,
        refusal_control=control,
        system_prompt=system,
        plain_answer_prompt=plain,
        files=files,
    )
    protocol._texts.update({k: texts[k] for k in YAML_FIELDS})
    return protocol


# -- writing and loading a benchmark's copy ------------------------------------------------------
class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks (readable templates)."""


_LiteralDumper.add_representer(
    str,
    lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None),
)


def _yaml_copy(protocol: SelectProtocol, name: str) -> str:
    value = getattr(protocol, name)
    text = protocol._texts.get(name)
    if text is not None and yaml.safe_load(text) == value:
        return text
    return yaml.dump(value, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=10**6)


def _constants(protocol: SelectProtocol) -> dict[str, Any]:
    return {
        "refusal_keywords": list(protocol.refusal_keywords),
        "contraction_rules": [list(r) for r in protocol.contraction_rules],
        "refusal_templates": list(protocol.refusal_templates),
        "reading_template": protocol.reading_template,
        "refusal_instruction": protocol.refusal_instruction,
        "refusal_prefills": {k: list(v) for k, v in protocol.refusal_prefills.items()},
        "refusal_control": protocol.refusal_control,
        "system_prompt": protocol.system_prompt,
        "plain_answer_prompt": protocol.plain_answer_prompt,
    }


def _write(path: Path, data: bytes) -> str:
    from workbench.paths import write_bytes_atomic

    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def write_protocol(protocol: SelectProtocol, directory: str | os.PathLike) -> dict[str, str]:
    """Write ``directory/select_protocol/``: the four YAML files as read and ``protocol.json``
    (the extracted constants, the source files' hashes, the copies' hashes). Returns
    ``{path relative to directory: sha256}`` of the written files."""
    d = Path(directory) / DIRNAME
    d.mkdir(parents=True, exist_ok=True)
    written = {
        f"{DIRNAME}/{name}.yaml": _write(d / f"{name}.yaml", _yaml_copy(protocol, name).encode())
        for name in YAML_FIELDS
    }
    index = {
        "format": FORMAT,
        **_constants(protocol),
        "source_files": dict(protocol.files),
        "copies": {Path(k).name: v for k, v in written.items()},
    }
    written[f"{DIRNAME}/{INDEX}"] = _write(
        d / INDEX, (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode()
    )
    return written


def load_protocol(directory: str | os.PathLike) -> SelectProtocol | None:
    """The protocol written by :func:`write_protocol` under ``directory`` (None when there is
    none); a copy whose hash differs from ``protocol.json``'s record is an error naming it."""
    d = Path(directory) / DIRNAME
    if not d.is_dir():
        return None
    ipath = d / INDEX
    if not ipath.is_file():
        raise ProtocolError(
            f"{d} has no {INDEX}; re-import the release with "
            "`python -m workbench taxonomy import-select <clone>`"
        )
    try:
        index = json.loads(ipath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"{ipath}: not valid JSON ({e})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise ProtocolError(f"{ipath}: not a SELECT protocol index of format {FORMAT}")
    texts, data = {}, {}
    for name in YAML_FIELDS:
        path = d / f"{name}.yaml"
        want = (index.get("copies") or {}).get(path.name)
        if not path.is_file():
            raise ProtocolError(f"SELECT protocol file missing: {path}")
        raw = path.read_bytes()
        if want != hashlib.sha256(raw).hexdigest():
            raise ProtocolError(
                f"{path} does not match the hash in {INDEX} (edited?); re-import "
                "the release with `python -m workbench taxonomy import-select <clone>`"
            )
        texts[name] = _text(path, raw)
        data[name] = yaml.safe_load(texts[name])
    try:
        protocol = SelectProtocol(
            **data,
            refusal_keywords=tuple(index["refusal_keywords"]),
            contraction_rules=tuple(tuple(r) for r in index["contraction_rules"]),
            refusal_templates=tuple(index["refusal_templates"]),
            reading_template=index["reading_template"],
            refusal_instruction=index["refusal_instruction"],
            refusal_prefills={k: tuple(v) for k, v in index["refusal_prefills"].items()},
            refusal_control=index["refusal_control"],
            system_prompt=index["system_prompt"],
            plain_answer_prompt=index["plain_answer_prompt"],
            files=index["source_files"],
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ProtocolError(f"{ipath}: malformed ({type(e).__name__}: {e})") from None
    protocol._texts.update(texts)
    return protocol


__all__ = [
    "ProtocolError",
    "SelectProtocol",
    "find_protocol_root",
    "load_protocol",
    "read_protocol",
    "write_protocol",
]
