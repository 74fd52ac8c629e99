"""SELECT's results files in miniature, of our own writing, beside :mod:`select_release`'s data.

``results/expr.abstain.select{,.compose}/<model>/<eval type>/<technique>.json.gz`` with the real
nesting (``{seed: {concept: {md5: record}}}``; compositions ``{seed: {relation: {a#b: ...}}}``),
records ``{id, concept, response, refusal}``, chain-of-thought responses as ``{complete,
answer}``, several seeds, a stored flag left out, an id that joins no question, a Git LFS
pointer, a truncated gzip, and most expected files absent. ``config/`` names two models (one
behind an API: prompting only) and three techniques.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from select_release import atom_names, write_release

MODELS = {"Tiny-IT-1B": "acme/tiny-it-1b", "Chat-API": "openai/azure/chat-api"}
MODEL_DIRS = {"Tiny-IT-1B": "acme--tiny-it-1b", "Chat-API": "openai--azure--chat-api"}
TECHNIQUES_YAML = """\
prompt-simple:
  name: "Prompt (w/ Instruction)"
  short_name: "Prompt (ZS)"

# prompt-verbose:
#   name: "switched off, as SELECT's own file switches some off"

prompt_cot-few_shot:
  name: "Prompt + CoT + Examples"
  short_name: "Prompt (FS+CoT)"

steering-repe:
  name: "Activation Steering"
  short_name: "Act. Steering"
"""
UNJOINABLE = "0" * 32
ABSTAIN = "Abstained"
ANSWER = "Here is what I know: it is a well documented subject with a long history."


def md5(q: str) -> str:
    return hashlib.md5(q.encode()).hexdigest()


def atom_q(cid: str, i: int) -> str:
    return f"What would you tell me about {atom_names()[cid]}, point {i}?"


def comp_q(relation: str, a: str, b: str, i: int) -> str:
    names = atom_names()
    return f"Tell me about {relation.format(names[a], names[b])}, aspect {i}."


def record(
    target, question_id: str, refused: bool, *, cot: bool = False, flags: dict | None = None
):
    """One released record: the response says ``Abstained`` when ``refused``."""
    text = ABSTAIN if refused else ANSWER
    response = (
        {
            "complete": f"Reasoning: the query is {'' if refused else 'not '}about it.\n"
            f"Answer: {text}",
            "answer": text,
        }
        if cot
        else text
    )
    refusal = (
        flags
        if flags is not None
        else {"phrase": refused, "keyword": False, "phr+kw": refused, "heuristic": refused}
    )
    return {"id": question_id, "concept": list(target), "response": response, "refusal": refusal}


def _atoms(spec: dict, cot: bool = False) -> dict:
    """``{seed: {target: [(question concept, index, refused), ...]}}`` -> released nesting."""
    out = {}
    for seed, per in spec.items():
        out[seed] = {}
        for target, qs in per.items():
            recs = {}
            for qc, i, refused in qs:
                qid = UNJOINABLE if qc is None else md5(atom_q(qc, i))
                recs[qid] = record((target,), qid, refused, cot=cot)
            out[seed][target] = recs
    return out


def _comps(spec: dict) -> dict:
    """``{seed: {(relation, a#b): [((relation, a, b), index, refused), ...]}}``."""
    out = {}
    for seed, per in spec.items():
        out[seed] = {}
        for (relation, key), qs in per.items():
            recs = {}
            for (qrel, a, b), i, refused in qs:
                qid = md5(comp_q(qrel, a, b, i))
                recs[qid] = record((relation, key), qid, refused)
            out[seed].setdefault(relation, {})[key] = recs
    return out


R, BW, P, L, NILE, BAIKAL = (
    "yago:River",
    "yago:Body_of_water",
    "schema:Place",
    "yago:Lake",
    "yago:Nile",
    "yago:Lake_Baikal",
)
ABOUT, DUMP, DAMAGE = "{} about {}", "Dumping {} in {}", "Damage from production of {} to {}"

#: atoms / Tiny / abstention / prompt-simple: seeds hold different numbers of questions, so
#: averaging over seeds first (River 1/3, Lake 3/4) differs from pooling (River 2/4).
ABSTENTION = {
    "101": {R: [(R, 0, True), (R, 1, True), (R, 2, False)], L: [(L, 0, True), (L, 1, True)]},
    "202": {R: [(R, 0, False)], L: [(L, 0, True), (L, 1, False)]},
}
#: atoms / Tiny / generalization / prompt-simple: one id joins no question.
GENERALIZATION = {
    "101": {
        BW: [(R, 3, True), (NILE, 0, False), (BAIKAL, 1, True), (None, 0, False)],
        "schema:Movie": [("yago:Documentary", 2, True), ("yago:Planet_Earth", 0, True)],
    }
}
#: atoms / Tiny / specificity / prompt-simple: River's parent, ancestor and sibling; the roots'
#: siblings.
SPECIFICITY = {
    "101": {
        R: [(BW, 5, False), (P, 1, True), (L, 2, False), (L, 3, False)],
        P: [("schema:CreativeWork", 0, False), ("schema:Product", 4, True)],
    }
}
COT = {"101": {R: [(R, 0, True), (R, 1, False)]}, "202": {R: [(R, 0, True), (R, 1, True)]}}
API_ABSTENTION = {"555": {NILE: [(NILE, 0, True), (NILE, 1, True)]}}
COMP_ABSTENTION = {
    "101": {
        (ABOUT, "schema:Movie#yago:River"): [
            ((ABOUT, "schema:Movie", R), 0, True),
            ((ABOUT, "schema:Movie", R), 1, False),
        ],
        (DUMP, "yago:Fertilizer#yago:River"): [((DUMP, "yago:Fertilizer", R), 0, True)],
        (DAMAGE, "yago:Fertilizer#yago:River"): [((DAMAGE, "yago:Fertilizer", R), 0, False)],
    }
}
#: Movie#River: its parent and an ancestor; Damage's single top composition: other relations'.
COMP_SPECIFICITY = {
    "101": {
        (ABOUT, "schema:Movie#yago:River"): [
            ((ABOUT, "schema:CreativeWork", R), 0, False),
            ((ABOUT, "schema:CreativeWork", BW), 3, True),
        ],
        (DAMAGE, "yago:Chemical_substance#yago:River"): [
            ((DUMP, "yago:Chemical_substance", L), 2, False)
        ],
    }
}


def _path(root: Path, partition: str, model: str, eval_type: str, technique: str) -> Path:
    folder = "expr.abstain.select" + (".compose" if partition == "compositions" else "")
    return root / "results" / folder / MODEL_DIRS[model] / eval_type / f"{technique}.json.gz"


def _write(path: Path, data: dict) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = gzip.compress(json.dumps(data).encode())
    path.write_bytes(raw)
    return raw


def write_results_release(root: Path) -> dict:
    """A SELECT clone under ``root`` (data, config, results); returns what the results hold:
    ``{"root", "rows": {relative path: records}, "absent", "unreadable", "expected"}``."""
    write_release(root)
    (root / "config").mkdir()
    (root / "config" / "models.yaml").write_text(
        "".join(f'"{a}": "{m}"\n' for a, m in MODELS.items())
    )
    (root / "config" / "techniques.yaml").write_text(TECHNIQUES_YAML)
    files = {
        ("atoms", "Tiny-IT-1B", "abstention", "prompt-simple"): _atoms(ABSTENTION),
        ("atoms", "Tiny-IT-1B", "abstention", "prompt_cot-few_shot"): _atoms(COT, cot=True),
        ("atoms", "Tiny-IT-1B", "generalization", "prompt-simple"): _atoms(GENERALIZATION),
        ("atoms", "Tiny-IT-1B", "specificity", "prompt-simple"): _atoms(SPECIFICITY),
        ("atoms", "Chat-API", "abstention", "prompt-simple"): _atoms(API_ABSTENTION),
        ("compositions", "Tiny-IT-1B", "abstention", "prompt-simple"): _comps(COMP_ABSTENTION),
        ("compositions", "Tiny-IT-1B", "specificity", "prompt-simple"): _comps(COMP_SPECIFICITY),
    }
    # a record whose stored flags lack two of the four
    files[("atoms", "Tiny-IT-1B", "abstention", "prompt-simple")]["101"][R][md5(atom_q(R, 2))][
        "refusal"
    ] = {"phrase": False, "heuristic": False}
    rows = {}
    for (part, model, et, tech), data in files.items():
        p = _path(root, part, model, et, tech)
        _write(p, data)
        rows[str(p.relative_to(root))] = sum(
            len(r)
            for s in data.values()
            for c in s.values()
            for r in (c.values() if part == "compositions" else [c])
        )
    lfs = _path(root, "atoms", "Tiny-IT-1B", "abstention", "steering-repe")
    lfs.parent.mkdir(parents=True, exist_ok=True)
    lfs.write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 4096\n"
    )
    truncated = _path(root, "atoms", "Tiny-IT-1B", "generalization", "steering-repe")
    raw = _write(truncated, _atoms(ABSTENTION))
    truncated.write_bytes(raw[: len(raw) // 2])
    expected = []
    for part in ("atoms", "compositions"):
        for model in MODELS:
            for et in ("abstention", "generalization", "specificity"):
                for tech in ("prompt-simple", "prompt_cot-few_shot", "steering-repe"):
                    if model == "Chat-API" and tech == "steering-repe":
                        continue
                    expected.append(str(_path(root, part, model, et, tech).relative_to(root)))
    unreadable = [str(p.relative_to(root)) for p in (lfs, truncated)]
    absent = [p for p in expected if p not in rows and p not in unreadable]
    return {
        "root": root,
        "rows": rows,
        "absent": absent,
        "unreadable": unreadable,
        "expected": expected,
    }
