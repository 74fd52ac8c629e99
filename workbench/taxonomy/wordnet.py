"""A small reader of the WordNet 3.0 noun database (``data.noun``), and a knowledge-graph view.

Why our own: nltk's reader insists on a ``lexnames`` file that Debian's ``wordnet-base`` lacks, and
we need only nouns, their lemmas, glosses and four pointer types (hypernym ``@``, instance
hypernym ``@i``, hyponym ``~``, instance hyponym ``~i``). The format is documented in WordNet's
``wndb(5)``: one synset per line, fields separated by spaces, the gloss after ``|``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError

#: Where Debian's ``wordnet-base`` puts the database; ``$WORDNET_DIR`` overrides it.
DEFAULT_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/share/wordnet-3.0/dict")

LICENSE_NOTICE = (
    "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. Permission to use, "
    "copy, modify and distribute this software and database and its documentation for any purpose "
    "and without fee or royalty is hereby granted, provided that you agree to comply with the "
    "copyright notice and statements, including the disclaimer, of the WordNet 3.0 license "
    "(https://wordnet.princeton.edu/license-and-commercial-use). THIS SOFTWARE AND DATABASE IS "
    'PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES.'
)


@dataclass
class Synset:
    """One noun synset: its offset id, lemmas, gloss and IS-A neighbours."""

    offset: str
    lemmas: list[str]
    gloss: str
    hypernyms: list[str] = field(default_factory=list)
    instance_hypernyms: list[str] = field(default_factory=list)
    hyponyms: list[str] = field(default_factory=list)
    instance_hyponyms: list[str] = field(default_factory=list)
    part_holonyms: list[str] = field(default_factory=list)
    lex_filenum: str = "00"
    lex_ids: list[str] = field(default_factory=list)

    def sense_keys(self) -> list[str]:
        """WordNet sense keys of the lemmas (``river%1:17:00::``), as ``cntlist.rev`` uses."""
        return [
            f"{lemma.lower()}%1:{self.lex_filenum}:{int(lex, 16):02d}::"
            for lemma, lex in zip(self.lemmas, self.lex_ids)
        ]

    @property
    def name(self) -> str:
        return self.lemmas[0].replace("_", " ")

    @property
    def id(self) -> str:
        return f"wn:{self.offset}-n"


def find_wordnet_dir(directory: str | os.PathLike | None = None) -> Path:
    """The directory holding ``data.noun``: the argument, ``$WORDNET_DIR``, or Debian's path."""
    candidates = [directory] if directory else [os.environ.get("WORDNET_DIR"), *DEFAULT_DIRS]
    for c in candidates:
        if c and (Path(c) / "data.noun").is_file():
            return Path(c)
    raise WorkbenchError(
        "WordNet 3.0 database not found (data.noun); install Debian's package 'wordnet-base' "
        "(apt-get install wordnet-base) or set WORDNET_DIR to a directory holding data.noun"
    )


def parse_data_line(line: str) -> Synset | None:
    """Parse one line of ``data.noun``; licence header lines (starting with spaces) give None."""
    if not line or line[0] == " ":
        return None
    body, _, gloss = line.partition(" | ")
    f = body.split()
    offset, w_cnt = f[0], int(f[3], 16)
    lemmas = [f[4 + 2 * i] for i in range(w_cnt)]
    lex_ids = [f[5 + 2 * i] for i in range(w_cnt)]
    i = 4 + 2 * w_cnt
    p_cnt = int(f[i])
    s = Synset(offset=offset, lemmas=lemmas, gloss=gloss.strip(), lex_filenum=f[1], lex_ids=lex_ids)
    for j in range(p_cnt):
        sym, target, pos = f[i + 1 + 4 * j], f[i + 2 + 4 * j], f[i + 3 + 4 * j]
        if pos != "n":
            continue
        if sym == "@":
            s.hypernyms.append(target)
        elif sym == "@i":
            s.instance_hypernyms.append(target)
        elif sym == "~":
            s.hyponyms.append(target)
        elif sym == "~i":
            s.instance_hyponyms.append(target)
        elif sym == "#p":
            s.part_holonyms.append(target)
    return s


class WordNet:
    """The noun synsets of a WordNet database, by offset and by lemma."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = find_wordnet_dir(directory)
        self.synsets: dict[str, Synset] = {}
        path = self.directory / "data.noun"
        line = ""
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    s = parse_data_line(line)
                except (IndexError, ValueError):
                    raise WorkbenchError(
                        f"{path}, line {n}: not a WordNet data line ({line[:40].strip()!r}): a "
                        "cut-off download, a Git LFS pointer or another file?"
                    ) from None
                if s is not None:
                    self.synsets[s.offset] = s
        if line and not line.endswith("\n"):  # every line of the database ends in a newline
            raise WorkbenchError(f"{path} ends mid-line: a cut-off download?")
        _check_whole(path, self.synsets)
        self.tag_counts = _read_counts(self.directory / "cntlist.rev")
        self._by_lemma: dict[str, list[str]] = {}
        for off, s in self.synsets.items():
            for lemma in s.lemmas:
                key = _lemma_key(lemma)
                self._by_lemma.setdefault(key, []).append(off)

    def lookup(self, lemma: str, sense: int = 1) -> Synset:
        """The ``sense``-th synset (1-based, in file order) holding ``lemma``."""
        offs = self._by_lemma.get(_lemma_key(lemma), [])
        if len(offs) < sense:
            raise WorkbenchError(f"WordNet has no noun sense {sense} of {lemma!r}")
        return self.synsets[offs[sense - 1]]

    def familiarity(self, offset: str) -> int:
        """How often the synset's senses were tagged in the SemCor corpus (``cntlist.rev``)."""
        return sum(self.tag_counts.get(k, 0) for k in self.synsets[offset].sense_keys())

    def by_offset(self, offset: str) -> Synset:
        return self.synsets[offset]

    def vocabulary(self) -> set[str]:
        """Every noun lemma, lower-cased, with spaces (for checking made-up names)."""
        return set(self._by_lemma)

    def __len__(self) -> int:
        return len(self.synsets)


def _check_whole(path: Path, synsets: dict[str, Synset]) -> None:
    """Every IS-A pointer lands on a synset of the file: a file cut at a line boundary reads
    cleanly but points at synsets it lacks, which would build a different taxonomy."""
    if not synsets:
        raise WorkbenchError(f"{path} holds no synset: an empty or cut-off download?")
    lost = [
        t
        for s in synsets.values()
        for t in (*s.hypernyms, *s.instance_hypernyms, *s.hyponyms, *s.instance_hyponyms)
        if t not in synsets
    ]
    if lost:
        raise WorkbenchError(
            f"{path} is incomplete: its {len(synsets)} synsets point at {len(set(lost))} it lacks "
            f"(first {lost[0]}): a cut-off download? (WordNet 3.0's holds 82,115)"
        )


def _read_counts(path: Path) -> dict[str, int]:
    """SemCor tag counts by sense key. Required: they choose the familiar concepts of a taxonomy
    and of UnknownBench's answerable set, which would silently differ without them."""
    counts: dict[str, int] = {}
    if not path.is_file():
        raise WorkbenchError(
            f"no {path.name} beside {path.parent / 'data.noun'}: WordNet 3.0's SemCor tag counts "
            "(in Debian's wordnet-base and Princeton's dict/ folder) choose the familiar concepts; "
            "copy it from the same download"
        )
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.split()
            if len(parts) != 3 or not parts[2].isdigit():
                raise WorkbenchError(
                    f"{path}, line {n}: not a tag count line ({line[:40].strip()!r}): a cut-off "
                    "download, a Git LFS pointer or another file?"
                )
            if "%1:" in parts[0]:
                counts[parts[0]] = int(parts[2])
    if not counts:
        raise WorkbenchError(f"{path} holds no noun tag count: an empty or cut-off download?")
    return counts


def _lemma_key(lemma: str) -> str:
    import re

    return re.sub(r"\(.*?\)$", "", lemma).replace("_", " ").lower().strip()


#: Words that keep a synset out of a benign-concept taxonomy (adult, slur or violent senses).
BLOCKED_WORDS = (
    "skin flick",
    "peepshow",
    "pornograph",
    "porn",
    "erotic",
    "stripper",
    "striptease",
    "prostitut",
    "whore",
    "harlot",
    "call girl",
    "slut",
    "bastard",
    "nigger",
    "gook",
    "torture",
    "execution",
    "lynch",
    "suicide",
    "rapist",
    "sex ",
    "sexual",
    "hooker",
    "concubine",
    "mistress",
    "courtesan",
    "brothel",
    "drug addict",
    "junkie",
)


class WordNetGraph:
    """WordNet nouns as a :class:`~workbench.taxonomy.builder.KnowledgeGraph`.

    Subclasses are hyponyms, instances are instance hyponyms (river -> Nile). Hyponyms whose
    names are capitalised or very long are skipped as classes: in WordNet they are mostly
    proper-noun-like groups ("Dominion") that make unnatural question topics.
    """

    source = "wordnet-3.0"

    def __init__(self, wordnet: WordNet | None = None):
        self.wn = wordnet or WordNet()

    @staticmethod
    def node_id(offset: str) -> str:
        return f"wn:{offset}-n"

    def name(self, node: str) -> str:
        """The first lemma; for instances the most telling one ("Hudson River", "Diego Rivera")."""
        s = self.wn.synsets[node]
        lemmas = [_clean(x) for x in s.lemmas]
        if not s.instance_hypernyms:
            return lemmas[0]
        heads = {
            _clean(self.wn.synsets[h].lemmas[0]).split()[-1].lower() for h in s.instance_hypernyms
        }
        for lemma in lemmas:
            if lemma.split()[-1].lower() in heads and lemmas[0] in lemma:
                return lemma
        for lemma in lemmas:
            if len(lemma.split()) >= 2 and lemmas[0] in lemma:
                return lemma
        return lemmas[0]

    def gloss(self, node: str) -> str:
        return self.wn.synsets[node].gloss.split(";")[0].strip()

    def subclasses(self, node: str) -> list[str]:
        out = []
        for h in self.wn.synsets[node].hyponyms:
            n = self.name(h)
            if n[:1].isupper() or len(n.split()) > 3 or any(ch.isdigit() for ch in n):
                continue
            if self.blocked(h):
                continue
            out.append(h)
        return out

    def blocked(self, node: str) -> bool:
        s = self.wn.synsets[node]
        text = (" ".join(s.lemmas).replace("_", " ") + " " + s.gloss).lower()
        return any(w in text for w in BLOCKED_WORDS)

    def instances(self, node: str) -> list[str]:
        return [i for i in self.wn.synsets[node].instance_hyponyms if not self.blocked(i)]

    def familiarity(self, node: str) -> float:
        return float(self.wn.familiarity(node))


def _clean(lemma: str) -> str:
    import re

    return re.sub(r"\(.*?\)$", "", lemma).replace("_", " ").strip()
