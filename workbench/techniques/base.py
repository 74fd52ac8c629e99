"""One interface for every abstention technique, and a registry of them.

A technique is a class with a parameters model (:class:`Params`). ``prepare(lm, bench,
target)`` builds what the technique needs from the target's *training* questions only (a prompt,
vectors, an adapter) and returns an :class:`Abstainer` whose ``generate(questions)`` answers
through the generation engine. Prepared artifacts are saved in an :class:`ArtifactStore` and
reused when the model, parameters and training data match. A new technique is one class and
``@register``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import ValidationError, model_validator

from workbench.errors import ConfigError
from workbench.generation import Generation, GenerationConfig
from workbench.registry import Registry
from workbench.settings import Settings, problem_line
from workbench.techniques.artifacts import ArtifactStore, check_meta
from workbench.techniques.data import TargetData, target_data

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

Nature = Literal["inference-time", "fine-tuning"]
Access = Literal["black-box", "white-box"]

#: Bump when an artifact's on-disk format changes.
ARTIFACT_VERSION = 1


class Params(Settings):
    """Base class of technique parameters (frozen settings of literals). A technique names its
    own in messages (``technique 'steering': parameter 'strength' ...``)."""

    label: ClassVar[str] = "parameter"

    @classmethod
    def unknown_fields(cls, names: Sequence[str]) -> str:
        known = ", ".join(sorted(cls.model_fields)) or "none"
        return f"no parameter {', '.join(map(repr, names))}; the parameters are: {known}"


#: ``protocol``: the workbench's prompts, or SELECT's from the benchmark's imported protocol.
Protocol = Literal["", "select"]


class ProtocolParams(Params):
    """Parameters with a ``protocol`` field (each subclass declares it where its fields put it):
    an unknown protocol is this one line, checked before the types."""

    @model_validator(mode="before")
    @classmethod
    def _protocol(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("protocol", "") not in ("", "select"):
            raise ConfigError(f"protocol must be '' or select, got {data['protocol']!r}")
        return data


#: A technique's parameters model.
P = TypeVar("P", bound=Params)


class Abstainer(ABC):
    """A model made to abstain from one target concept."""

    technique: str
    target: str

    @abstractmethod
    def generate(
        self,
        questions: Sequence[str],
        config: GenerationConfig | None = None,
        progress: bool = True,
        **kwargs,
    ) -> list[Generation]:
        """Answer ``questions`` (one generation per question and sample); ``kwargs`` go to the
        engine (e.g. ``stop_when``)."""

    def close(self) -> None:  # noqa: B027 - deliberately a no-op unless overridden
        """Release what the abstainer holds (an adapted model copy, say)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Technique(ABC, Generic[P]):
    """Base class: subclasses set ``name``, ``nature``, ``access``, ``Params`` and implement
    :meth:`build` (and :meth:`load` when they save artifacts). ``P``, the parameters model
    (``class Steering(Technique[SteeringParams])``), types ``self.params``."""

    name: ClassVar[str]
    nature: ClassVar[Nature]
    access: ClassVar[Access]
    Params: ClassVar[type[Params]] = Params
    #: Whether ``build`` writes an artifact worth caching.
    saves_artifacts: ClassVar[bool] = True
    #: Question splits of the target that ``prepare`` learns from.
    needs: ClassVar[tuple[str, ...]] = ()
    #: What the model's back end must give beyond generation (``activations``: forward hooks;
    #: ``weights``: training on them); see :class:`workbench.backends.Capabilities`.
    requires: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, params: P | None = None, **overrides: Any):
        self.store = ArtifactStore()
        # A ClassVar cannot mention P (the checker refuses type variables there), so ``Params``
        # is typed by the base class; each subclass sets it to its own ``P``.
        params = params if params is not None else cast(P, self.Params())
        cls = type(params)
        known = cls.field_names()
        for key in overrides:
            if key not in known:
                raise ConfigError(
                    f"technique {self.name!r} has no parameter {key!r}; "
                    f"its parameters are: {', '.join(sorted(known)) or 'none'}"
                )
        # every value against its declared type, before any model loads (strength: "high"
        # once failed after two minutes of preparation), named as this technique's
        data = {**dict(params), **overrides}
        try:
            self.params: P = cls.model_validate(data)
        except ValidationError as e:
            label = f"technique {self.name!r}: parameter"
            raise ConfigError(problem_line(e, cls, data, label)) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params!r})"

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "nature": cls.nature,
            "access": cls.access,
            "parameters": cls.Params().to_dict(),
        }

    # -- preparation ------------------------------------------------------------------------------
    def requirements(self, bench: Benchmark, target: str) -> list[str]:
        """The target's question splits this technique needs (``needs`` unless overridden)."""
        return list(self.needs)

    def check_data(self, bench: Benchmark, target: str) -> None:
        """Fail with one line naming the concept and split when the benchmark lacks questions
        ``prepare`` would learn from: called before any model loads."""
        concept = bench.concept(target)
        qs = bench.questions.sets.get(target)
        for split in self.requirements(bench, target):
            if qs is None or not qs.split(split):
                raise ConfigError(
                    f"technique {self.name!r} needs {split} questions about {target!r} "
                    f"({concept.name}) and the benchmark has none; import a release with its "
                    "training questions (python -m workbench taxonomy import-select) or write them "
                    "with a question generator (workbench.taxonomy.build_question_bank)"
                )

    def data(self, bench: Benchmark, target: str, seed: int = 0) -> TargetData:
        """The training material (overridable for techniques that need other proportions)."""
        return target_data(bench, target, seed=seed)

    def meta(self, lm: Backend, data: TargetData, seed: int) -> dict[str, Any]:
        return {
            "technique": self.name,
            "version": ARTIFACT_VERSION,
            "model_id": lm.model_id,
            "revision": lm.revision,
            "target": data.target,
            "params": self.params.to_dict(),
            "data": data.fingerprint(),
            "seed": seed,
        }

    def prepare(
        self,
        lm: Backend,
        bench: Benchmark,
        target: str,
        *,
        seed: int = 0,
        store: ArtifactStore | None = None,
        artifact: str | Path | None = None,
        progress: bool = False,
    ) -> Abstainer:
        """Build (or reload) what the technique needs and return the abstainer.

        Args:
            lm: the loaded model.
            bench: the benchmark (taxonomies and questions).
            target: the target concept id (atomic or composition).
            seed: seeds data sampling and training.
            store: where artifacts are cached (default: the workbench cache).
            artifact: load this artifact directory instead; it must match exactly.
        """
        self.check_data(bench, target)  # a bad id or missing questions, before any work
        self.store = store or ArtifactStore()
        data = self.data(bench, target, seed=seed)
        meta = self.meta(lm, data, seed)
        if artifact is not None:
            check_meta(artifact, meta)
            return self.load(lm, bench, data, Path(artifact))
        if not self.saves_artifacts:
            abstainer = self.build(lm, bench, data, None, seed=seed, progress=progress)
            assert abstainer is not None  # without artifacts, build returns the abstainer
            return abstainer
        found = self.store.lookup(meta)
        if found is not None:
            return self.load(lm, bench, data, found)
        with self.store.create(meta) as directory:
            self.build(lm, bench, data, directory, seed=seed, progress=progress)
        return self.load(lm, bench, data, self.store.path_for(meta))

    @abstractmethod
    def build(
        self,
        lm: Backend,
        bench: Benchmark,
        data: TargetData,
        directory: Path | None,
        *,
        seed: int,
        progress: bool,
    ) -> Abstainer | None:
        """Compute the artifact into ``directory`` (or, without artifacts, return the abstainer)."""

    def load(self, lm: Backend, bench: Benchmark, data: TargetData, directory: Path) -> Abstainer:
        raise NotImplementedError(f"{self.name} saves no artifacts")


#: Technique name -> its class (a new technique: one module with a class and ``@register``).
TECHNIQUES: Registry[type[Technique]] = Registry("technique")

T = TypeVar("T", bound=type[Technique])


def register(cls: T) -> T:
    """Class decorator adding a technique to the registry under ``cls.name``."""
    TECHNIQUES.register(cls.name, cls)
    return cls


def get_technique(name: str, **params: Any) -> Technique:
    """A technique by registered name, with parameter overrides."""
    return TECHNIQUES[name](**params)
