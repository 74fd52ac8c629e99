"""Pronounceable made-up names that are not words.

Names are built from syllables (onset + vowel + optional coda) with a per-category flavour
(a medicine ends like a drug, a country like a country), seeded, and rejected when they are a
word of WordNet's vocabulary, a name in the shipped taxonomy, or too close to a real word.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

ONSETS = [
    "b",
    "br",
    "d",
    "dr",
    "f",
    "fl",
    "g",
    "gr",
    "k",
    "kl",
    "l",
    "m",
    "n",
    "p",
    "pl",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "z",
    "sh",
    "ch",
    "th",
]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea", "io"]
CODAS = ["", "", "", "n", "r", "l", "s", "m", "x", "nd", "rt"]

SUFFIXES: dict[str, list[str]] = {
    "animals": ["", "an", "ot", "ix", "el"],
    "foods": ["", "a", "ini", "ette", "o"],
    "countries": ["ia", "stan", "land", "ova", "ania"],
    "medicines": ["ol", "ine", "azole", "pril", "mab", "ex"],
    "sports": ["ball", "", "ing", "ado"],
    "generic": ["", "ium", "or", "ics", "ism"],
    "people": ["", "", "son", "er", "ez"],
}


def _syllable(rng: random.Random) -> str:
    return rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)


def make_name(rng: random.Random, category: str = "generic") -> str:
    """One name; for ``people`` a first and a family name."""
    if category == "people":
        first = "".join(_syllable(rng) for _ in range(2)).capitalize()
        last = (
            "".join(_syllable(rng) for _ in range(2)) + rng.choice(SUFFIXES["people"])
        ).capitalize()
        return f"{first} {last}"
    body = "".join(_syllable(rng) for _ in range(rng.choice((2, 2, 3))))
    name = body + rng.choice(SUFFIXES.get(category, SUFFIXES["generic"]))
    return name.capitalize()


def made_up_names(n: int, category: str, forbidden: Iterable[str], seed: int = 0) -> list[str]:
    """``n`` distinct made-up names for ``category``, none in ``forbidden`` (lower-cased words)."""
    banned = {w.lower() for w in forbidden}
    prefixes = {w[:6] for w in banned if len(w) >= 6}
    rng = random.Random(f"{seed}:{category}")
    out: list[str] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 100 * n + 1000:
            raise RuntimeError(f"could not find {n} unused names for {category}")
        name = make_name(rng, category)
        words = name.lower().split()
        if (
            any(w in banned or w[:6] in prefixes for w in words)
            or name in out
            or not 5 <= len(name) <= 22
        ):
            continue
        out.append(name)
    return out
