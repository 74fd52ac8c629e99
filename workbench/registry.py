"""One registry type for everything the workbench looks up by name: engines, techniques,
editors, detectors, presets, data sets and release kinds.

A :class:`Registry` is a read-only mapping from names to entries, filled by the modules that
define the entries (``REGISTRY.register(name, entry)``, or as a decorator). Looking up a name it
does not hold is one line naming the kind and the names it does hold (:class:`UnknownName`, a
:class:`~workbench.errors.ConfigError` and a :class:`KeyError`), so callers never write that
check by hand. Registering a second, different entry under a taken name is an error unless the
caller says ``replace=True``: overwriting is always on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, overload

from workbench.errors import ConfigError

T = TypeVar("T")


class UnknownName(ConfigError, KeyError):
    """A name that a registry does not hold (one line: the kind, the name, the known names)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one ``kind`` ("technique", "engine", ...), in registration order."""

    def __init__(self, kind: str, entries: Mapping[str, T] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    @overload
    def register(
        self, name: str, entry: None = None, *, replace: bool = False
    ) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, entry: T, *, replace: bool = False) -> T: ...
    def register(self, name: str, entry: Any = None, *, replace: bool = False) -> Any:
        """Add ``entry`` under ``name`` and return it; without ``entry``, a decorator that does.
        The same (or an equal) entry again is a no-op; another entry under a taken name needs ``replace``."""
        if entry is None:
            return lambda e: self.register(name, e, replace=replace)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.kind} needs a non-empty name, got {name!r}")
        held = self._entries.get(name)
        if held is not None and held is not entry and held != entry and not replace:
            raise ConfigError(
                f"{self.kind} {name!r} is already registered (pass replace=True to replace it)"
            )
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove ``name`` (an unknown name is an :class:`UnknownName`) and return its entry."""
        entry = self[name]
        del self._entries[name]
        return entry

    @contextmanager
    def override(self, name: str, entry: T) -> Iterator[T]:
        """``entry`` under ``name`` inside the ``with`` block (a variant to try, a test's
        stand-in); what was there before (or nothing) afterwards."""
        held = self._entries.get(name)
        self.register(name, entry, replace=True)
        try:
            yield entry
        finally:
            if held is None:
                self._entries.pop(name, None)
            else:
                self._entries[name] = held

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            known = ", ".join(self._entries) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
