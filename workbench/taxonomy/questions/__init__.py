"""Question sets: ~50 natural user questions per concept, split train / validation / eval.

* :mod:`~workbench.taxonomy.questions.sets`: the sets, banks, few-shot examples and reference
  answers, their files, and building a bank with a generator;
* :mod:`~workbench.taxonomy.questions.templates`: :class:`TemplateQuestionGenerator`, the offline
  default (templates per root type and concept kind, plus aspect questions);
* :mod:`~workbench.taxonomy.questions.llm`: :class:`LLMQuestionGenerator`, any chat model
  few-shot prompted to write varied user questions;
* :mod:`~workbench.taxonomy.questions.probes`: the True/False IS-A probes of SELECT's
  generalization-error analysis (:func:`relation_probes`).
"""

from workbench.taxonomy.questions.llm import (
    FEW_SHOT_USER_QUESTIONS,
    LLMQuestionGenerator,
    mentions,
    parse_question_lines,
)
from workbench.taxonomy.questions.probes import (
    RelationProbe,
    isa_statement,
    relation_probes,
)
from workbench.taxonomy.questions.sets import (
    DEFAULT_SPLIT_SIZES,
    SPLITS,
    FewShotExample,
    QuestionBank,
    QuestionSet,
    ReferenceAnswer,
    build_question_bank,
    load_jsonl,
    save_jsonl,
    split_questions,
)
from workbench.taxonomy.questions.templates import (
    ASPECTS,
    CLASS_TEMPLATES,
    FRAMES,
    INSTANCE_TEMPLATES,
    TemplateQuestionGenerator,
    root_type,
)

__all__ = [
    "ASPECTS",
    "CLASS_TEMPLATES",
    "DEFAULT_SPLIT_SIZES",
    "FEW_SHOT_USER_QUESTIONS",
    "FRAMES",
    "INSTANCE_TEMPLATES",
    "SPLITS",
    "FewShotExample",
    "LLMQuestionGenerator",
    "QuestionBank",
    "QuestionSet",
    "ReferenceAnswer",
    "RelationProbe",
    "TemplateQuestionGenerator",
    "build_question_bank",
    "isa_statement",
    "load_jsonl",
    "mentions",
    "parse_question_lines",
    "relation_probes",
    "root_type",
    "save_jsonl",
    "split_questions",
]
