"""Taxonomy: concepts from a knowledge graph, their compositions, and their question sets."""

from workbench.taxonomy.benchmark import (
    Benchmark,
    build_default_benchmark,
    load_benchmark,
    save_benchmark,
)
from workbench.taxonomy.builder import (
    BuildParams,
    KnowledgeGraph,
    RootSpec,
    build_taxonomy,
)
from workbench.taxonomy.compositions import (
    DEFAULT_TEMPLATES,
    CompositionParams,
    RelationTemplate,
    SlotRule,
    compose,
)
from workbench.taxonomy.model import (
    Concept,
    Taxonomy,
    TaxonomyError,
    UnknownConceptError,
)
from workbench.taxonomy.questions import (
    FewShotExample,
    LLMQuestionGenerator,
    QuestionBank,
    QuestionSet,
    ReferenceAnswer,
    RelationProbe,
    TemplateQuestionGenerator,
    build_question_bank,
    relation_probes,
)
from workbench.taxonomy.select_format import (
    import_select,
    load_select_atoms,
    load_select_compositions,
    read_hints,
)

__all__ = [
    "DEFAULT_TEMPLATES",
    "Benchmark",
    "BuildParams",
    "CompositionParams",
    "Concept",
    "FewShotExample",
    "KnowledgeGraph",
    "LLMQuestionGenerator",
    "QuestionBank",
    "QuestionSet",
    "ReferenceAnswer",
    "RelationProbe",
    "RelationTemplate",
    "RootSpec",
    "SlotRule",
    "Taxonomy",
    "TaxonomyError",
    "TemplateQuestionGenerator",
    "UnknownConceptError",
    "build_default_benchmark",
    "build_question_bank",
    "build_taxonomy",
    "compose",
    "import_select",
    "load_benchmark",
    "load_select_atoms",
    "load_select_compositions",
    "read_hints",
    "relation_probes",
    "save_benchmark",
]
