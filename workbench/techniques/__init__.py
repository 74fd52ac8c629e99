"""Abstention techniques behind one interface, and their registry.

>>> from workbench.techniques import get_technique
>>> abstainer = get_technique("steering").prepare(lm, bench, "wn:09411430-n")
>>> abstainer.generate(["What is the longest river?"])
"""

from workbench.techniques.artifacts import ArtifactMismatchError, ArtifactStore
from workbench.techniques.base import (
    TECHNIQUES,
    Abstainer,
    Params,
    Technique,
    get_technique,
    register,
)
from workbench.techniques.base_model import Base, BaseAbstainer
from workbench.techniques.data import LabelledQuestion, TargetData, target_data
from workbench.techniques.finetune import SFT, SFTDPO, FineTunedAbstainer, SFTParams
from workbench.techniques.prompting import FewShotCoT, PromptAbstainer, ZeroShot
from workbench.techniques.steering import Steering, SteeringAbstainer, SteeringParams

#: SELECT's five techniques, in the order tables list them.
SELECT_TECHNIQUES = ("zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo")

__all__ = [
    "SELECT_TECHNIQUES",
    "SFT",
    "SFTDPO",
    "TECHNIQUES",
    "Abstainer",
    "ArtifactMismatchError",
    "ArtifactStore",
    "Base",
    "BaseAbstainer",
    "FewShotCoT",
    "FineTunedAbstainer",
    "LabelledQuestion",
    "Params",
    "PromptAbstainer",
    "SFTParams",
    "Steering",
    "SteeringAbstainer",
    "SteeringParams",
    "TargetData",
    "Technique",
    "ZeroShot",
    "get_technique",
    "register",
    "target_data",
]
