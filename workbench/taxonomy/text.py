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


def pluralize(name: str) -> str:
    """'river' -> 'rivers', 'work of art' -> 'works of art', 'food' -> 'food'."""
    if " of " in name:
        head, _, tail = name.partition(" of ")
        return f"{pluralize(head)} of {tail}"
    words = name.split(" ")
    last = words[-1]
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
    return " ".join(words[:-1] + [plural])


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
