"""Reading a YAML config file into a mapping, with one-line errors naming the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError


def read_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping in the YAML file at ``path``; a missing file, invalid YAML, a file with no
    settings (empty, or comments only: almost certainly a mistake, never "run the defaults") or
    a non-mapping is a :class:`ConfigError` of one line."""
    import yaml

    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p} is a folder; give the config file (a .yaml) inside it")
    if not p.is_file():
        raise ConfigError(f"no config file at {p}")
    from workbench.paths import read_utf8

    text = read_utf8(p)
    try:
        data = yaml.load(text, Loader=unique_keys_loader())
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML: {yaml_problem(e)}") from None
    if data is None or data == {}:
        raise ConfigError(
            f"{p}: no config fields in the file (an empty config is not taken to mean "
            "the defaults); write the fields to run with"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of config fields")
    return data


def yaml_problem(e: Exception) -> str:
    """A YAML error as one phrase: what went wrong and the line and column where the parser
    found it (1-based, as editors count), without PyYAML's multi-line excerpt."""
    mark = getattr(e, "problem_mark", None)
    what = ": ".join(
        str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x
    )
    if not what:
        what = " ".join(str(e).split())
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{what}"


def unique_keys_loader():
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the
    last one silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict, set)):  # "? [a, b]": YAML allows it, Python cannot
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a key must be a plain name, not a {type(key).__name__}",
                    key_node.start_mark,
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} appears twice", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader
