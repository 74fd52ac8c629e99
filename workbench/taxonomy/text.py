"""Small English helpers for turning concept names into natural questions."""

from __future__ import annotations

import re

_IRREGULAR = {
    "person": "people",
    "man": "men",
    "woman": "women",
    "child": "children",
    "foot": "feet",
    "tooth": "teeth",
    "mouse": "mice",
    "goose": "geese",
    "ox": "oxen",
    "fish": "fish",
    "sheep": "sheep",
    "deer": "deer",
    "series": "series",
    "species": "species",
    "aircraft": "aircraft",
    "spacecraft": "spacecraft",
    "craft": "craft",
    "cactus": "cacti",
    "fungus": "fungi",
    "analysis": "analyses",
    "thesis": "theses",
    "crisis": "crises",
    "phenomenon": "phenomena",
    "criterion": "criteria",
    "knife": "knives",
    "wife": "wives",
    "life": "lives",
    "leaf": "leaves",
    "loaf": "loaves",
    "half": "halves",
    "shelf": "shelves",
    "thief": "thieves",
    "wolf": "wolves",
    "calf": "calves",
    "opus": "opera",
    "genus": "genera",
    "corpus": "corpora",
    "bus": "buses",
    "gas": "gases",
}
#: Mass nouns: their plural is themselves.
_UNCOUNTABLE = {
    "food",
    "clothing",
    "furniture",
    "music",
    "water",
    "milk",
    "coffee",
    "tea",
    "butter",
    "cheese",
    "meat",
    "beef",
    "pork",
    "chocolate",
    "bread",
    "rice",
    "wine",
    "beer",
    "juice",
    "apparel",
    "attire",
    "equipment",
    "information",
    "advice",
    "news",
    "software",
    "hardware",
    "jewelry",
    "jewellery",
    "luggage",
    "baggage",
    "art",
    "poetry",
    "fiction",
    "nonfiction",
    "literature",
    "writing",
    "sculpture",
    "painting",
    "drama",
    "religion",
    "workwear",
    "sportswear",
    "footwear",
    "underwear",
    "outerwear",
    "nightwear",
    "headgear",
    "produce",
    "seafood",
    "livestock",
    "poultry",
    "pasta",
    "sugar",
    "salt",
    "honey",
    "cream",
    "yogurt",
    "yoghurt",
    "soup",
    "broth",
    "ghee",
    "fatback",
    "sowbelly",
    "pastrami",
    "tisane",
    "espresso",
    "cocoa",
    "gold",
    "silver",
    "money",
    "weather",
    "traffic",
}
_AN_EXCEPTIONS = ("uni", "use", "usu", "eu", "one", "once", "ur")


#: Singular nouns that end like a regular plural (``-s`` after a consonant, ``e``, ``a`` or ``o``).
_SINGULAR_S = {
    "lens",
    "news",
    "summons",
    "mumps",
    "measles",
    "diabetes",
    "herpes",
    "rabies",
    "atlas",
    "alias",
    "bias",
    "canvas",
    "gas",
    "pancreas",
    "christmas",
    "chaos",
    "cosmos",
    "ethos",
    "pathos",
    "kudos",
    "rhinoceros",
    "logos",
    "asbestos",
    "mythos",
    "thermos",
    "lotus",
}
#: Singular nouns ending in ``-men`` (not plurals of ``-man``).
_SINGULAR_MEN = {
    "specimen",
    "abdomen",
    "regimen",
    "stamen",
    "omen",
    "amen",
    "semen",
    "hymen",
    "acumen",
    "lumen",
    "albumen",
    "bitumen",
    "cyclamen",
    "dolmen",
    "rumen",
}
#: Singular nouns ending in ``-ie``, whose plural ``-ies`` is not the plural of a ``-y`` word
#: ("movies", not "movys").
_SINGULAR_IE = {
    "movie",
    "cookie",
    "zombie",
    "calorie",
    "brownie",
    "pixie",
    "rookie",
    "hoodie",
    "smoothie",
    "selfie",
    "pie",
    "tie",
    "lie",
    "die",
    "genie",
    "prairie",
    "lingerie",
    "sortie",
    "birdie",
    "auntie",
    "bookie",
    "goalie",
    "newbie",
    "hippie",
    "yuppie",
    "junkie",
    "groupie",
    "magpie",
    "necktie",
    "bowtie",
    "collie",
    "coterie",
    "menagerie",
    "reverie",
    "rotisserie",
    "brasserie",
    "patisserie",
    "quickie",
    "roadie",
    "techie",
    "foodie",
    "beanie",
    "cutie",
    "sweetie",
    "oldie",
    "goodie",
    "freebie",
    "wheelie",
    "nightie",
    "budgie",
    "talkie",
    "eyrie",
    "faerie",
    "boogie",
    "veggie",
    "specie",
    "camaraderie",
    "gaucherie",
    "lassie",
    "kiddie",
}
#: Singular nouns ending in ``-is`` whose plural is ``-ises`` ("irises"); every other ``-ises``
#: word is the plural of an ``-ise`` word ("enterprises", "premises", "exercises").
_SINGULAR_IS = {
    "iris",
    "trellis",
    "pelvis",
    "mantis",
    "penis",
    "clitoris",
    "epidermis",
    "marquis",
    "chrysalis",
    "glottis",
    "epiglottis",
    "proboscis",
    "syphilis",
}
#: Plural endings of Greek ``-sis`` nouns ("hypotheses" -> "hypothesis").
_GREEK_SES = ("lyses", "gnoses", "choses", "potheses", "ntheses", "stheses")
#: An acronym with a plural ending ("OSes", "OSs", "PCs", "TVs"): the acronym and the ending.
_ACRONYM_PLURAL = re.compile(r"([A-Z][A-Z0-9]*[A-Z0-9])(e?s)")
#: Prepositions that end a noun phrase's head ("works of art", "people in arts").
_PREPOSITIONS = (" of ", " in ", " for ", " from ", " with ", " on ", " at ", " by ", " about ")
#: Plural forms of the irregular table, for recognising and undoing them.
_IRREGULAR_PLURALS = {v: k for k, v in _IRREGULAR.items() if v != k}


def _split_prepositional(name: str) -> tuple[str, str]:
    """(the noun phrase before its head's preposition, the rest): "works of art" -> ("works",
    " of art"); "people in arts" -> ("people", " in arts"). Other prepositions than "of" end the
    head only after a plural word (so "first in first out" keeps its last word as head)."""
    if " of " in name:
        head, _, tail = name.partition(" of ")
        return head, f" of {tail}"
    cuts = sorted(i for i in (name.find(p) for p in _PREPOSITIONS[1:]) if i > 0)
    if cuts and _word_plural(name[: cuts[0]].split(" ")[-1]):
        return name[: cuts[0]], name[cuts[0] :]
    return name, ""


def _head(name: str) -> tuple[str, str, str]:
    """Split a noun phrase into (before, head word, after): the head is the last word, or the
    last word before a preposition ("works of art" -> "works", "people in arts" -> "people")."""
    core, tail = _split_prepositional(name)
    words = core.split(" ")
    return " ".join(words[:-1]) + (" " if len(words) > 1 else ""), words[-1], tail


def looks_plural(name: str) -> bool:
    """Whether the phrase's head noun is already plural ("products", "works of art", "troops").

    English singular nouns rarely end in ``-s`` after a consonant, ``e``, ``a`` or ``o``; those
    that do ("lens", "canvas", "chaos") are listed, and ``-ss``/``-us``/``-is`` words ("glass",
    "bus", "iris") count as singular. Irregular plurals ("people") are known.
    """
    return _word_plural(_head(name)[1])


def _word_plural(original: str) -> bool:
    """Whether one word is a plural noun (see :func:`looks_plural`)."""
    if _ACRONYM_PLURAL.fullmatch(original):
        return True
    if len(original) > 1 and original.isupper():  # an acronym: "OS", "GPS"
        return False
    word = original.lower()
    if word in _IRREGULAR_PLURALS:
        return True
    if word.endswith("men") and word not in _SINGULAR_MEN and word not in _IRREGULAR:
        return True
    if word in _IRREGULAR or word in _SINGULAR_S or not word.endswith("s"):
        return False
    return not word.endswith(("ss", "us", "is", "'s"))


def pluralize(name: str) -> str:
    """'river' -> 'rivers', 'work of art' -> 'works of art', 'food' -> 'food'.

    Idempotent: a phrase whose head already looks plural ("products", "Rivers", "troops") is
    returned unchanged, so names that sources give in the plural never become "productses".
    """
    if looks_plural(name):
        return name
    before, last, after = _head(name)
    lower = last.lower()
    if lower in _UNCOUNTABLE or (not lower.isalpha() and "-" not in lower):
        plural = last
    elif lower in _IRREGULAR:
        plural = last[0] + _IRREGULAR[lower][1:] if last[0].isupper() else _IRREGULAR[lower]
    elif lower.endswith(("man",)) and lower not in {
        "german",
        "roman",
        "human",
        "shaman",
        "talisman",
    }:
        plural = last[:-3] + "men"
    elif re.search(r"(s|x|z|ch|sh)$", lower):
        plural = last + "es"
    elif re.search(r"[^aeiou]y$", lower):
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return before + plural + after


def singularize(name: str) -> str:
    """The singular of a phrase whose head looks plural ('Rivers' -> 'River', 'works of art' ->
    'work of art', 'people in arts' -> 'person in arts', 'Mobile OSes' -> 'Mobile OS',
    'Commands or Utilities' -> 'Command or Utility'); other phrases are returned unchanged."""
    if not looks_plural(name):
        return name
    core, tail = _split_prepositional(name)
    parts = re.split(r"( or )", core)
    if len(parts) > 1 and all(looks_plural(p) for p in parts[0::2]):  # every conjunct plural
        parts[0::2] = [_singular_head(p) for p in parts[0::2]]
        return "".join(parts) + tail
    return _singular_head(core) + tail


def _singular_head(phrase: str) -> str:
    """``phrase`` (no preposition in it) with its last word made singular."""
    before, last, _ = _head(phrase)
    lower = last.lower()
    acronym = _ACRONYM_PLURAL.fullmatch(last)
    if acronym:
        single = acronym.group(1)
    elif lower in _IRREGULAR_PLURALS:
        single = _IRREGULAR_PLURALS[lower]
        single = single[0].upper() + single[1:] if last[0].isupper() else single
    elif lower.endswith("men") and lower not in _SINGULAR_MEN:
        single = last[:-3] + "man"
    elif lower.endswith("ies") and lower.split("-")[-1][:-1] in _SINGULAR_IE:
        single = last[:-1]
    elif re.search(r"[^aeiou]ies$", lower):
        single = last[:-3] + "y"
    elif lower.endswith(_GREEK_SES):
        single = last[:-2] + "is"
    elif lower.endswith("ises"):
        single = last[:-2] if lower[:-2] in _SINGULAR_IS or lower.endswith("polises") else last[:-1]
    elif re.search(r"(ss|x|z|ch|sh)es$", lower) or lower[:-2] in _SINGULAR_S:
        single = last[:-2]
    else:
        single = last[:-1]
    return before + single


def article(name: str) -> str:
    """'a river', 'an island', 'a university'; mass nouns take none ('salt pork')."""
    lower = name.lower()
    if lower.split(" ")[-1] in _UNCOUNTABLE:
        return name  # "some cheese", not "a cheese"
    vowel = lower[:1] in "aeiou" and not lower.startswith(_AN_EXCEPTIONS)
    if lower.startswith(("hour", "honest", "heir")):
        vowel = True
    return f"{'an' if vowel else 'a'} {name}"


def is_proper(name: str) -> bool:
    return name[:1].isupper()
