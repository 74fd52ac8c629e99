"""Small English helpers for turning concept names into natural questions."""

from __future__ import annotations

import re

_IRREGULAR = {
    "person": "people", "man": "men", "woman": "women", "child": "children", "foot": "feet",
    "tooth": "teeth", "mouse": "mice", "goose": "geese", "ox": "oxen", "fish": "fish",
    "sheep": "sheep", "deer": "deer", "series": "series", "species": "species",
    "aircraft": "aircraft", "spacecraft": "spacecraft", "craft": "craft",
    "cactus": "cacti", "fungus": "fungi", "analysis": "analyses", "thesis": "theses",
    "crisis": "crises", "phenomenon": "phenomena", "criterion": "criteria", "knife": "knives",
    "wife": "wives", "life": "lives", "leaf": "leaves", "loaf": "loaves", "half": "halves",
    "shelf": "shelves", "thief": "thieves", "wolf": "wolves", "calf": "calves",
    "opus": "opera", "genus": "genera", "corpus": "corpora", "bus": "buses", "gas": "gases",
}
#: Mass nouns: their plural is themselves.
_UNCOUNTABLE = {
    "food", "clothing", "furniture", "music", "water", "milk", "coffee", "tea", "butter",
    "cheese", "meat", "beef", "pork", "chocolate", "bread", "rice", "wine", "beer", "juice",
    "apparel", "attire", "equipment", "information", "advice", "news", "software", "hardware",
    "jewelry", "jewellery", "luggage", "baggage", "art", "poetry", "fiction", "nonfiction",
    "literature", "writing", "sculpture", "painting", "drama", "religion", "workwear",
    "sportswear", "footwear", "underwear", "outerwear", "nightwear", "headgear", "produce",
    "seafood", "livestock", "poultry", "pasta", "sugar", "salt", "honey", "cream", "yogurt",
    "yoghurt", "soup", "broth", "ghee", "fatback", "sowbelly", "pastrami", "tisane",
    "espresso", "cocoa", "gold", "silver", "money", "weather", "traffic",
}
_AN_EXCEPTIONS = ("uni", "use", "usu", "eu", "one", "once", "ur")


#: Singular nouns that end like a regular plural (``-s`` after a consonant, ``e``, ``a`` or ``o``).
_SINGULAR_S = {"lens", "news", "summons", "mumps", "measles", "diabetes", "herpes", "rabies",
               "atlas", "alias", "bias", "canvas", "gas", "pancreas", "christmas", "chaos",
               "cosmos", "ethos", "pathos", "kudos", "rhinoceros", "logos", "asbestos", "mythos",
               "thermos", "lotus"}
#: Singular nouns ending in ``-men`` (not plurals of ``-man``).
_SINGULAR_MEN = {"specimen", "abdomen", "regimen", "stamen", "omen", "amen", "semen", "hymen",
                 "acumen", "lumen", "albumen", "bitumen", "cyclamen", "dolmen", "rumen"}
#: Plural forms of the irregular table, for recognising and undoing them.
_IRREGULAR_PLURALS = {v: k for k, v in _IRREGULAR.items() if v != k}


def _head(name: str) -> tuple[str, str, str]:
    """Split a noun phrase into (before, head word, after): the head is the last word, or the
    last word before " of " ("works of art" -> "works")."""
    if " of " in name:
        head, _, tail = name.partition(" of ")
        before, word, _ = _head(head)
        return before, word, f" of {tail}"
    words = name.split(" ")
    return " ".join(words[:-1]) + (" " if len(words) > 1 else ""), words[-1], ""


def looks_plural(name: str) -> bool:
    """Whether the phrase's head noun is already plural ("products", "works of art", "troops").

    English singular nouns rarely end in ``-s`` after a consonant, ``e``, ``a`` or ``o``; those
    that do ("lens", "canvas", "chaos") are listed, and ``-ss``/``-us``/``-is`` words ("glass",
    "bus", "iris") count as singular. Irregular plurals ("people") are known.
    """
    word = _head(name)[1].lower()
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
    if lower in _UNCOUNTABLE or not lower.isalpha() and "-" not in lower:
        plural = last
    elif lower in _IRREGULAR:
        plural = last[0] + _IRREGULAR[lower][1:] if last[0].isupper() else _IRREGULAR[lower]
    elif lower.endswith(("man",)) and lower not in {"german", "roman", "human", "shaman", "talisman"}:
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
    'work of art', 'people' -> 'person'); other phrases are returned unchanged."""
    if not looks_plural(name):
        return name
    before, last, after = _head(name)
    lower = last.lower()
    if lower in _IRREGULAR_PLURALS:
        single = _IRREGULAR_PLURALS[lower]
        single = single[0].upper() + single[1:] if last[0].isupper() else single
    elif lower.endswith("men") and lower not in _SINGULAR_MEN:
        single = last[:-3] + "man"
    elif re.search(r"[^aeiou]ies$", lower):
        single = last[:-3] + "y"
    elif re.search(r"(ss|x|z|ch|sh)es$", lower) or lower[:-2] in _SINGULAR_S \
            or re.search(r"[^s]ises$", lower):
        single = last[:-2]
    else:
        single = last[:-1]
    return before + single + after


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
