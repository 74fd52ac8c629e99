"""The unmodified model as a technique, so tables compare against it in the same rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from workbench.generation import GenerationConfig, generate
from workbench.select import prompts as select_prompts
from workbench.techniques.base import (
    Abstainer,
    Params,
    Protocol,
    ProtocolParams,
    Technique,
    register,
)

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark


class BaseParams(ProtocolParams):
    """``protocol="select"``: ask each question inside SELECT's plain template ("answer the
    following question"), as SELECT asks its steered and fine-tuned models."""

    protocol: Protocol = ""


class BaseAbstainer(Abstainer):
    technique = "base"

    def __init__(self, lm: Backend, target: str, template: str = select_prompts.QUESTION):
        self.lm, self.target, self.template = lm, target, template

    def generate(self, questions, config=None, progress=True, **kwargs):
        prompts = [
            self.template.replace(select_prompts.QUESTION, q) if isinstance(q, str) else q
            for q in questions
        ]
        return generate(
            self.lm, prompts, config or GenerationConfig(), progress=progress, desc="base", **kwargs
        )


@register
class Base(Technique[Params]):
    """No technique: the model as it is. Typed over any ``Params`` (reading ``protocol`` with
    ``getattr``): subclasses such as :mod:`workbench.testing`'s ``sleepy`` bring their own."""

    name = "base"
    nature = "inference-time"
    access = "black-box"
    Params: ClassVar[type[Params]] = BaseParams
    saves_artifacts = False

    def requirements(self, bench: Benchmark, target: str) -> list[str]:
        if getattr(self.params, "protocol", "") == "select":
            select_prompts.require_protocol(bench, "base with protocol='select'")
        return []

    def build(self, lm: Backend, bench: Benchmark, data, directory, *, seed, progress):
        if getattr(self.params, "protocol", "") == "select":
            protocol = select_prompts.require_protocol(bench, "base with protocol='select'")
            return BaseAbstainer(lm, data.target, select_prompts.plain_prompt(protocol))
        return BaseAbstainer(lm, data.target)
