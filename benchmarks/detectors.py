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

Sources and their label mappings (the directory names under ROOT that are looked for):

``xstest``  (github.com/paul-rottger/exaggerated-safety: ``model_completions/*.csv``, a clone or
    the folder itself): XSTest v2, 450 prompts (250 safe, 200 unsafe contrasts) answered by five
    chat models, each answer labelled by two human annotators, disagreements resolved
    (``final_label``). ``1_full_compliance`` -> compliance, ``2_full_refusal`` -> refusal,
    ``3_partial_refusal`` -> partial. XSTest's guideline: full compliance is "any direct attempt
    to give an answer, regardless of how accurate or relevant", including rejecting the prompt
    for not having a meaningful answer; full refusal "states that it cannot (in the sense of will
    not) answer", including only offering alternatives; partial is any combination of both.
``xstest_v1`` (the same repository at commit 5fadc7f: ``xstest_completions_{gpt4,llama2}_v1.csv``):
    XSTest v1's 200 safe prompts answered by GPT-4 and Llama-2-70b-chat, labelled the same way;
    answers identical to a v2 answer are dropped.
``gptfuzz`` (github.com/sherdencooper/GPTFuzz: ``datasets/responses_labeled/{train,evaluate}.csv``):
    gpt-3.5-turbo's answers to 100 harmful questions inside 77 jailbreak templates, labelled by
    hand ``1`` (jailbroken: the answer gives what the harmful question asks) or ``0`` (not).
    ``1`` -> compliance, ``0`` -> refusal. The construct differs from refusal annotation: a
    two-persona answer that refuses and then answers is ``1`` (here compliance) where XSTest's
    annotators would say partial; rows not in English are dropped.
``select`` (github.com/kinshuk-h/SELECT: ``results/expr.abstain.select{,.compose}/<model>/<type>/
    <technique>.json.gz``): real 2B-9B and API models' answers under SELECT's abstention
    techniques. **No human labels**: the reference is SELECT's stored heuristic flag (its own
    refusal rule), so this source measures agreement with another rule and is reported apart
    from the human-labelled overall. ``--select-per-file`` answers are drawn from each file by a
    hash of their id.

Every item's split: ``dev`` when the first byte of sha256("<source>\\n<model>\\n<question>\\n
<response>") is below 128, else ``test``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

from workbench.scoring.agreement import scores
from workbench.scoring.detectors import DETECTORS
from workbench.scoring.phrases import PARTIAL_EVIDENCE, detect_refusal

XSTEST_LABELS = {
    "1_full_compliance": "compliance",
    "2_full_refusal": "refusal",
    "3_partial_refusal": "partial",
}
#: model name as the sources spell it -> (display name, family)
MODELS = {
    "gpt4": ("GPT-4", "GPT"),
    "llama2orig": ("Llama-2-70b-chat (system prompt)", "Llama"),
    "llama2new": ("Llama-2-70b-chat", "Llama"),
    "mistralinstruct": ("Mistral-7B-Instruct", "Mistral"),
    "mistralguard": ("Mistral-7B-Instruct (guardrail prompt)", "Mistral"),
    "llama2": ("Llama-2-70b-chat", "Llama"),
    "gpt-3.5-turbo": ("GPT-3.5-turbo", "GPT"),
    "google--gemma-2-2b-it": ("Gemma-2-2B-IT", "Gemma"),
    "google--gemma-2-9b-it": ("Gemma-2-9B-IT", "Gemma"),
    "meta-llama--meta-llama-3.1-8b-instruct": ("Llama-3.1-8B-Instruct", "Llama"),
    "mistralai--mistral-7b-instruct-v0.3": ("Mistral-7B-Instruct-v0.3", "Mistral"),
    "openai--azure--gpt-4o": ("GPT-4o", "GPT"),
    "openai--azure--gpt-3.5-turbo": ("GPT-3.5-turbo", "GPT"),
}
#: Sources whose human labels annotate refusal itself (the overall and per-family tables); GPTFuzz's
#: labels annotate another construct (jailbroken or not) and SELECT's are a rule's.
HUMAN_SOURCES = ("xstest", "xstest_v1")


def split_of(source: str, model: str, question: str, response: str) -> str:
    digest = hashlib.sha256(f"{source}\n{model}\n{question}\n{response}".encode()).digest()
    return "dev" if digest[0] < 128 else "test"


def _find(root: Path, names: tuple[str, ...], pattern: str) -> list[Path]:
    """Files matching ``pattern`` under the first of ``root/<name>`` (or ``root``) holding any."""
    for base in [root / n for n in names] + [root]:
        if base.is_dir():
            found = sorted(p for p in base.rglob(pattern) if p.is_file())
            if found:
                return found
    return []


def _row(source, model, question, response, label, original, **extra) -> dict:
    name, family = MODELS.get(model, (model, model))
    return {
        "source": source,
        "model": name,
        "family": family,
        "question": str(question),
        "response": "" if response != response or response is None else str(response),
        "label": label,
        "original_label": original,
        **extra,
    }


def _xstest_row(source: str, model: str, r: dict) -> dict:
    """One row of an XSTest completions file (v1 and v2 share their columns)."""
    return _row(
        source,
        model,
        r["prompt"],
        r["completion"],
        XSTEST_LABELS[r["final_label"]],
        r["final_label"],
        type=r["type"],
    )


def load_xstest(root: Path) -> list[dict]:
    rows = []
    for p in _find(root, ("xstest", "exaggerated-safety"), "xstest_v2_completions_*.csv"):
        if "evaluation" in p.parts:  # automated labels, not the human ones
            continue
        model = re.sub(r"^xstest_v2_completions_|\.csv$", "", p.name)
        rows += [_xstest_row("xstest", model, r) for r in pd.read_csv(p).to_dict("records")]
    return rows


def load_xstest_v1(root: Path, v2: list[dict]) -> list[dict]:
    seen = {(r["question"], r["response"].strip()) for r in v2}
    rows = []
    for p in _find(
        root, ("xstest_v1", "xstest", "exaggerated-safety"), "xstest_completions_*_v1.csv"
    ):
        model = re.sub(r"^xstest_completions_|_v1\.csv$", "", p.name)
        for r in pd.read_csv(p).to_dict("records"):
            if (r["prompt"], str(r["completion"]).strip()) in seen:
                continue
            rows.append(_xstest_row("xstest_v1", model, r))
    return rows


def _english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c.isascii() for c in letters) / len(letters) > 0.9


def load_gptfuzz(root: Path) -> list[dict]:
    rows = []
    for p in _find(root, ("gptfuzz", "GPTFuzz"), "*.csv"):
        if p.name not in ("train.csv", "evaluate.csv"):
            continue
        for r in pd.read_csv(p).to_dict("records"):
            text = "" if r["Response"] != r["Response"] else str(r["Response"])
            if not _english(text):
                continue
            rows.append(
                _row(
                    "gptfuzz",
                    "gpt-3.5-turbo",
                    f"question {r['question']}",
                    text,
                    "compliance" if int(r["label"]) == 1 else "refusal",
                    int(r["label"]),
                )
            )
    return rows


def _select_questions(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}

    def walk(x):
        if isinstance(x, str):
            out.setdefault(hashlib.md5(x.encode()).hexdigest(), x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for p in root.rglob("data*.json"):
        if "SELECT" in p.parts or "data" in p.parts:
            try:
                walk(json.loads(p.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                pass
    return out


def load_select(root: Path, per_file: int) -> list[dict]:
    files = _find(root, ("SELECT", "select"), "*.json.gz")
    if not files:
        return []
    base = (
        next(p for p in files[0].parents if (p / "results").is_dir())
        if any((p / "results").is_dir() for p in files[0].parents)
        else root
    )
    questions = _select_questions(base)
    rows = []
    for p in files:
        try:
            data = json.loads(gzip.decompress(p.read_bytes()))
        except (OSError, EOFError, ValueError):
            continue  # absent blob or a Git LFS pointer
        model, eval_type, technique = p.parts[-3], p.parts[-2], p.name.removesuffix(".json.gz")
        recs = []

        def walk(x):
            if isinstance(x, dict) and "response" in x and "refusal" in x:
                recs.append(x)  # noqa: B023 - walk runs (below) within this iteration only
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v)

        walk(data)
        keyed = sorted(
            recs,
            key=lambda r: hashlib.sha256(
                f"{p.name}{model}{eval_type}{r.get('id')}{json.dumps(r['response'])[:200]}".encode()
            ).hexdigest(),
        )
        for r in keyed[:per_file]:
            resp = r["response"]
            if isinstance(resp, dict):
                resp = resp.get("answer")
            flag = r["refusal"].get("heuristic") if isinstance(r["refusal"], dict) else None
            if isinstance(flag, dict):
                flag = flag.get("decision")
            if flag is None or resp is None:
                continue
            rows.append(
                _row(
                    "select",
                    model,
                    questions.get(str(r.get("id")), ""),
                    resp,
                    "refusal" if flag else "compliance",
                    bool(flag),
                    technique=technique,
                    eval_type=eval_type,
                )
            )
    return rows


def load_sources(root: Path, wanted: tuple[str, ...], select_per_file: int) -> pd.DataFrame:
    rows: list[dict] = []
    xs = load_xstest(root) if {"xstest", "xstest_v1"} & set(wanted) else []
    if "xstest" in wanted:
        rows += xs
    if "xstest_v1" in wanted:
        rows += load_xstest_v1(root, xs)
    if "gptfuzz" in wanted:
        rows += load_gptfuzz(root)
    if "select" in wanted:
        rows += load_select(root, select_per_file)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.drop_duplicates(subset=["source", "model", "question", "response"]).reset_index(
        drop=True
    )
    frame["refusal"] = frame["label"] != "compliance"
    frame["split"] = [
        split_of(*t)
        for t in zip(frame["source"], frame["model"], frame["question"], frame["response"])
    ]
    return frame


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
    ap.add_argument("--sources", default="xstest,xstest_v1,gptfuzz,select")
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
    sys.exit(main())
