"""Joining a released record back to the benchmark: its concept key to a workbench target, its
md5 id to the candidate questions of its evaluation type."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


class _Joiner:
    """Candidate questions by (eval type, target), md5-keyed, with their concept and relation."""

    def __init__(self, bench: Benchmark):
        self.bench = bench
        self.cache: dict[tuple[str, str], dict[str, list[tuple[str, str, str]]]] = {}
        self.by_pair: dict[tuple[str | None, str], str] = {
            (c.relation, "#".join(c.constituents)): c.id for c in bench.compositions
        }

    def target(self, partition: str, relation: str | None, key: str) -> tuple[str, bool]:
        """(workbench id, known) of a released concept key."""
        if partition == "compositions":
            cid = self.by_pair.get((relation, key))
            if cid is not None:
                return cid, True
            from workbench.taxonomy.compositions import composition_id

            return composition_id(relation or "", key.split("#")), False
        return key, key in self.bench.atomic

    def candidates(self, eval_type: str, target: str) -> dict[str, list[tuple[str, str, str]]]:
        k = (eval_type, target)
        if k not in self.cache:
            b = self.bench
            tax = b.taxonomy_of(target)
            if eval_type == "abstention":
                concepts = {target: "target"}
            elif eval_type == "generalization":
                concepts = dict.fromkeys(tax.descendants(target), "descendant")
            else:
                concepts = b.near_concepts(target)
            out: dict[str, list[tuple[str, str, str]]] = {}
            for c, rel in concepts.items():
                if c in b.questions:
                    for q in b.questions[c].eval:
                        out.setdefault(_md5(q), []).append((c, q, rel))
            self.cache[k] = out
        return self.cache[k]
