"""The offline question generator: hand-written templates per root type and concept kind, plus
aspect questions ("the climate of ..." for places), so questions about a river differ from
questions about a novelist."""

from __future__ import annotations

from workbench.errors import WorkbenchError
from workbench.taxonomy.model import Concept, Taxonomy
from workbench.taxonomy.questions.sets import _normalize, seeded_rng
from workbench.taxonomy.text import article

# ---------------------------------------------------------------------------------------------
# Template generator

# {P} plural name, {S} singular, {A} singular with article, {N} an instance's name,
# {PP} the parent's plural name. Aspect questions combine a frame with an aspect of the root type.
CLASS_TEMPLATES: dict[str, list[str]] = {
    "products": [
        "What are the main types of {P}?",
        "How do I choose a good {S}?",
        "How much does {A} usually cost?",
        "Who invented the first {S}?",
        "How are {P} made?",
        "Which brands make the best {P}?",
        "How do I take care of {A}?",
        "Are {P} safe to use?",
        "Can you recommend {A} for a beginner?",
        "What should I look for when buying {A}?",
        "How long does {A} typically last?",
        "What are the pros and cons of {P}?",
        "How have {P} changed over the last hundred years?",
        "Where can I buy {A}?",
        "What are {P} used for?",
        "How do {P} work?",
        "What exactly is {A}?",
        "Tell me a fun fact about {P}.",
        "How is {A} different from other {PP}?",
        "What are some popular {P} right now?",
        "Can I make {A} at home?",
        "Why are some {P} so expensive?",
    ],
    "people": [
        "What does {A} do?",
        "How do I become {A}?",
        "Who are some famous {P}?",
        "What skills does {A} need?",
        "How much do {P} earn?",
        "What is a typical day like for {A}?",
        "What education do {P} usually have?",
        "Who was the first known {S}?",
        "What are the biggest challenges {P} face?",
        "Can you name some {P} from history?",
        "Is being {A} a good career choice?",
        "What tools do {P} use?",
        "How do {P} contribute to society?",
        "What is the difference between {A} and other {PP}?",
        "Which countries have the most {P}?",
        "What books should I read to learn about {P}?",
        "How has the role of {P} changed over time?",
        "What personality traits make a good {S}?",
        "Do {P} work alone or in teams?",
        "What awards can {P} win?",
        "Tell me an interesting story about {A}.",
    ],
    "places": [
        "What are the most famous {P} in the world?",
        "How do {P} form?",
        "Can you recommend some {P} worth visiting?",
        "What wildlife lives near {P}?",
        "Why are {P} important to people?",
        "What is the largest {S} on Earth?",
        "How are {P} different from other {PP}?",
        "What dangers should visitors of {P} know about?",
        "How do {P} change over time?",
        "What plants grow around {P}?",
        "How do scientists study {P}?",
        "What is the best season to visit {A}?",
        "How are {P} protected by law?",
        "What activities can you do at {A}?",
        "Which country has the most {P}?",
        "How do {P} affect the local climate?",
        "What myths and legends are told about {P}?",
        "How do people name {P}?",
        "Are {P} threatened by climate change?",
        "What should I pack for a trip to {A}?",
        "How big can {A} get?",
    ],
    "organizations": [
        "What does {A} do?",
        "How is {A} organized?",
        "How do I start {A}?",
        "What are some well-known {P}?",
        "How are {P} funded?",
        "Who leads {A}?",
        "How can I join {A}?",
        "What laws apply to {P}?",
        "How do {P} make decisions?",
        "What is the history of {P}?",
        "How are {P} different from other {PP}?",
        "What are the biggest {P} in the world?",
        "Why do people form {P}?",
        "How do {P} influence society?",
        "Can {A} operate internationally?",
        "What happens when {A} shuts down?",
        "What jobs are there in {A}?",
        "How do {P} communicate with the public?",
        "What makes {A} successful?",
        "How has technology changed {P}?",
        "Tell me an interesting fact about {P}.",
    ],
    "creative works": [
        "Can you recommend some good {P}?",
        "What are the most famous {P} of all time?",
        "How do I create {A}?",
        "What makes {A} great?",
        "Who are the best-known creators of {P}?",
        "How did {P} first appear?",
        "What are common themes in {P}?",
        "How are {P} different from other {PP}?",
        "Where can I find {P} to enjoy?",
        "How long does it take to make {A}?",
        "What skills do you need to make {A}?",
        "How do critics judge {P}?",
        "Which {P} won the most awards?",
        "How have {P} changed in the last century?",
        "Are {P} still popular today?",
        "What is the structure of a typical {S}?",
        "Can you explain what {A} is?",
        "What are some {P} for beginners?",
        "How do {P} reflect the culture they come from?",
        "Tell me a fun fact about {P}.",
        "What was the first {S} ever made?",
    ],
    "composition": [
        "Can you recommend some {P}?",
        "What are the most famous {P}?",
        "Why are {P} popular?",
        "Where can I find {P}?",
        "What should I know about {P}?",
        "How common are {P}?",
        "What are some examples of {P}?",
        "Who are the best-known people behind {P}?",
        "How have {P} changed over time?",
        "Are {P} worth my time?",
        "What makes {P} interesting?",
        "Tell me about {P}.",
        "What are some lesser-known {P}?",
        "How would I go about finding good {P}?",
        "Which {P} are the most talked about?",
        "Give me a list of {P} with a short description of each.",
        "What do critics say about {P}?",
        "Are there any {P} from recent years?",
        "What is special about {P}?",
        "Why do people seek out {P}?",
    ],
}

INSTANCE_TEMPLATES: dict[str, list[str]] = {
    "people": [
        "Who was {N}?",
        "What is {N} best known for?",
        "When was {N} born?",
        "What were the major achievements of {N}?",
        "Can you give me a short biography of {N}?",
        "What books should I read about {N}?",
        "Where did {N} grow up?",
        "Who influenced {N}?",
        "What is the legacy of {N}?",
        "What was the early life of {N} like?",
        "How did {N} become famous?",
        "What are some famous quotes by {N}?",
        "Why is {N} important in history?",
        "Did {N} ever win any awards?",
        "What was {N} like as a person?",
        "Who were the contemporaries of {N}?",
        "What did {N} do in later life?",
        "Are there any films about {N}?",
    ],
    "places": [
        "Where is {N} located?",
        "What is the history of {N}?",
        "Is {N} worth visiting?",
        "What is the best time of year to visit {N}?",
        "How big is {N}?",
        "What is {N} famous for?",
        "What wildlife can be found around {N}?",
        "How did {N} get its name?",
        "What is the climate like around {N}?",
        "How do I get to {N}?",
        "What activities can tourists do at {N}?",
        "What is the population near {N}?",
        "What role did {N} play in history?",
        "Are there any legends about {N}?",
        "What are the environmental problems facing {N}?",
        "Can you describe the landscape of {N}?",
        "Which famous people are connected with {N}?",
        "Is {N} safe for travellers?",
    ],
    "default": [
        "What is {N}?",
        "What is {N} known for?",
        "What is the history of {N}?",
        "Why is {N} famous?",
        "Who created {N}?",
        "When did {N} first appear?",
        "What is special about {N}?",
        "How did {N} get its name?",
        "What are some criticisms of {N}?",
        "Can you give me an overview of {N}?",
        "What impact has {N} had?",
        "Where can I learn more about {N}?",
        "What are the key facts about {N}?",
        "How is {N} viewed today?",
        "What is the story behind {N}?",
        "Who were the people involved with {N}?",
        "Why should I care about {N}?",
        "How has {N} changed over time?",
    ],
}

ASPECTS: dict[str, list[str]] = {
    "products": [
        "history",
        "design",
        "price",
        "maintenance",
        "safety",
        "environmental impact",
        "main manufacturers",
        "materials",
    ],
    "people": [
        "education",
        "daily work",
        "career path",
        "famous achievements",
        "history",
        "influence on society",
        "income",
        "public image",
    ],
    "places": [
        "geography",
        "history",
        "climate",
        "wildlife",
        "tourism",
        "economy",
        "cultural importance",
        "formation",
    ],
    "organizations": [
        "history",
        "structure",
        "funding",
        "leadership",
        "goals",
        "influence",
        "membership",
        "reputation",
    ],
    "creative works": [
        "history",
        "themes",
        "style",
        "reception",
        "best-known examples",
        "influence",
        "audience",
        "structure",
    ],
    "composition": [
        "history",
        "popularity",
        "themes",
        "best-known examples",
        "audience",
        "cultural impact",
        "origins",
        "reception",
    ],
}

FRAMES = [
    "What should I know about the {aspect} of {X}?",
    "Can you explain the {aspect} of {X} in simple terms?",
    "I'm curious about the {aspect} of {X}. What can you tell me?",
    "Give me a short overview of the {aspect} of {X}.",
    "Where can I learn more about the {aspect} of {X}?",
    "What are some common misconceptions about the {aspect} of {X}?",
    "How would you summarize the {aspect} of {X} for a school project?",
    "Why should anyone care about the {aspect} of {X}?",
]


def root_type(taxonomy: Taxonomy, concept: Concept) -> str:
    """The root type key of ``concept`` ("places", "people", ...) that picks its templates:
    the concept's ``root`` field, else its root concept's name, lower-cased."""
    return (concept.root or taxonomy[taxonomy.root_of(concept.id)].name).lower()


class TemplateQuestionGenerator:
    """Offline question writer: root-type templates plus aspect questions, seeded per concept."""

    name = "templates-v1"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def candidates(self, taxonomy: Taxonomy, concept: Concept) -> list[str]:
        """Every question the templates can write about ``concept`` (no duplicates)."""
        root = "composition" if concept.kind == "composition" else root_type(taxonomy, concept)
        parent = taxonomy[concept.parent] if concept.parent else None
        if concept.kind == "instance":
            templates = INSTANCE_TEMPLATES.get(root, []) + INSTANCE_TEMPLATES["default"]
        else:
            templates = CLASS_TEMPLATES.get(root, CLASS_TEMPLATES["composition"])
        subject = concept.phrase
        fill = {
            "P": concept.phrase,
            "S": concept.singular,
            "A": article(concept.singular),
            "N": concept.name,
            "PP": parent.phrase
            if parent is not None and parent.parent is not None
            else "things of its kind",
        }
        out = [t.format(**fill) for t in templates]
        for aspect in ASPECTS.get(root, ASPECTS["composition"]):
            out.extend(f.format(aspect=aspect, X=subject) for f in FRAMES)
        seen, unique = set(), []
        for q in out:
            q = q[0].upper() + q[1:]
            if _normalize(q) not in seen:
                seen.add(_normalize(q))
                unique.append(q)
        return unique

    def generate(self, taxonomy: Taxonomy, concept: Concept, n: int) -> list[str]:
        pool = self.candidates(taxonomy, concept)
        if len(pool) < n:
            raise WorkbenchError(
                f"templates give only {len(pool)} questions for {concept.id!r}, need {n}"
            )
        return seeded_rng(self.seed, concept.id).sample(pool, n)
