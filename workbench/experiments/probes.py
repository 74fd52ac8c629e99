"""Ask the model whether each descendant IS-A its target (for the generalization-error analysis)."""

from __future__ import annotations

import pandas as pd

from workbench.generation import GenerationConfig, generate
from workbench.scoring.metrics import parse_true_false
from workbench.taxonomy.questions import RelationProbe, isa_statement


def probe_descendants(lm, bench, targets, model_name: str) -> pd.DataFrame:
    """One row per (target, descendant): the model's True/False answer on the IS-A statement."""
    probes, keys = [], []
    for t in targets:
        tax = bench.taxonomy_of(t)
        for d in tax.descendants(t):
            probes.append(RelationProbe(d, t, isa_statement(tax[d], tax[t]), True))
            keys.append((t, d))
    gens = generate(lm, [p.prompt for p in probes], GenerationConfig(max_new_tokens=4), progress=False)
    return pd.DataFrame([{"model": model_name, "target": t, "question_concept": d, "statement": p.statement,
                          "reply": g.text, "known": parse_true_false(g.text)}
                         for (t, d), p, g in zip(keys, probes, gens)])
