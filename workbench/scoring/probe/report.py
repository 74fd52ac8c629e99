"""One run of ``python -m workbench scoring probe``: judge the probe on every model it never
saw, beside the rule detectors, then fit the head on everything and save it (with the record
the docs' table is filled from)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.scoring.probe.features import FeatureSettings, response_features
from workbench.scoring.probe.loso import (
    expected_calibration_error,
    leave_one_model_out,
    loso_table,
    partial_scores,
    reliability,
)
from workbench.scoring.probe.train import labelled_answers, train_probe

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: the rule detectors the probe is judged beside
RULES = ("phrase", "keyword", "unknownbench")


def with_rules(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each rule detector's decision (``refused_<name>``) and the phrase
    detector's partial flag."""
    from workbench.scoring.detectors import DETECTORS
    from workbench.scoring.phrases import detect_refusal

    out = frame.copy()
    qs = [q or None for q in out["question"]]
    decisions = [detect_refusal(r, question=q) for q, r in zip(qs, out["response"])]
    out["refused_phrase"] = [d.refused for d in decisions]
    out["partial_phrase"] = [d.partial for d in decisions]
    for name in RULES[1:]:
        out[f"refused_{name}"] = [bool(DETECTORS[name](r, q)) for q, r in zip(qs, out["response"])]
    return out


def cost_per_thousand(
    texts: list[str], settings: FeatureSettings, lm: Backend, n: int = 64
) -> float:
    """Seconds to score 1,000 answers like ``texts`` from scratch (features of ``n`` of them
    read with no cache; the head's own cost is negligible)."""
    sample = texts[:: max(1, len(texts) // n)][:n]
    t = time.perf_counter()
    response_features(sample, settings, lm=lm, cache=False)
    return (time.perf_counter() - t) / len(sample) * 1000


def judge_and_train(
    *,
    root,
    sources,
    labels,
    shipped: bool,
    cap: int | None,
    c: float,
    out: Path,
    loso: bool,
    command: str,
) -> dict[str, Any]:
    """The whole run, printed; returns the record (``reliability`` the diagram's table)."""
    from workbench.backends import load_model

    settings = FeatureSettings()
    frame = labelled_answers(root, sources, labels, shipped=shipped, cap=cap)
    counts = frame.groupby(["source", "model", "label"]).size().unstack(fill_value=0)
    print(f"{len(frame)} labelled answers\n{counts.to_string()}\n")
    lm = load_model(settings.model, device="cpu")
    feats = response_features(frame["response"], settings, lm=lm, progress=True)
    rec: dict[str, Any] = {
        "settings": {
            "model": settings.model,
            "layers": list(settings.layers),
            "max_tokens": settings.max_tokens,
            "c": c,
            "cap": cap,
        },
        "command": command,
    }
    if loso:
        pred = with_rules(leave_one_model_out(frame, feats, c=c))
        names = ["probe", *RULES]
        # on the test halves: the rules were written against the dev halves (the probe's
        # predictions come from heads that never saw the model, whatever the half)
        table = loso_table(pred[pred["split"] == "test"], names)
        pd.set_option("display.width", 200)
        print("leave one model out: Cohen's kappa per held-out source and model (test halves)")
        print(table.round(3).to_string(index=False))
        probe_p, phrase_p = (
            partial_scores(pred, "partial_probe"),
            partial_scores(pred, "partial_phrase"),
        )
        print(
            f"\npartial refusals: probe precision {probe_p['precision']:.2f} recall "
            f"{probe_p['recall']:.2f}; phrase precision {phrase_p['precision']:.2f} recall "
            f"{phrase_p['recall']:.2f} ({probe_p['tp'] + probe_p['fn']} labelled partial)"
        )
        rel = reliability(pred)
        ece = expected_calibration_error(pred)
        print(f"\nreliability of P(refused) (expected calibration error {ece:.3f}):")
        print(rel.round(3).to_string(index=False))
        rec.update(
            rows=table.replace({np.nan: None}).to_dict("records"),
            partial={"probe": probe_p, "phrase": phrase_p},
            reliability=rel.to_dict("records"),
            ece=ece,
            detectors=names,
        )
    head = train_probe(frame, settings, c=c, features=feats, lm=lm)
    head.save(out)
    per_k = cost_per_thousand(list(frame["response"]), settings, lm)
    print(f"\nhead -> {out} ({len(frame)} answers); {per_k:.0f} s per 1,000 answers on this CPU")
    rec.update(seconds_per_1000=per_k, answers=len(frame))
    rec["counts"] = {f"{s} / {m}": row.to_dict() for (s, m), row in counts.iterrows()}
    return rec
