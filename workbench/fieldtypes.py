"""Settings checked against their declared types, before any work starts.

Configurations are typed dataclasses (a grid, the refusal suite, back-end options) or notebook
parameters; YAML files and command lines give them whatever was written. YAML's ``do_sample:
"no"`` is a string, and a truthy one: unchecked, it samples. :func:`check_fields` holds every
field's value against its annotation and :func:`check_value` one value against a type, each
failure one :class:`~workbench.errors.ConfigError` line naming the setting, the type it takes
and the value it got.

The rules are those of a config file, not Python's: a bool is only ``true``/``false`` (never
1 or "yes"), an int is never a bool, a float takes an int, a tuple or list takes either (YAML
has only lists), a float is finite (YAML's ``.nan`` and ``.inf`` are refused), ``X | None``
takes null, ``Literal[...]`` one of its values, ``Any`` anything.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, Union

from workbench.errors import ConfigError

__all__ = ["check_fields", "check_value", "describe", "mismatch"]


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType)


def describe(annotation: Any) -> str:
    """What a value of ``annotation`` is, in a config file's words ("a list of integers")."""
    if annotation is Any:
        return "anything"
    if annotation is type(None) or annotation is None:
        return "null"
    if _is_union(annotation):
        # "X | None": null means "unset" (a preset's value), not something to suggest
        kinds = [describe(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(kinds) or "null"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin in (tuple, list):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"a list of {len(args)} items"
        return f"a list of {_plural(args[0])}" if args and args[0] is not Any else "a list"
    if origin is dict:
        if args and args[1] is not Any:
            return f"a mapping to {_plural(args[1])}"
        return "a mapping"
    return _SIMPLE.get(annotation, f"a {getattr(annotation, '__name__', annotation)}")


_SIMPLE = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a mapping",
    list: "a list",
    tuple: "a list",
}
_PLURAL = {bool: "true/false values", int: "integers", float: "numbers", str: "strings"}


def _plural(annotation: Any) -> str:
    """``describe`` of many: "integers", "lists of strings", "mappings to numbers"."""
    if annotation in _PLURAL:
        return _PLURAL[annotation]
    text = describe(annotation)
    if " or " in text or typing.get_origin(annotation) is Literal or annotation is Any:
        return f"items each {text}"
    noun, _, rest = text.removeprefix("a ").removeprefix("an ").partition(" ")
    return f"{noun}s {rest}".strip()


def _show(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def mismatch(value: Any, annotation: Any, where: str) -> str | None:
    """None when ``value`` fits ``annotation``; else ``"'where' must be ..., got ..."``, where
    ``where`` names the innermost item that does not fit (``models[1]``, ``params.strength``)."""
    if annotation is Any:
        return None
    if annotation is type(None) or annotation is None:
        return None if value is None else _must(where, annotation, value)
    if _is_union(annotation):
        options = typing.get_args(annotation)
        if any(mismatch(value, a, where) is None for a in options):
            return None
        inner = [a for a in options if a is not type(None)]
        if len(inner) == 1 and _container(inner[0]) and _container_matches(value, inner[0]):
            return mismatch(value, inner[0], where)  # the element that does not fit
        return _must(where, annotation, value)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        ok = any(value == a and type(value) is type(a) for a in args)
        return None if ok else _must(where, annotation, value)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return _must(where, annotation, value)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return _must(where, annotation, value)
            items = list(zip(value, args))
        else:
            items = [(v, args[0] if args else Any) for v in value]
        for i, (v, a) in enumerate(items):
            problem = mismatch(v, a, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return _must(where, annotation, value)
        key_type, value_type = args if args else (Any, Any)
        for k, v in value.items():
            problem = mismatch(k, key_type, f"{where} key {k!r}") or mismatch(
                v, value_type, f"{where}.{k}"
            )
            if problem:
                return problem
        return None
    if annotation is bool:
        ok = isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation is float:  # YAML's .nan and .inf pass every range check: refused here
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
    elif isinstance(annotation, type):
        ok = isinstance(value, annotation)
    else:  # an annotation this module does not read: not checked here
        ok = True
    return None if ok else _must(where, annotation, value)


def _container(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (tuple, list, dict)


def _container_matches(value: Any, annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return isinstance(value, dict) if origin is dict else isinstance(value, (tuple, list))


def _must(where: str, annotation: Any, value: Any) -> str:
    return f"'{where}' must be {describe(annotation)}, got {_show(value)}"


def check_value(value: Any, annotation: Any, where: str, label: str = "config field") -> None:
    """Raise a one-line ConfigError (``<label> '<where>' must be ..., got ...``) unless
    ``value`` fits ``annotation``."""
    problem = mismatch(value, annotation, where)
    if problem:
        raise ConfigError(f"{label} {problem}")


def check_fields(
    obj: Any,
    *,
    prefix: str = "",
    label: str = "config field",
    skip: tuple[str, ...] = (),
) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation (fields in
    ``skip`` are left to their class: nested configs parsed from mappings); ``prefix`` names
    where ``obj`` sits (``sampling.``). A count named in :data:`MINIMUMS` is held to its
    minimum too."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if f.name not in skip:
            value = getattr(obj, f.name)
            check_value(value, hints[f.name], prefix + f.name, label)
            check_minimum(value, prefix + f.name, label)


#: How many questions of each kind a grid asks (an experiment's fields and the notebooks'
#: parameters of the same names).
QUESTION_COUNTS = (
    "n_target",
    "n_descendant",
    "n_specificity",
    "n_unrelated",
    "n_constituent",
    "n_composition",
)

#: The smallest value a count may take, by field name (config fields and notebook parameters
#: share names): what a negative or zero count would break only after a model has loaded.
MINIMUMS: dict[str, int] = {
    **dict.fromkeys(
        (
            *QUESTION_COUNTS,
            "limit",
            "per_partition",
            "edits_per_group",
            "max_labelled",
            "n_questions",
            "seed",
            "seeds",
            "ray_workers",
            "min_path",
        ),
        0,
    ),
    **dict.fromkeys(
        (
            "max_new_tokens",
            "num_samples",
            "batch_size",
            "k_samples",
            "n_boot",
            "max_depth",
            "instances_per_leaf",
            "concepts_per_root",
            "composition_max_depth",
            "chunk_size",
            # LoRA training (workbench.finetuning.lora.FinetuneParams)
            "rank",
            "alpha",
            "epochs",
            "dpo_epochs",
            "grad_accumulation",
            "max_length",
            # children kept per concept at each level (the taxonomy build)
            "branching",
            "composition_branching",
        ),
        1,
    ),
}


def check_minimum(value: Any, where: str, label: str = "config field") -> None:
    """A one-line ConfigError when ``where`` is a count (:data:`MINIMUMS`) and ``value`` is
    below its minimum; a list of counts (``branching``) item by item."""
    least = MINIMUMS.get(where.rsplit(".", 1)[-1])
    if least is not None and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_minimum(item, f"{where}[{i}]", label)
        return
    least = MINIMUMS.get(where.rsplit(".", 1)[-1].split("[", 1)[0])
    if least is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if value < least:
        kind = "a non-negative integer" if least == 0 else "a positive integer"
        raise ConfigError(f"{label} '{where}' must be {kind}, got {value!r}")
