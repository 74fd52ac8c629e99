"""Settings as pydantic models, with the errors a config file's author can read.

Every configuration (a grid, the refusal suite, back-end options, technique parameters, a
steering spec) is a :class:`Settings`: a pydantic model in strict mode with extra fields
forbidden, so YAML's ``do_sample: "no"`` (a string, and a truthy one) is refused rather than
sampled. The rules are a config file's, not Python's: a bool is only ``true``/``false``, an
int is never a bool, a float takes an int and is finite (YAML's ``.nan`` and ``.inf`` are
refused), a :data:`Seq` takes a list (YAML has no tuples).

pydantic's :class:`~pydantic.ValidationError` lists every problem in its own words; the
workbench shows one :class:`~workbench.errors.ConfigError` line naming the setting, the type it
takes and the value it got (``config field 'seeds[1]' must be an integer, got '1' (str)``):
:func:`problem_line` turns the first error into that line. :meth:`Settings.json_schema` is
what ``workbench schema KIND`` writes, so an editor validates a YAML file as it is typed.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar, Union

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from workbench.errors import ConfigError

__all__ = [
    "NonNegative",
    "Number",
    "Positive",
    "Seq",
    "Settings",
    "check_value",
    "describe",
    "invalid",
    "problem_line",
]

T = TypeVar("T")

#: A list in a config file (YAML has no tuples), held as a tuple; its items stay strict.
Seq = Annotated[tuple[T, ...], Strict(False)]


def _as_written(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    checked = handler(value)  # type and bounds
    return value if type(value) is int else checked


#: A number (a float that takes an int, finite). An int stays an int, as it was written: a
#: setting's serialized form keys cached results, and ``1`` and ``1.0`` are different JSON.
Number = Annotated[float, WrapValidator(_as_written)]
#: A count that may be zero (questions of a kind, a limit, a seed).
NonNegative = Annotated[int, Field(ge=0)]
#: A count of at least one (tokens, samples, a batch, layers).
Positive = Annotated[int, Field(ge=1)]

STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def invalid(message: str) -> PydanticCustomError:
    """A problem a validator finds beyond the types, as pydantic carries it: raise it inside a
    validator and the message reaches the user as written (with the setting's place where the
    validator belongs to a nested setting)."""
    return PydanticCustomError("workbench", "{message}", {"message": message})


class Settings(BaseModel):
    """A strict, frozen pydantic model whose construction errors are one ConfigError line.

    ``label`` names a setting of this kind in messages (``config field``, ``option``);
    ``Settings(**fields)``, :meth:`from_dict` and :meth:`replace` validate; :meth:`to_dict`
    gives plain data (lists, mappings) that :meth:`from_dict` reads back.
    """

    model_config = STRICT
    label: ClassVar[str] = "config field"

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ConfigError(problem_line(e, type(self), data, self.label)) from None

    # pydantic calls a model's own __init__ to build it nested in another (a problem would then
    # be named without its place, 'limit' for 'datasets[0].limit'): this one only reports, so
    # nested settings are validated in place and the outermost reports the whole path
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def unknown_fields(cls, names: Sequence[str]) -> str:
        """The message for fields the class does not have (override to say it your way)."""
        known = ", ".join(sorted(cls.model_fields))
        return f"unknown {cls.label}(s) {', '.join(map(repr, names))}; known: {known}"

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{cls.label}s must be a mapping, got {_show(data)}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return _plain(dict(self))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated again (``model_copy`` would not check them)."""
        return type(self)(**{**dict(self), **changes})

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.model_fields)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a file of these settings (as a YAML editor reads it), each field
        described by its entry in the class docstring's ``Attributes:``."""
        schema = cls.model_json_schema(mode="validation")
        _describe_fields(schema, cls)
        for name, sub in schema.get("$defs", {}).items():
            model = _nested_models(cls).get(name)
            if model is not None:
                _describe_fields(sub, model)
        return schema

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Each field's one-paragraph help, from the docstring's ``Attributes:`` section (an
        entry ``a / b: text`` documents both)."""
        return attribute_docs(cls.__doc__ or "")


def attribute_docs(doc: str) -> dict[str, str]:
    """``name -> text`` of a Google-style docstring's ``Attributes:`` entries."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return out
    names: list[str] = []
    indent = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break
        if depth == indent and ":" in line:
            head, _, text = line.strip().partition(":")
            names = [n.strip().strip("`") for n in re.split(r"[/,]", head) if n.strip()]
            for n in names:
                out[n] = text.strip()
        else:
            for n in names:
                out[n] = f"{out[n]} {line.strip()}".strip()
    return out


def _describe_fields(schema: dict[str, Any], model: type[BaseModel]) -> None:
    docs = attribute_docs(model.__doc__ or "")
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]


def _nested_models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The models nested anywhere in ``model``'s fields, by class name (as ``$defs`` names
    them)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(annotation: Any) -> None:
        annotation = _strip(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ not in found:
                found[annotation.__name__] = annotation
                for info in annotation.model_fields.values():
                    visit(info.annotation)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    for info in model.model_fields.values():
        visit(info.annotation)
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _plain(dict(value))
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


# -- describing what a setting takes --------------------------------------------------------------


def _strip(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[...]`` metadata."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType)


def _without_none(annotation: Any) -> Any:
    """``X`` for ``X | None`` (None means "unset"); any other annotation as it is."""
    annotation = _strip(annotation)
    if _is_union(annotation):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return _strip(inner[0])
    return annotation


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


def describe(annotation: Any) -> str:
    """What a value of ``annotation`` is, in a config file's words ("a list of integers")."""
    annotation = _strip(annotation)
    if annotation is Any:
        return "anything"
    if annotation is type(None) or annotation is None:
        return "null"
    if _is_union(annotation):
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
        if args and _strip(args[1]) is not Any:
            return f"a mapping to {_plural(args[1])}"
        return "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping"
    return _SIMPLE.get(annotation, f"a {getattr(annotation, '__name__', annotation)}")


def _plural(annotation: Any) -> str:
    """``describe`` of many: "integers", "lists of strings", "mappings to numbers"."""
    annotation = _strip(annotation)
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


# -- pydantic's errors as one line ----------------------------------------------------------------

_MISSING = object()


def _field_annotation(model: type[BaseModel], name: str) -> Any:
    info = model.model_fields[name]
    if info.metadata:
        return Annotated[(info.annotation, *info.metadata)]
    return info.annotation


def _bound(annotation: Any) -> tuple[str, Any] | None:
    """The first numeric bound (``ge``, ``gt``, ``le``, ``lt``) in ``annotation``'s metadata
    (``X | None``: in ``X``'s)."""
    if _is_union(annotation):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = inner[0] if len(inner) == 1 else annotation
    while typing.get_origin(annotation) is Annotated:
        annotation, *metadata = typing.get_args(annotation)
        for m in metadata:
            items = getattr(m, "metadata", [m])  # a FieldInfo carries its constraints
            for item in items:
                for kind in ("ge", "gt", "le", "lt"):
                    if isinstance(item, getattr(annotated_types, kind.capitalize())):
                        return kind, getattr(item, kind)
    return None


def _walk(annotation: Any, value: Any, loc: tuple, where: str):
    """Follow ``loc`` into ``annotation`` and ``value``; stop where the annotation has no
    place for the next part (a union's member, a field a model lacks). Returns the deepest
    annotation, value and name reached."""
    for part in loc:
        plain = _strip(annotation)
        if _is_union(plain):
            if value is None:
                break
            plain = _without_none(plain)
            annotation = plain if not _is_union(plain) else annotation
            if _is_union(plain):
                break
        origin, args = typing.get_origin(plain), typing.get_args(plain)
        if isinstance(plain, type) and issubclass(plain, BaseModel):
            if part not in plain.model_fields:
                break
            annotation = _field_annotation(plain, str(part))
            value = value.get(part, _MISSING) if isinstance(value, Mapping) else _MISSING
            where = f"{where}.{part}" if where else str(part)
        elif origin in (tuple, list) and isinstance(part, int):
            if origin is tuple and args and args[-1] is not Ellipsis:
                annotation = args[part] if part < len(args) else Any
            else:
                annotation = args[0] if args else Any
            value = value[part] if isinstance(value, Sequence) and part < len(value) else _MISSING
            where = f"{where}[{part}]"
        elif origin is dict:
            if part == "[key]":
                annotation = args[0] if args else Any
                where = f"{where} key"
                break
            annotation = args[1] if args else Any
            value = value.get(part, _MISSING) if isinstance(value, Mapping) else _MISSING
            where = f"{where}.{part}"
        else:
            break
    return annotation, value, where


def problem_line(
    error: ValidationError,
    model: Any,
    data: Any,
    label: str = "config field",
    prefix: str = "",
) -> str:
    """One line for the first problem of ``error`` (raised validating ``data`` as ``model``, a
    Settings class or any annotation): ``<label> '<where>' must be ..., got ...``; fields the
    model does not have are all named at once."""
    errors = error.errors(include_url=False)
    top = model if isinstance(model, type) and issubclass(model, BaseModel) else None
    extra = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if top is not None and extra and issubclass(top, Settings):
        message = top.unknown_fields([str(e["loc"][0]) for e in extra])
        return message if not prefix else f"{label} '{prefix.rstrip('.')}': {message}"
    first = errors[0]
    loc = tuple(first["loc"])
    annotation, value, where = _walk(model, data, loc, prefix.rstrip("."))
    value = first.get("input") if value is _MISSING else value
    kind = first["type"]
    if kind == "workbench":
        message = first["ctx"]["message"] if first.get("ctx") else first["msg"]
        return f"{label} '{where}': {message}" if where else message
    if kind == "extra_forbidden":  # nested: named whole, with the key it does not take
        where = _place(prefix.rstrip("."), loc)
        return f"{label} '{where}' is not a setting here"
    if kind == "missing":
        return f"{label} '{where}' is required"
    if kind == "too_short":
        least = (first.get("ctx") or {}).get("min_length", 1)
        return f"{label} '{where}' must list at least {least}, got {_show(value)}"
    bound = _bound(annotation)
    if bound is not None and kind in (
        "greater_than_equal",
        "greater_than",
        "less_than_equal",
        "less_than",
    ):
        op, limit = bound
        if op == "ge" and limit in (0, 1) and _without_none(annotation) is int:
            kind_text = "a non-negative integer" if limit == 0 else "a positive integer"
            return f"{label} '{where}' must be {kind_text}, got {value!r}"
        sign = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}[op]
        return f"{label} '{where}' must be {sign} {limit}, got {value!r}"
    return f"{label} '{where}' must be {describe(annotation)}, got {_show(value)}"


def _place(where: str, loc: tuple) -> str:
    """``loc`` as a config file's path: ``datasets[0].columns.colums``."""
    for part in loc:
        if isinstance(part, int):
            where = f"{where}[{part}]"
        else:
            where = f"{where}.{part}" if where else str(part)
    return where


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(_lax(annotation), config=STRICT if not _is_model(annotation) else None)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _lax(annotation: Any) -> Any:
    """``annotation`` with every list or tuple taking either (YAML has only lists)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return Annotated[(_lax(args[0]), *args[1:])]
    if _is_union(annotation):
        return Union[tuple(_lax(a) for a in args)]  # noqa: UP007 (built from a tuple)
    if origin in (tuple, list):
        inner = origin[tuple(_lax(a) if a is not Ellipsis else a for a in args)] if args else origin
        return Annotated[inner, Strict(False)]
    if origin is dict and args:
        return Annotated[dict[_lax(args[0]), _lax(args[1])], Strict(False)]  # type: ignore[misc]
    return annotation


def check_value(value: Any, annotation: Any, where: str, label: str = "config field") -> None:
    """Raise a one-line ConfigError (``<label> '<where>' must be ..., got ...``) unless
    ``value`` fits ``annotation`` by a config file's rules."""
    try:
        _adapter(annotation).validate_python(value)
    except ValidationError as e:
        raise ConfigError(problem_line(e, annotation, value, label, where)) from None
