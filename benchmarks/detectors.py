"""Refusal detectors on outside labelled data: per source, per model (family) and overall.

Reads labelled sets where their authors publish them (nothing of theirs ships with the
workbench: download them yourself into one directory, see ``--help`` and docs/refusal.md, section
"Refusal detectors on outside data"), maps each source's labels to compliance / refusal /
partial, splits every source into a development and a test half by a hash of each item (rules
are written against ``dev``; ``test`` only measures), and prints accuracy, precision, recall and
Cohen's kappa (partial refusals counted as refusals) for every registered detector, and the
phrase detector's ``partial`` flag against labelled partial refusals.

    python benchmarks/detectors.py /tmp/labelled_sources [--split test] [--sources xstest,...]
        [--select-per-file 120] [--errors 20] [--csv table.csv] [--partial-table]

``--partial-table`` also prints the ``partial`` flag's precision and recall per source under
several settings (``PARTIAL_SETTINGS``: the looser flag of before, the default that needs strong
evidence, and variations), and the kinds of evidence the default fired on.

The sources, their label mappings and each item's split: :mod:`workbench.scoring.outside`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

from workbench.errors import ConfigError
from workbench.scoring.agreement import scores
from workbench.scoring.detectors import DETECTORS
from workbench.scoring.outside import HUMAN_SOURCES, SOURCES, load_sources
from workbench.scoring.phrases import PARTIAL_EVIDENCE, detect_refusal


def predict(frame: pd.DataFrame, detectors: dict | None = None) -> pd.DataFrame:
    out = frame.copy()
    detectors = detectors or DETECTORS
    for name, fn in detectors.items():
        if name == "phrase":
            continue
        out[name] = [bool(fn(r, q or None)) for q, r in zip(out["question"], out["response"])]
    decisions = [
        detect_refusal(r, question=q or None) for q, r in zip(out["question"], out["response"])
    ]
    out["phrase"] = [d.refused for d in decisions]
    out["phrase_partial"] = [d.partial for d in decisions]
    out["phrase_kind"] = [d.kind for d in decisions]
    out["phrase_evidence"] = [d.evidence for d in decisions]
    return out


def table(pred: pd.DataFrame, by: list[str], detectors: list[str]) -> pd.DataFrame:
    rows = []
    groups = [((), pred)] if not by else pred.groupby(by, sort=True)
    for key, f in groups:
        key = key if isinstance(key, tuple) else (key,)
        for name in detectors:
            s = scores(list(f["refusal"]), list(f[name]))
            rows.append(
                {
                    **dict(zip(by, key)),
                    "detector": name,
                    "n": s["n"],
                    "refusal rate": f["refusal"].mean(),
                    "detector rate": f[name].mean(),
                    **{k: s[k] for k in ("accuracy", "precision", "recall", "kappa", "fp", "fn")},
                }
            )
    return pd.DataFrame(rows)


def partial_scores(pred: pd.DataFrame) -> dict:
    return scores(list(pred["label"] == "partial"), list(pred["phrase_partial"]))


#: Settings of the ``partial`` flag compared by ``--partial-table``: (name, detect_refusal keywords).
#: "content" is the flag as it was before evidence was required (any 60 characters of content
#: besides the refusal and lectures); the default needs strong evidence (see
#: ``workbench.scoring.phrases.evidence._partial_evidence``).
PARTIAL_SETTINGS = (
    ("any content (old flag)", {"partial_evidence": ("content", "advice")}),
    ("default + alternatives offered", {"partial_evidence": PARTIAL_EVIDENCE + ("alternative",)}),
    ("default, answer_share 0.5", {"answer_share": 0.5}),
    ("default (strong evidence)", {}),
    ("default, answer_share 0.1", {"answer_share": 0.1}),
    ("explicit turn only (tail, pivot, before)", {"partial_evidence": ("tail", "pivot", "before")}),
)


def partial_tradeoff(frame: pd.DataFrame, settings=PARTIAL_SETTINGS) -> pd.DataFrame:
    """Precision and recall of the ``partial`` flag against labelled partial refusals, per source
    that has them, for each setting (the refusal decision itself does not change)."""
    rows = []
    for name, kw in settings:
        flags = [
            detect_refusal(r, question=q or None, **kw).partial
            for q, r in zip(frame["question"], frame["response"])
        ]
        f = frame.assign(flag=flags)
        for src, g in f.groupby("source"):
            if not (g["label"] == "partial").any():
                continue
            s = scores(list(g["label"] == "partial"), list(g["flag"]))
            rows.append(
                {
                    "setting": name,
                    "source": src,
                    "precision": s["precision"],
                    "recall": s["recall"],
                    "fired": s["tp"] + s["fp"],
                    "partial": s["tp"] + s["fn"],
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "root", help="directory holding the downloaded sources (see the module docstring)"
    )
    ap.add_argument("--split", choices=("dev", "test", "all"), default="test")
    ap.add_argument(
        "--sources", default=",".join(SOURCES), help="comma-separated; each must be downloaded"
    )
    ap.add_argument(
        "--select-per-file",
        type=int,
        default=120,
        help="answers drawn from each SELECT results file (by a hash of their id)",
    )
    ap.add_argument(
        "--errors", type=int, default=0, help="print this many misclassified items per source"
    )
    ap.add_argument("--csv", default=None, help="write the per source x model table here")
    ap.add_argument(
        "--partial-table",
        action="store_true",
        help="also compare settings of the partial flag (precision / recall per source)",
    )
    args = ap.parse_args(argv)
    if args.select_per_file < 1:
        raise ConfigError(f"--select-per-file {args.select_per_file}: draw at least 1 answer")

    root = Path(args.root)
    wanted = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    frame = load_sources(root, wanted, args.select_per_file)
    if frame.empty:
        print(
            f"no labelled source found under {root} (looked for {', '.join(wanted)})",
            file=sys.stderr,
        )
        return 2
    if args.split != "all":
        frame = frame[frame["split"] == args.split]
    detectors = dict(DETECTORS)
    if "select" in wanted:
        try:  # SELECT's own four rules, when the SELECT clone carries its protocol
            from types import SimpleNamespace

            from workbench.scoring.detectors import detectors_for
            from workbench.taxonomy.select_format.protocol import read_protocol

            sel = next(
                (root / n for n in ("SELECT", "select") if (root / n / "templates").is_dir()), None
            )
            if sel is not None:
                detectors = detectors_for(SimpleNamespace(select_protocol=read_protocol(sel)))
        except Exception as e:
            print(f"(SELECT's rules not added: {e})", file=sys.stderr)
    pred = predict(frame, detectors)
    names = ["phrase", *[n for n in detectors if n != "phrase"]]
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    pd.set_option("display.max_columns", 30)
    fmt = {"float_format": lambda x: f"{x:.3f}"}

    print(f"split={args.split}: {len(pred)} answers")
    print(pred.groupby(["source", "label"]).size().unstack(fill_value=0).to_string(), "\n")
    human = pred[pred["source"].isin(HUMAN_SOURCES)]
    if not human.empty:
        print("== human refusal labels (XSTest v2 + v1), overall ==")
        print(table(human, [], names).to_string(index=False, **fmt), "\n")
    print("== per source ==")
    print(table(pred, ["source"], names).to_string(index=False, **fmt), "\n")
    print("== per source and model (kappa) ==")
    per_model = table(pred, ["source", "model"], names)
    print(
        per_model.pivot_table(
            index=["source", "model"], columns="detector", values="kappa", sort=False
        )[names].to_string(**fmt),
        "\n",
    )
    print("== per family, human refusal labels (XSTest v2 + v1; kappa) ==")
    if not human.empty:
        fam = table(human, ["family"], names)
        print(
            fam.pivot_table(index="family", columns="detector", values="kappa")[names].to_string(
                **fmt
            )
        )
    sel = pred[pred["source"] == "select"]
    if not sel.empty:
        print("\n== per family, SELECT (reference: SELECT's stored heuristic flag; kappa) ==")
        fam = table(sel, ["family"], names)
        print(
            fam.pivot_table(index="family", columns="detector", values="kappa")[names].to_string(
                **fmt
            )
        )
        print("\n== SELECT per technique (phrase kappa) ==")
        print(table(sel, ["technique"], ["phrase"]).to_string(index=False, **fmt))
    print("\n== phrase 'partial' flag against labelled partial refusals (95% Wilson interval) ==")
    human = pred[pred["source"].isin(HUMAN_SOURCES)]
    for src, f in [*pred.groupby("source"), ("human sources pooled", human)]:
        if (f["label"] == "partial").any():
            p = partial_scores(f)
            fired = p["tp"] + p["fp"]
            lo, hi = (
                binomtest(p["tp"], fired).proportion_ci(method="wilson")
                if fired
                else (float("nan"),) * 2
            )
            print(
                f"{src}: precision {p['precision']:.2f} [{lo:.2f}, {hi:.2f}], recall {p['recall']:.2f} "
                f"({p['tp']} of {p['tp'] + p['fn']} labelled partial; flag fired on {fired})"
            )
            ev = (
                f[f["phrase_partial"]]
                .groupby(["phrase_evidence", "label"])
                .size()
                .unstack(fill_value=0)
            )
            print(
                "  "
                + "; ".join(
                    f"{e}: " + ", ".join(f"{n} {lab}" for lab, n in row.items() if n)
                    for e, row in ev.iterrows()
                )
            )
    if args.partial_table:
        labelled = pred[pred["label"].eq("partial").groupby(pred["source"]).transform("any")]
        print("\n== partial flag: precision / recall per setting ==")
        t = partial_tradeoff(labelled)
        t["P / R (fired)"] = [
            f"{p:.2f} / {r:.2f} ({n})" for p, r, n in zip(t["precision"], t["recall"], t["fired"])
        ]
        print(
            t.pivot(index="setting", columns="source", values="P / R (fired)")
            .reindex([n for n, _ in PARTIAL_SETTINGS])
            .to_string()
        )
    if args.errors:
        for src, f in pred.groupby("source"):
            bad = f[f["phrase"] != f["refusal"]]
            print(
                f"\n== {src}: {len(bad)} phrase disagreements (showing {min(args.errors, len(bad))}) =="
            )
            for r in bad.head(args.errors).itertuples():
                print(
                    f"[{r.label} / phrase={'R' if r.phrase else 'C'} {r.phrase_kind}] {r.model} | "
                    f"{r.question[:100]!r}\n    {r.response[:600]!r}"
                )
    if args.csv:
        per_model.to_csv(args.csv, index=False, float_format="%.3f")
    return 0


if __name__ == "__main__":
    from workbench.errors import run_command

    sys.exit(run_command(main))
