"""A steering abstainer as plain data: what an engine needs to steer and gate a request.

:class:`SteerSpec` holds the behaviour plan (refusal vectors, the layers they are added at, the
strength), the optional gate (concept vectors, training means, thresholds, how layers vote,
whether the last layer is read after the final norm) and the mode (``separate``: steer a fired
prompt from its first token; ``in_pass``: CAST's order, the prompt's own pass steered only at
behaviour layers deeper than the deepest condition layer, every generated token everywhere). It is JSON-able without loss (fp32 values survive
a float64 round trip), so the same spec travels to vLLM's workers, to a server's registry and
inside an API request, and :meth:`SteerSpec.digest` names its content.

The workbench's engine runs a spec through :class:`~workbench.steering.ConditionalSteerer`
(:func:`workbench.steering.conditional.steerer_of`); vLLM through
:mod:`workbench.backends.vllm_steering`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar, Self

import torch
from pydantic import ConfigDict, model_validator

from workbench.errors import ConfigError
from workbench.settings import Seq, Settings

MODES = ("separate", "in_pass")
AGGREGATES = ("all", "any", "majority")
#: a strength above this (in absolute value) is allowed but reported as extreme: the workbench's
#: fitted strengths are a few units, and far larger ones give garbled text
EXTREME_STRENGTH = 100.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def _matrix(name: str, field: str, t: torch.Tensor, rows: int, width: int | None) -> None:
    """``t`` is a finite (rows, width) matrix, or one ConfigError line naming ``field``."""
    if t.dim() != 2 or t.shape[0] != rows:
        raise ConfigError(
            f"abstainer {name!r}: {rows} layers but {field} have shape {tuple(t.shape)} (one "
            "row per layer, all of one width)"
        )
    if width is not None and t.shape[1] != width:
        raise ConfigError(
            f"abstainer {name!r}: {field} have width {t.shape[1]}; the behaviour vectors' is {width}"
        )
    if not bool(torch.isfinite(t).all()):
        raise ConfigError(f"abstainer {name!r}: {field} hold NaN or infinite values")


class _Record(Settings):
    """Settings holding tensors, whose fields may also be given in order (``SteerSpec(name,
    layers, vectors, strength)``), as when they were dataclasses. NaN and infinite values reach
    :class:`SteerSpec`'s own check, which names the abstainer."""

    model_config = ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=True)
    label: ClassVar[str] = "steering spec field"

    def __init__(self, *args: Any, **data: Any) -> None:
        names = type(self).field_names()
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} fields in order")
        for name, value in zip(names, args):
            if name in data:
                raise TypeError(f"{type(self).__name__} got {name!r} twice")
            data[name] = value
        super().__init__(**data)


class GateSpec(_Record):
    """The condition: per condition layer a unit concept vector, the mean it is centred on and
    a threshold; ``aggregate`` combines the layers' votes (``all``, ``any``, ``majority``)."""

    layers: Seq[int]
    vectors: torch.Tensor  # (len(layers), hidden)
    means: torch.Tensor  # (len(layers), hidden)
    thresholds: Seq[float]
    aggregate: str = "all"
    inclusive: bool = False
    final_norm: bool = False

    def condition(self):
        from workbench.steering.concept import ConceptVectors, Condition

        vectors = ConceptVectors(list(self.layers), self.vectors.float(), self.means.float())
        return Condition(vectors, list(self.thresholds), self.aggregate, inclusive=self.inclusive)


def repeated_layer(layers: Sequence[int], num_layers: int | None = None) -> str | None:
    """What is wrong where ``layers`` name one block twice (counting from the end too, given
    ``num_layers``), or ``None``. Each block is steered once: the engines add one vector per
    block (sum the vectors of a block into one)."""
    seen: dict[int, int] = {}
    for layer in layers:
        block = layer % num_layers if num_layers else layer
        if block in seen:
            same = "" if seen[block] == layer else f" (as {seen[block]})"
            return f"behaviour layer {layer} is given twice{same}: add its vectors into one"
        seen[block] = layer
    return None


class SteerSpec(_Record):
    """One abstainer's steering: ``strength * vectors[i]`` added at ``layers[i]`` to the prompts
    the gate fires on (every prompt without a gate)."""

    name: str
    layers: Seq[int]
    vectors: torch.Tensor  # (len(layers), hidden)
    strength: float
    gate: GateSpec | None = None
    mode: str = "separate"

    @model_validator(mode="after")
    def _check(self) -> Self:
        """Everything an engine relies on that the spec alone tells: the one check of a spec
        built here, read from JSON (an API request, a registry file) or sent to vLLM's workers.
        What depends on the model (width, layer range) is :meth:`check_model`."""
        if not _NAME.match(self.name):
            raise ConfigError(
                f"abstainer name {self.name!r} must be 1-128 letters, digits, '.', '_', ':' or '-'"
            )
        if self.mode not in MODES:
            raise ConfigError(f"steering mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.layers:
            raise ConfigError(f"abstainer {self.name!r}: no behaviour layers")
        twice = repeated_layer(self.layers)
        if twice is not None:
            raise ConfigError(f"abstainer {self.name!r}: {twice}")
        _matrix(self.name, "the behaviour vectors", self.vectors, len(self.layers), None)
        if not math.isfinite(self.strength):
            raise ConfigError(f"abstainer {self.name!r}: strength {self.strength} is not finite")
        g = self.gate
        if g is None:
            return self
        if g.aggregate not in AGGREGATES:
            raise ConfigError(
                f"abstainer {self.name!r}: gate aggregate must be one of {', '.join(AGGREGATES)}, "
                f"got {g.aggregate!r}"
            )
        if not g.layers:
            raise ConfigError(f"abstainer {self.name!r}: the gate has no layers")
        width = int(self.vectors.shape[1])
        _matrix(self.name, "the gate's vectors", g.vectors, len(g.layers), width)
        _matrix(self.name, "the gate's means", g.means, len(g.layers), width)
        if len(g.thresholds) != len(g.layers):
            raise ConfigError(
                f"abstainer {self.name!r}: the gate has {len(g.layers)} layers but "
                f"{len(g.thresholds)} thresholds"
            )
        if not all(math.isfinite(t) for t in g.thresholds):
            raise ConfigError(f"abstainer {self.name!r}: a gate threshold is not finite")
        return self

    def check_model(self, hidden: int, num_layers: int) -> None:
        """The spec fits a model of width ``hidden`` with ``num_layers`` blocks (layers may
        count from the end, -1 the last), or one ConfigError line naming what does not."""
        if self.hidden != hidden:
            raise ConfigError(
                f"abstainer {self.name!r} has vectors of width {self.hidden}; this model's is {hidden}"
            )
        for field, layers in (
            ("layer", self.layers),
            ("gate layer", self.gate.layers if self.gate else ()),
        ):
            for layer in layers:
                if not -num_layers <= layer < num_layers:
                    raise ConfigError(
                        f"abstainer {self.name!r}: {field} {layer} is outside 0..{num_layers - 1}"
                    )
        twice = repeated_layer(self.layers, num_layers)
        if twice is not None:
            raise ConfigError(f"abstainer {self.name!r}: {twice}")

    def warnings(self) -> list[str]:
        """What is allowed but unusual about the spec (a request's steering record shows it)."""
        if abs(self.strength) > EXTREME_STRENGTH:
            return [
                f"strength {self.strength:g} is extreme (above {EXTREME_STRENGTH:g}): expect "
                "garbled answers"
            ]
        return []

    @property
    def hidden(self) -> int:
        return int(self.vectors.shape[-1])

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "mode": self.mode,
            "layers": list(self.layers),
            "vectors": self.vectors.float().tolist(),
            "strength": float(self.strength),
            "gate": None,
        }
        if self.gate is not None:
            g = self.gate
            d["gate"] = {
                "layers": list(g.layers),
                "vectors": g.vectors.float().tolist(),
                "means": g.means.float().tolist(),
                "thresholds": [float(t) for t in g.thresholds],
                "aggregate": g.aggregate,
                "inclusive": bool(g.inclusive),
                "final_norm": bool(g.final_norm),
            }
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Self:
        """The spec from :meth:`to_dict`'s form; a malformed one is one ConfigError line."""
        try:
            gate = None
            if d.get("gate") is not None:
                g = d["gate"]
                gate = GateSpec(
                    layers=tuple(int(x) for x in g["layers"]),
                    vectors=torch.tensor(g["vectors"], dtype=torch.float32),
                    means=torch.tensor(g["means"], dtype=torch.float32),
                    thresholds=tuple(float(t) for t in g["thresholds"]),
                    aggregate=str(g.get("aggregate", "all")),
                    inclusive=bool(g.get("inclusive", False)),
                    final_norm=bool(g.get("final_norm", False)),
                )
            return cls(
                name=str(d["name"]),
                layers=tuple(int(x) for x in d["layers"]),
                vectors=torch.tensor(d["vectors"], dtype=torch.float32),
                strength=float(d["strength"]),
                gate=gate,
                mode=str(d.get("mode", "separate")),
            )
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
            raise ConfigError(f"a steering spec is malformed ({type(e).__name__}: {e})") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ConfigError(f"a steering spec is not JSON ({e})") from None

    def digest(self) -> str:
        """16 hex digits naming the content (the name included); computed once per spec."""
        return self._digest

    @cached_property
    def _digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def spec_of(name: str, steerer, *, mode: str = "separate", final_norm: bool = False) -> SteerSpec:
    """The spec of a :class:`~workbench.steering.ConditionalSteerer` (its condition and plan)."""
    cond, plan = steerer.condition, steerer.plan
    gate = None
    if cond is not None:
        gate = GateSpec(
            layers=tuple(int(l) for l in cond.layers),
            vectors=cond.vectors.vectors.float().clone(),
            means=cond.vectors.means.float().clone(),
            thresholds=tuple(float(t) for t in cond.thresholds),
            aggregate=str(cond.aggregate),
            inclusive=bool(cond.inclusive),
            final_norm=final_norm,
        )
    return SteerSpec(
        name=name,
        layers=tuple(int(l) for l in plan.layers),
        vectors=plan.vectors.float().clone(),
        strength=float(plan.strength),
        gate=gate,
        mode=mode,
    )
