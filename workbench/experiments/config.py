"""The typed configuration of an experiment grid (models x techniques x targets x seeds).

Every field is validated before any model loads; errors name the field. ``cell_config`` is the
part of the configuration that determines one cell's rows, and its hash keys the cell's results:
change anything that affects a cell and that cell is recomputed, never reused stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Self

from pydantic import Field, field_validator, model_validator

from workbench.errors import ConfigError
from workbench.settings import NonNegative, Number, Positive, Seq, Settings
from workbench.yamlfile import read_mapping

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

DETECTORS = ("phrase", "keyword")
#: How many questions of each kind a grid asks (the notebooks' parameters of the same names too).
QUESTION_COUNTS = (
    "n_target",
    "n_descendant",
    "n_specificity",
    "n_unrelated",
    "n_constituent",
    "n_composition",
)
#: Fields whose unset value (None) means "the preset's".
PRESET_FIELDS = (
    "seeds",
    "technique_seeds",
    "n_target",
    "n_descendant",
    "n_specificity",
    "n_unrelated",
    "max_new_tokens",
    "temperature",
    "top_p",
    "do_sample",
    "early_stop",
    "system_prompt",
    "eval_sampling",
    "eval_seed",
)


class ExperimentConfig(Settings):
    """An experiment grid and its evaluation settings.

    Fields marked "preset" default to ``None``: the preset's value
    (``workbench.techniques.presets.preset_settings``), resolved on construction.

    Attributes:
        name: run name; results go to ``runs/<name>/``.
        models: registered names, local paths or hub ids; ``vllm:<model>`` on vLLM,
            ``openai:<model>[@<url>]`` through an OpenAI-compatible endpoint.
        model_options: per-model back-end options (``workbench.backends``: ``VLLMOptions``,
            ``APIOptions``), e.g. ``{"openai:gpt-4o": {"concurrency": 4, "price_in": 2.5}}``.
        techniques: registered technique names; ``base`` is the unmodified model.
        preset: named technique parameters applied first (``workbench`` defaults, or ``select``
            for SELECT's protocol; ``workbench.techniques.presets``).
        technique_params: per-technique parameter overrides on top of the preset, e.g.
            ``{"steering": {"strength": 0.8}}``.
        targets: target concept ids (atomic or composition).
        seeds: seeds (data sampling, training, generation).
        technique_seeds: per-technique seeds replacing ``seeds`` for that technique (SELECT ran
            steering and fine-tuning once, prompting five times); when you set ``seeds`` and not
            this, your seeds apply to every technique.
        n_target / n_descendant / n_specificity: evaluation questions per group (the target's
            eval questions; its descendants'; its siblings' and ancestors'). Under
            ``eval_sampling="select"`` they cap SELECT's sample (its first n).
        n_unrelated: eval questions about concepts far from the target (outside its subtree,
            ancestry and specificity set): far specificity, for every technique.
        n_constituent: for a composition target, eval questions about its constituent atomic
            concepts (it should answer them: SELECT's atomic specificity of compositions).
        n_composition: for an atomic target, eval questions about compositions it is part of
            (it should abstain: SELECT's generalization from concepts to compositions).
        max_new_tokens, num_samples, temperature, top_p, do_sample, batch_size: generation
            settings (sampled when ``do_sample`` or ``num_samples`` > 1, else greedy).
        early_stop: end an answer as soon as the phrase detector sees a refusal.
        system_prompt: a system turn for every prompt: ``""`` none, ``"select"`` SELECT's (read
            from the benchmark's imported protocol), any other text as given.
        eval_sampling: ``workbench`` (spread over concepts, seeded by the cell's seed) or
            ``select`` (SELECT's draw: ``workbench.select.sampling``, seeded by ``eval_seed``).
        eval_seed: the seed of SELECT's draw of evaluation questions.
        data_dir: the benchmark to read (default: the shipped ``data/``).
    """

    name: str = "demo"
    models: Seq[str] = ("smollm2-135m-instruct",)
    model_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    techniques: Seq[str] = (
        "base",
        "zero_shot",
        "few_shot_cot",
        "steering",
        "sft",
        "sft_dpo",
    )
    preset: str = "workbench"
    technique_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    targets: Seq[str] = ("wn:09411430-n", "wn:10560637-n", "wn:06613686-n")
    seeds: Seq[NonNegative] | None = None  # preset
    technique_seeds: dict[str, Seq[NonNegative]] | None = None  # preset
    n_target: NonNegative | None = None  # preset
    n_descendant: NonNegative | None = None  # preset
    n_specificity: NonNegative | None = None  # preset
    n_unrelated: NonNegative | None = None  # preset
    n_constituent: NonNegative = 0
    n_composition: NonNegative = 0
    max_new_tokens: Positive | None = None  # preset
    num_samples: Positive = 1
    temperature: Number | None = None  # preset
    top_p: Number | None = None  # preset
    do_sample: bool | None = None  # preset
    batch_size: Positive = 32
    early_stop: bool | None = None  # preset
    system_prompt: str | None = None  # preset
    eval_sampling: str | None = None  # preset
    eval_seed: NonNegative | None = None  # preset
    data_dir: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_presets(cls, data: Any) -> Any:
        """A single name or seed stands for a list of one; fields left unset take the preset's
        value (an unknown preset is reported after the types are checked)."""
        from workbench.techniques.presets import PRESETS, preset_settings

        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("models", "techniques", "targets", "seeds"):
            if isinstance(data.get(name), (str, int)) and not isinstance(data.get(name), bool):
                data[name] = (data[name],)
        seeds = data.get("technique_seeds")
        if isinstance(seeds, dict):
            data["technique_seeds"] = {
                k: v if isinstance(v, (list, tuple)) else (v,) for k, v in seeds.items()
            }
        preset = data.get("preset", "workbench")
        if not isinstance(preset, str) or preset not in PRESETS:
            return data
        if data.get("seeds") is not None and data.get("technique_seeds") is None:
            # seeds you set apply to every technique, not only those the preset leaves alone
            data["technique_seeds"] = {}
        settings = preset_settings(preset)
        for name in PRESET_FIELDS:
            if data.get(name) is None:
                data[name] = settings[name]
        return data

    @field_validator("seeds")
    @classmethod
    def _once_each(cls, seeds: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return None if seeds is None else tuple(dict.fromkeys(seeds))

    @field_validator("technique_seeds")
    @classmethod
    def _once_each_per_technique(
        cls, seeds: dict[str, tuple[int, ...]] | None
    ) -> dict[str, tuple[int, ...]] | None:
        return None if seeds is None else {k: tuple(dict.fromkeys(v)) for k, v in seeds.items()}

    @model_validator(mode="after")
    def _check(self) -> Self:
        from workbench.paths import check_run_name
        from workbench.techniques.presets import PRESETS

        if self.preset not in PRESETS:
            raise ConfigError(
                f"config field 'preset' is {self.preset!r}; known: {', '.join(sorted(PRESETS))}"
            )
        # every preset gives each of them a value (never None)
        assert self.seeds is not None and self.top_p is not None and self.temperature is not None
        assert self.technique_seeds is not None
        for name in ("models", "techniques", "targets", "seeds"):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"config field '{name}' must list at least one entry")
            again = next((v for i, v in enumerate(values) if v in values[:i]), None)
            if again is not None:  # a cell listed twice would run twice
                raise ConfigError(f"config field '{name}' lists {again!r} twice")
        if all(getattr(self, name) == 0 for name in QUESTION_COUNTS):
            raise ConfigError(
                f"config fields {', '.join(QUESTION_COUNTS)} are all 0: the grid would ask no "
                "question"
            )
        check_run_name(self.name, "config field 'name'")
        for m in self.model_options:
            if m not in self.models:
                raise ConfigError(
                    f"config field 'model_options' names {m!r}, which is not in 'models'"
                )
        if self.eval_sampling not in ("workbench", "select"):
            raise ConfigError(
                f"config field 'eval_sampling' must be workbench or select, got {self.eval_sampling!r}"
            )
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"config field 'top_p' must be in (0, 1], got {self.top_p!r}")
        if self.sampled() and not self.temperature > 0:
            raise ConfigError(
                f"config field 'temperature' must be > 0 when sampling, got {self.temperature!r}"
            )
        if self.temperature < 0:  # unused when greedy, but never meaningful
            raise ConfigError(f"config field 'temperature' must be >= 0, got {self.temperature!r}")
        for name, seeds in self.technique_seeds.items():
            if not seeds:
                raise ConfigError(f"config field 'technique_seeds' gives {name!r} no seeds")
        return self

    def seeds_for(self, technique: str) -> tuple[int, ...]:
        """The seeds ``technique`` runs with (``technique_seeds``, else ``seeds``)."""
        assert self.technique_seeds is not None and self.seeds is not None  # set on construction
        return self.technique_seeds.get(technique, self.seeds)

    def sampled(self) -> bool:
        return bool(self.do_sample) or self.num_samples > 1

    def params_for(self, technique: str) -> dict[str, Any]:
        """The parameter overrides of ``technique``: the preset's, then ``technique_params``."""
        from workbench.techniques.presets import preset_params

        return {**preset_params(self.preset, technique), **self.technique_params.get(technique, {})}

    # -- (de)serialisation ---------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> ExperimentConfig:
        return cls.from_dict(read_mapping(path))

    # -- validation against the world (no model loads) ----------------------------------------
    def check_against(self, bench: Benchmark) -> None:
        """Check technique names and parameters, target ids, and that the benchmark has the
        questions each technique learns from; raise ConfigError naming the field."""
        from workbench.taxonomy import UnknownConceptError
        from workbench.techniques import TECHNIQUES, get_technique

        for name in self.technique_params:
            if name not in TECHNIQUES:
                import difflib

                close = difflib.get_close_matches(name, list(TECHNIQUES), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(
                    f"config field 'technique_params' names {name!r}, which is no technique; "
                    f"{hint}known: {', '.join(sorted(TECHNIQUES))}"
                )
            if name not in self.techniques:
                raise ConfigError(
                    f"config field 'technique_params' names {name!r}, which is not in 'techniques'"
                )

        assert self.technique_seeds is not None  # set on construction
        for name in self.technique_seeds:
            if name not in TECHNIQUES:
                raise ConfigError(
                    f"config field 'technique_seeds' names {name!r}, which is no "
                    f"technique; known: {', '.join(sorted(TECHNIQUES))}"
                )
        techniques = {}
        for name in self.techniques:
            try:
                techniques[name] = get_technique(name, **self.params_for(name))
            except ConfigError as e:  # the field the user wrote the bad setting in
                where = (
                    f"technique_params.{name}" if name in self.technique_params else "techniques"
                )
                raise ConfigError(f"config field '{where}': {e}") from None
        from workbench.backends import check_options, check_technique
        from workbench.errors import WorkbenchError

        for model in dict.fromkeys([*self.models, *self.model_options]):
            options = self.model_options.get(model)
            try:  # every model's, set or not: an endpoint's also read the environment
                check_options(model, options)
            except WorkbenchError as e:  # no options given: the environment's (OPENAI_BASE_URL)
                where = "model_options" if options else "models"
                raise ConfigError(f"config field '{where}': {e}") from None
        for model in self.models:
            for name, technique in techniques.items():
                try:
                    check_technique(model, name, type(technique).requires)
                except ConfigError as e:
                    raise ConfigError(f"config field 'models': {e}") from None
        for t in self.targets:
            try:
                bench.concept(t)
            except UnknownConceptError as e:
                raise ConfigError(f"config field 'targets': {e}") from None
        for t in self.targets:
            for technique in techniques.values():
                technique.check_data(bench, t)
        if self.system_prompt == "select":
            system_prompt(self.system_prompt, bench)

    # -- hashing --------------------------------------------------------------------------------
    def generation_settings(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in (
                "max_new_tokens",
                "num_samples",
                "temperature",
                "early_stop",
                "n_target",
                "n_descendant",
                "n_specificity",
            )
        }
        for k in ("n_unrelated", "n_constituent", "n_composition"):  # only when used
            if getattr(self, k):
                out[k] = getattr(self, k)
        # settings added later: only when they differ from the workbench's, so that the cells
        # of earlier runs keep their hashes
        from workbench.techniques.presets import WORKBENCH_SETTINGS

        for k in ("top_p", "do_sample", "system_prompt", "eval_sampling"):
            if getattr(self, k) != WORKBENCH_SETTINGS[k]:
                out[k] = getattr(self, k)
        if self.eval_sampling == "select":
            out["eval_seed"] = self.eval_seed
        return out

    def cell_config(
        self, model: str, technique: str, target: str, seed: int, data_hash: str
    ) -> dict[str, Any]:
        out = {
            "model": model,
            "technique": technique,
            "target": target,
            "seed": seed,
            "params": self.params_for(technique),
            "generation": self.generation_settings(),
            "data": data_hash,
            "format": 1,
        }
        from workbench.backends import options_not_in_answers

        free = options_not_in_answers()
        answers = {k: v for k, v in self.model_options.get(model, {}).items() if k not in free}
        if answers:  # e.g. a local tokenizer or a dtype: they change the answers
            out["model_options"] = answers
        return out

    def load_options(self, model: str) -> dict[str, Any] | None:
        """The options ``model`` loads with: its ``model_options``, and on vLLM the steering
        extension when a technique of the grid steers (on GPU that means eager mode)."""
        from workbench.backends import load_options_for
        from workbench.techniques import TECHNIQUES

        needs = frozenset().union(
            *(TECHNIQUES[t].requires for t in self.techniques if t in TECHNIQUES)
        )
        return load_options_for(model, self.model_options.get(model), needs)

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def system_prompt(setting: str | None, bench: Benchmark) -> str | None:
    """The system turn a config asks for: none, SELECT's (from the benchmark's protocol), or
    the text given."""
    if not setting:
        return None
    if setting == "select":
        protocol = getattr(bench, "select_protocol", None)
        if protocol is None:
            raise ConfigError(
                "system_prompt='select' needs SELECT's protocol text: import the "
                "release with `python -m workbench taxonomy import-select <clone of "
                "kinshuk-h/SELECT> --out DIR` and use data_dir=DIR"
            )
        return protocol.system_prompt
    return setting
