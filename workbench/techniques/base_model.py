"""The unmodified model as a technique, so tables compare against it in the same rows."""

from __future__ import annotations

from workbench.generation import GenerationConfig, generate
from workbench.techniques.base import Abstainer, Technique, register


class BaseAbstainer(Abstainer):
    technique = "base"

    def __init__(self, lm, target: str):
        self.lm, self.target = lm, target

    def generate(self, questions, config=None, progress=True, **kwargs):
        return generate(self.lm, list(questions), config or GenerationConfig(), progress=progress,
                        desc="base", **kwargs)


@register
class Base(Technique):
    """No technique: the model as it is."""

    name = "base"
    nature = "inference-time"
    access = "black-box"
    saves_artifacts = False

    def build(self, lm, bench, data, directory, *, seed, progress):
        return BaseAbstainer(lm, data.target)
