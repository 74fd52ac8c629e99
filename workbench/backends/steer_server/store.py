"""The abstainers a steering server keeps on disk, and the lines it writes to its log.

One ``<name>.json`` per :class:`~workbench.steering.spec.SteerSpec` in the server's registry
folder (``serve --registry``, else :func:`default_registry`), read on every request: a
restarted server still knows them. A file that does not read as a valid spec is treated as
absent (:meth:`AbstainerStore.skipped` says which and why; the server logs each once at start).
"""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.errors import ConfigError
from workbench.paths import cache_home, write_text_atomic
from workbench.steering.spec import SteerSpec

#: the environment variable naming the registry directory (set by ``serve --steering``)
REGISTRY_ENV = "WORKBENCH_STEERING_REGISTRY"


def default_registry(served_name: str) -> Path:
    """Where a server of ``served_name`` keeps its abstainers unless told otherwise."""
    return cache_home() / "served-abstainers" / served_name


def safe_name(name: str) -> bool:
    """``name`` can name a file of the registry (no folder, nothing hidden)."""
    return bool(name) and "/" not in name and not name.startswith(".")


def log(message: str) -> None:
    """A line in the server's log (vLLM's stderr, or serve's --log-file)."""
    print(f"[workbench steering] {message}", file=sys.stderr, flush=True)


class AbstainerStore:
    """Abstainers on disk (``<name>.json``): what survives a restart. A file that does not
    read as a valid spec is treated as absent (:meth:`skipped` says which and why)."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def save(self, spec: SteerSpec) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path(spec.name), spec.to_json())

    def delete(self, name: str) -> bool:
        path = self.path(name)
        if not safe_name(name) or not path.is_file():
            return False
        path.unlink()
        return True

    def _read(self, name: str) -> tuple[SteerSpec | None, str | None]:
        """(spec, None), or (None, why) for a file that is not a valid spec."""
        try:
            return SteerSpec.from_json(self.path(name).read_text(encoding="utf-8")), None
        except (ConfigError, OSError, UnicodeDecodeError) as e:
            return None, str(e)

    def load(self, name: str) -> SteerSpec | None:
        if not safe_name(name) or not self.path(name).is_file():
            return None
        return self._read(name)[0]

    def specs(self) -> dict[str, SteerSpec]:
        """name -> spec of every valid abstainer (each file read once)."""
        read = {n: self._read(n)[0] for n in self._files()}
        return {n: spec for n, spec in read.items() if spec is not None}

    def names(self) -> list[str]:
        """The names of the valid abstainers."""
        return list(self.specs())

    def skipped(self) -> dict[str, str]:
        """file name -> why, for each file that is not a valid spec."""
        bad = {}
        for n in self._files():
            why = self._read(n)[1]
            if why is not None:
                bad[self.path(n).name] = why
        return bad

    def _files(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))
