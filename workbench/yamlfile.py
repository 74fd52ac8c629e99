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
    if not p.is_file():
        raise ConfigError(f"no config file at {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()
        raise ConfigError(f"{p}: invalid YAML: {' '.join(first[:3])}") from None
    if data is None or data == {}:
        raise ConfigError(
            f"{p}: no config fields in the file (an empty config is not taken to mean "
            "the defaults); write the fields to run with"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of config fields")
    return data
