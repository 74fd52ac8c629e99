"""The typed configuration of an experiment grid (models x techniques x targets x seeds).

Every field is validated before any model loads; errors name the field. ``cell_config`` is the
part of the configuration that determines one cell's rows, and its hash keys the cell's results:
change anything that affects a cell and that cell is recomputed, never reused stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import ConfigError

DETECTORS = ("phrase", "keyword")


@dataclass(frozen=True)
class ExperimentConfig:
    """An experiment grid and its evaluation settings.

    Attributes:
        name: run name; results go to ``runs/<name>/``.
        models: registered names, local paths or hub ids.
        techniques: registered technique names; ``base`` is the unmodified model.
        preset: named technique parameters applied first (``workbench`` defaults, or ``select``
            for SELECT's protocol; ``workbench.techniques.presets``).
        technique_params: per-technique parameter overrides on top of the preset, e.g.
            ``{"steering": {"strength": 0.8}}``.
        targets: target concept ids (atomic or composition).
        seeds: seeds (data sampling, training, generation).
        n_target / n_descendant / n_specificity: evaluation questions per group (the target's
            eval questions; its descendants'; its siblings' and ancestors').
        n_unrelated: eval questions about concepts far from the target (outside its subtree,
            ancestry and specificity set): far specificity, for every technique.
        n_constituent: for a composition target, eval questions about its constituent atomic
            concepts (it should answer them: SELECT's atomic specificity of compositions).
        n_composition: for an atomic target, eval questions about compositions it is part of
            (it should abstain: SELECT's generalization from concepts to compositions).
        max_new_tokens, num_samples, temperature, batch_size: generation settings (greedy when
            ``num_samples`` is 1).
        early_stop: end an answer as soon as the phrase detector sees a refusal.
        data_dir: the benchmark to read (default: the shipped ``data/``).
    """

    name: str = "demo"
    models: tuple[str, ...] = ("smollm2-135m-instruct",)
    techniques: tuple[str, ...] = ("base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo")
    preset: str = "workbench"
    technique_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    targets: tuple[str, ...] = ("wn:09411430-n", "wn:10560637-n", "wn:06613686-n")
    seeds: tuple[int, ...] = (0,)
    n_target: int = 20
    n_descendant: int = 20
    n_specificity: int = 20
    n_unrelated: int = 10
    n_constituent: int = 0
    n_composition: int = 0
    max_new_tokens: int = 40
    num_samples: int = 1
    temperature: float = 0.7
    batch_size: int = 32
    early_stop: bool = True
    data_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("models", "techniques", "targets", "seeds"):
            value = getattr(self, name)
            if isinstance(value, (str, int)):
                value = (value,)
            object.__setattr__(self, name, tuple(value))
            if not getattr(self, name):
                raise ConfigError(f"config field '{name}' must list at least one entry")
        for name in ("n_target", "n_descendant", "n_specificity", "n_unrelated",
                     "n_constituent", "n_composition"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ConfigError(f"config field '{name}' must be a non-negative integer, got {getattr(self, name)!r}")
        for name in ("max_new_tokens", "num_samples", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"config field '{name}' must be a positive integer, got {getattr(self, name)!r}")
        if not self.name or any(c in self.name for c in "/\\") or self.name.startswith("."):
            raise ConfigError(f"config field 'name' must be a plain directory name, got {self.name!r}")
        if not all(isinstance(s, int) for s in self.seeds):
            raise ConfigError(f"config field 'seeds' must hold integers, got {self.seeds!r}")
        if not isinstance(self.technique_params, dict):
            raise ConfigError("config field 'technique_params' must map technique names to parameters")
        from workbench.techniques.presets import PRESETS

        if self.preset not in PRESETS:
            raise ConfigError(f"config field 'preset' is {self.preset!r}; known: {', '.join(sorted(PRESETS))}")

    def params_for(self, technique: str) -> dict[str, Any]:
        """The parameter overrides of ``technique``: the preset's, then ``technique_params``."""
        from workbench.techniques.presets import preset_params

        return {**preset_params(self.preset, technique), **self.technique_params.get(technique, {})}

    # -- (de)serialisation ---------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {', '.join(map(repr, unknown))}; "
                              f"known: {', '.join(sorted(known))}")
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> ExperimentConfig:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"no config file at {p}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: invalid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: expected a mapping of config fields")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("models", "techniques", "targets", "seeds"):
            d[k] = list(d[k])
        return d

    # -- validation against the world (no model loads) ----------------------------------------
    def validate(self, bench) -> None:
        """Check technique names and parameters, target ids, and that the benchmark has the
        questions each technique learns from; raise ConfigError naming the field."""
        from workbench.taxonomy import UnknownConceptError
        from workbench.techniques import get_technique

        for name in self.technique_params:
            if name not in self.techniques:
                raise ConfigError(f"config field 'technique_params' names {name!r}, which is not in 'techniques'")
        techniques = {}
        for name in self.techniques:
            try:
                techniques[name] = get_technique(name, **self.params_for(name))
            except ConfigError as e:
                raise ConfigError(f"config field 'techniques': {e}") from None
        for t in self.targets:
            try:
                bench.concept(t)
            except UnknownConceptError as e:
                raise ConfigError(f"config field 'targets': {e}") from None
        for t in self.targets:
            for technique in techniques.values():
                technique.check_data(bench, t)

    # -- hashing --------------------------------------------------------------------------------
    def generation_settings(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("max_new_tokens", "num_samples", "temperature",
                                              "early_stop", "n_target", "n_descendant", "n_specificity")}
        for k in ("n_unrelated", "n_constituent", "n_composition"):  # only when used
            if getattr(self, k):
                out[k] = getattr(self, k)
        return out

    def cell_config(self, model: str, technique: str, target: str, seed: int, data_hash: str) -> dict[str, Any]:
        return {"model": model, "technique": technique, "target": target, "seed": seed,
                "params": self.params_for(technique), "generation": self.generation_settings(),
                "data": data_hash, "format": 1}

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def hash_dict(d: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
