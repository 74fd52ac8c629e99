"""One run of ``python -m workbench scoring probe``: judge the probe on every model it never
saw, beside the rule detectors, then fit the head on everything and save it (with the record
the docs' table is filled from)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.scoring.probe.combined import combine, combined_partial
from workbench.scoring.probe.features import FeatureSettings, response_features
from workbench.scoring.probe.head import ProbeHead, check_training
from workbench.scoring.probe.loso import (
    check_holdouts,
    choose_overrule,
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
    frame: pd.DataFrame, settings: FeatureSettings, lm: Backend, n: int = 64
) -> float:
    """Seconds to score 1,000 answers like ``frame``'s (responses with their questions) from
    scratch (features of ``n`` of them read with no cache; the head's own cost is
    negligible)."""
    sample = frame.iloc[:: max(1, len(frame) // n)].head(n)
    t = time.perf_counter()
    response_features(
        list(sample["response"]), settings, questions=list(sample["question"]), lm=lm, cache=False
    )
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
    check_training(frame["label"], c)  # before the model loads
    if loso:
        check_holdouts(frame)
    counts = frame.groupby(["source", "model", "label"]).size().unstack(fill_value=0)
    print(f"{len(frame)} labelled answers\n{counts.to_string()}\n")
    lm = load_model(settings.model, device="cpu")
    feats = response_features(
        frame["response"], settings, questions=frame["question"], lm=lm, progress=True
    )
    rec: dict[str, Any] = {
        "settings": {
            "model": settings.model,
            "layers": list(settings.layers),
            "max_tokens": settings.max_tokens,
            "context": settings.context,
            "c": c,
            "cap": cap,
        },
        "command": command,
    }
    if loso:
        pred = with_rules(leave_one_model_out(frame, feats, c=c))
        # the combination's one setting, chosen on the dev halves (the rules' own half)
        dev_half = pred[pred["split"] == "dev"]
        if dev_half.empty:
            overrule = ProbeHead.overrule
            print(f"no development half: combined keeps the overrule {overrule}")
        else:
            overrule = choose_overrule(dev_half)
        pred["refused_combined"] = combine(pred["refused_phrase"], pred["p_refused"], overrule)
        pred["partial_combined"] = combined_partial(
            pred["refused_combined"], pred["partial_phrase"], pred["partial_probe"]
        )
        names = ["combined", "probe", *RULES]
        # on the test halves: the rules were written against the dev halves (the probe's
        # predictions come from heads that never saw the model, whatever the half)
        table = loso_table(pred[pred["split"] == "test"], names)
        # the half the probe's settings were chosen on (its layers and reading)
        dev = loso_table(pred[pred["split"] == "dev"], ["probe", "combined"]).iloc[-1]
        pd.set_option("display.width", 200)
        print("leave one model out: Cohen's kappa per held-out source and model (test halves)")
        print(table.round(3).to_string(index=False))
        partial = {n: partial_scores(pred, f"partial_{n}") for n in ("combined", "probe", "phrase")}
        print(
            f"\ncombined: the phrase detector overruled where the probe is {overrule:.3g} sure "
            "(chosen on the dev halves)\npartial refusals: "
            + "; ".join(
                f"{n} precision {v['precision']:.2f} recall {v['recall']:.2f}"
                for n, v in partial.items()
            )
            + f" ({partial['probe']['tp'] + partial['probe']['fn']} labelled partial)"
        )
        rel = reliability(pred)
        ece = expected_calibration_error(pred)
        print(f"\nreliability of P(refused) (expected calibration error {ece:.3f}):")
        print(rel.round(3).to_string(index=False))
        rec.update(
            rows=table.replace({np.nan: None}).to_dict("records"),
            partial=partial,
            overrule=overrule,
            reliability=rel.to_dict("records"),
            ece=ece,
            detectors=names,
            dev_kappa={"probe": float(dev["probe"]), "combined": float(dev["combined"])},
        )
    head = train_probe(frame, settings, c=c, features=feats, lm=lm)
    if loso:
        head.overrule = overrule
    head.save(out)
    per_k = cost_per_thousand(frame, settings, lm)
    print(f"\nhead -> {out} ({len(frame)} answers); {per_k:.0f} s per 1,000 answers on this CPU")
    rec.update(seconds_per_1000=per_k, answers=len(frame))
    rec["counts"] = {f"{s} / {m}": row.to_dict() for (s, m), row in counts.iterrows()}
    return rec
