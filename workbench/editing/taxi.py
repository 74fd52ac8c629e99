"""taxi's release as its authors left it: stale rows, subject spelling, and its protocol text.

Nothing of taxi (derekpowell/taxi) ships with the workbench; everything here reads the user's
clone of it.

* **Stale rows.** ``datasets/edits-evaluation.json`` was built before a fix the authors made only
  to their taxonomy TSV ("fixed bug in food queries"): rows whose reverse template repeats the
  answer slot and names no subject slot, and rows whose forward template has no answer slot.
  :func:`stale_rows` finds them in any frame; :func:`correct_from_taxonomy` replaces every
  row's templates by the clone's ``taxonomy/<group>-data.tsv`` where the two differ (matched on
  group, category, property and answer); :func:`release_report` counts both.
* **Subject spelling.** One subject is released with a trailing space. taxi's code uses it as
  released in the edit and in the queries alike; :func:`normalise_subjects` strips it in both
  (the ``subj`` column, the edit label and the choice lists), so an edit made from ``subj`` (see
  :func:`~workbench.editing.evaluate.edit_subject`) and its queries agree either way.
* **Protocol text.** :func:`read_protocol` reads the in-context prefix and the rewrite prompt
  from ``easyeditor/custom/custom.py`` (its f-strings, parsed with ``ast``, never run) and
  ROME's KL prompt from ``easyeditor/models/rome/compute_v.py``; :func:`read_hparams` reads the
  editors' YAML settings for :func:`~workbench.editing.presets.check_against_clone`.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.code_reading import fstring_template
from workbench.errors import WorkbenchError
from workbench.paths import decode_utf8

EVALUATION = "datasets/edits-evaluation.json"
CUSTOM = "easyeditor/custom/custom.py"
COMPUTE_V = "easyeditor/models/rome/compute_v.py"
HPARAMS = {"ft": "hparams/FT/llama-7b.yaml", "rome": "hparams/ROME/llama-7b.yaml"}
TAXONOMY = "taxonomy/{group}-data.tsv"
SUBJECT_SPELLINGS = ("as_released", "normalised")


def find_taxi_root(path: str | os.PathLike, levels: int = 2) -> Path | None:
    """The clone holding ``datasets/edits-evaluation.json``: ``path`` (the file or a folder) or
    one of its ``levels`` parents; None when none does (a file copied out of its clone)."""
    p = Path(path).resolve()
    start = p.parent if p.is_file() else p
    for cand in (start, *list(start.parents)[:levels]):
        if (cand / EVALUATION).is_file():
            return cand
    return None


# -- stale rows ---------------------------------------------------------------------------------
def stale_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Two boolean columns per row: ``reverse_repeats_answer`` (the reverse template holds the
    answer slot twice and no subject slot: "<answer> is how you get <answer>") and
    ``forward_lacks_slot`` (the forward template has no ``<answer>``)."""
    rev, fwd = frame["query_rev"].astype(str), frame["query_fwd"].astype(str)
    return pd.DataFrame(
        {
            "reverse_repeats_answer": (rev.str.count("<answer>") >= 2)
            & ~rev.str.contains("<subj>", regex=False),
            "forward_lacks_slot": ~fwd.str.contains("<answer>", regex=False),
        },
        index=frame.index,
    )


def correct_from_taxonomy(
    frame: pd.DataFrame, root: str | os.PathLike
) -> tuple[pd.DataFrame, int, dict[str, str]]:
    """``frame`` with each property row's ``query_fwd`` / ``query_rev`` taken from the clone's
    ``taxonomy/<group>-data.tsv`` where they differ (rows matched on superordinate group, new
    category ``entity``, ``property`` and ``answer_fwd``; rows the TSV lacks are kept). Returns
    the frame, the number of rows changed and the TSVs read with their sha256."""
    root = Path(root)
    out = frame.copy()
    changed, files = 0, dict[str, str]()
    groups = sorted(out["superordinate_category"].astype(str).unique())
    absent = [
        TAXONOMY.format(group=g) for g in groups if not (root / TAXONOMY.format(group=g)).is_file()
    ]
    if len(absent) == len(groups):  # none: the caller says the clone has no taxonomy
        return out, changed, files
    if absent:
        raise WorkbenchError(
            f"{root} holds {len(groups) - len(absent)} of the {len(groups)} taxonomy files the "
            f"edits need: {', '.join(absent)} missing (a partial clone?); those groups' stale "
            "rows would stay uncorrected"
        )
    for group in groups:
        path = root / TAXONOMY.format(group=group)
        raw = path.read_bytes()
        files[TAXONOMY.format(group=group)] = hashlib.sha256(raw).hexdigest()
        tsv = _read_tsv(path, raw)
        missing = {"entity", "property", "answer_fwd", "query_fwd", "query_rev"} - set(tsv.columns)
        if missing:
            raise WorkbenchError(f"{path}: missing columns {sorted(missing)}")
        tsv = tsv.drop_duplicates(["entity", "property", "answer_fwd"], keep=False)
        lookup = {
            (e, p, a): (f, r)
            for e, p, a, f, r in tsv[
                ["entity", "property", "answer_fwd", "query_fwd", "query_rev"]
            ].itertuples(index=False)
        }
        rows = out.index[out["superordinate_category"].astype(str) == group]
        for i in rows:
            key = (
                str(out.at[i, "entity"]),
                str(out.at[i, "property"]),
                str(out.at[i, "answer_fwd"]),
            )
            if key not in lookup:
                continue
            fwd, rev = lookup[key]
            if (out.at[i, "query_fwd"], out.at[i, "query_rev"]) != (fwd, rev):
                out.at[i, "query_fwd"], out.at[i, "query_rev"] = fwd, rev
                changed += 1
    return out, changed, files


def _read_tsv(path: Path, raw: bytes) -> pd.DataFrame:
    """A taxonomy TSV as text columns, strictly: a file that is not UTF-8, a quote left open or
    a row with more fields than the header is one line naming the file (pandas would shift a
    row with an extra field into the index, or drop the field)."""
    text = decode_utf8(raw, path, "a damaged download?")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", strict=True)
    try:
        rows = [r for r in reader if r]
    except csv.Error as e:
        raise WorkbenchError(f"{path}, line {reader.line_num}: {e}") from None
    if not rows:
        raise WorkbenchError(f"{path} is empty")
    header, body = rows[0], rows[1:]
    for n, r in enumerate(body, 2):
        if len(r) > len(header):
            raise WorkbenchError(
                f"{path}, row {n}: {len(r)} fields where the header has {len(header)}"
            )
    # taxi's rows may stop before their last foils: empty, as pandas reads them
    return pd.DataFrame([r + [""] * (len(header) - len(r)) for r in body], columns=header)


# -- subject spelling ---------------------------------------------------------------------------
def spaced_subjects(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Subjects released with leading or trailing whitespace: ``{subject: {"edits", "queries"}}``."""
    subj = frame["subj"].astype(str)
    odd = frame[subj != subj.str.strip()]
    return {
        s: {"edits": int(g["edit"].nunique()), "queries": len(g)}
        for s, g in odd.groupby("subj", sort=True)
    }


def _strip_label(label: str) -> str:
    subj, arrow, cat = str(label).partition("->")
    return f"{subj.strip()} -> {cat.strip()}" if arrow else str(label).strip()


def normalise_subjects(frame: pd.DataFrame) -> pd.DataFrame:
    """Subjects without surrounding whitespace everywhere they occur: ``subj``, the ``edit``
    label, the choice lists and spelled-out answers (a reverse answer ``<subj>`` stays)."""
    out = frame.copy()
    out["subj"] = out["subj"].astype(str).str.strip()
    out["edit"] = out["edit"].map(_strip_label)
    for col in ("fwd_choices", "rev_choices"):
        out[col] = out[col].map(lambda cs: [c.strip() if isinstance(c, str) else c for c in cs])
    for col in ("answer_rev", "orig_answer_rev", "answer_fwd", "orig_answer_fwd"):
        if col in out:
            out[col] = out[col].map(lambda a: a.strip() if isinstance(a, str) else a)
    return out


# -- the report ---------------------------------------------------------------------------------
@dataclass
class ReleaseReport:
    """What :func:`prepare_release` found in taxi's file and did about it."""

    rows: int
    edits: int
    reverse_repeats_answer: int
    forward_lacks_slot: int
    stale_rows: int
    corrected: int = 0
    correction_files: dict[str, str] = field(default_factory=dict)
    stale_after: int = 0
    spaced_subjects: dict[str, dict[str, int]] = field(default_factory=dict)
    subjects: str = "as_released"
    fix_stale: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [
            f"{self.rows} queries, {self.edits} edits",
            f"stale rows: {self.stale_rows} ({self.reverse_repeats_answer} reverse templates repeat "
            f"<answer> without <subj>, {self.forward_lacks_slot} forward templates lack <answer>)",
        ]
        if self.correction_files:
            out.append(
                f"corrected {self.corrected} rows from the clone's {', '.join(sorted(self.correction_files))}; "
                f"{self.stale_after} stale rows left"
            )
        elif self.stale_rows:
            out.append(
                "kept as released ("
                + (
                    "no taxonomy TSV in the clone to correct them from"
                    if self.fix_stale
                    else "fix_stale is off"
                )
                + ")"
            )
        for s, n in self.spaced_subjects.items():
            out.append(
                f"subject {s!r} has surrounding spaces ({n['edits']} edits, {n['queries']} queries): "
                + (
                    "used as released in edits and queries"
                    if self.subjects == "as_released"
                    else "stripped in edits and queries"
                )
            )
        return out


def release_report(frame: pd.DataFrame) -> ReleaseReport:
    """Counts of :func:`stale_rows` and :func:`spaced_subjects` in ``frame``."""
    st = stale_rows(frame)
    return ReleaseReport(
        rows=len(frame),
        edits=int(frame["edit"].nunique()),
        reverse_repeats_answer=int(st["reverse_repeats_answer"].sum()),
        forward_lacks_slot=int(st["forward_lacks_slot"].sum()),
        stale_rows=int(st.any(axis=1).sum()),
        stale_after=int(st.any(axis=1).sum()),
        spaced_subjects=spaced_subjects(frame),
    )


def prepare_release(
    frame: pd.DataFrame,
    root: str | os.PathLike | None,
    fix_stale: bool = True,
    subjects: str = "as_released",
) -> tuple[pd.DataFrame, ReleaseReport]:
    """taxi's frame ready to score: stale rows corrected from the clone's taxonomy when
    ``fix_stale`` and the clone has it, subjects ``as_released`` or ``normalised``; and the report."""
    if subjects not in SUBJECT_SPELLINGS:
        raise WorkbenchError(f"subjects must be one of {SUBJECT_SPELLINGS}, got {subjects!r}")
    report = release_report(frame)
    report.subjects, report.fix_stale = subjects, fix_stale
    if fix_stale and root is not None:
        frame, report.corrected, report.correction_files = correct_from_taxonomy(frame, root)
        report.stale_after = int(stale_rows(frame).any(axis=1).sum())
    if subjects == "normalised":
        frame = normalise_subjects(frame)
    return frame.reset_index(drop=True), report


# -- protocol text ------------------------------------------------------------------------------
class TaxiProtocolError(WorkbenchError):
    """taxi's protocol files are missing or do not hold the text where it is expected."""


def _fstring_template(node: ast.JoinedStr, names: dict[str, str]) -> str | None:
    """An f-string as a ``str.format`` template: each ``<obj>.<attr>`` in ``names`` becomes
    ``{names[attr]}``; None if it has any other expression."""
    return fstring_template(
        node,
        lambda e: names.get(e.attr) if isinstance(e, ast.Attribute) else None,
    )


def _parse(path: Path) -> tuple[ast.Module, str]:
    if not path.is_file():
        raise TaxiProtocolError(f"taxi protocol file missing: {path}")
    raw = path.read_bytes()
    try:
        return ast.parse(raw.decode("utf-8"), filename=str(path)), hashlib.sha256(raw).hexdigest()
    except (SyntaxError, UnicodeDecodeError) as e:
        raise TaxiProtocolError(f"{path}: not readable Python ({e})") from None


def _edit_function(tree: ast.Module) -> ast.FunctionDef | None:
    return next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "edit_and_evaluate"),
        None,
    )


def _dict_values(fn: ast.FunctionDef, key: str) -> Iterator[ast.expr]:
    """The value of every ``{key: ...}`` entry of the dict literals in ``fn``, in walk order."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == key:
                    yield v


def _ike_prefix(fn: ast.FunctionDef) -> str | None:
    """The first ``{"preprompt": f"..."}`` in ``fn`` whose f-string names the subject and the category."""
    for v in _dict_values(fn, "preprompt"):
        if isinstance(v, ast.JoinedStr):
            t = _fstring_template(v, {"subj": "s", "entity": "c"})
            if t and "{s}" in t and "{c}" in t:
                return t
    return None


def _rewrite_prompt(fn: ast.FunctionDef) -> str | None:
    """The first ``'prompts': [f'...']`` in ``fn`` whose f-string names only the subject."""
    for v in _dict_values(fn, "prompts"):
        if isinstance(v, ast.List) and v.elts and isinstance(v.elts[0], ast.JoinedStr):
            t = _fstring_template(v.elts[0], {"subj": "s"})
            if t and "{s}" in t:
                return t
    return None


def _kl_prompt(tree: ast.Module) -> str | None:
    """``kl_prompts``' single template in EasyEdit's ``compute_v`` (``"{}"`` the subject)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(target, ast.Name):
                pairs = [(target, node.value)]
            elif (
                isinstance(target, ast.Tuple)
                and isinstance(node.value, ast.Tuple)
                and len(target.elts) == len(node.value.elts)
            ):
                pairs = list(zip(target.elts, node.value.elts))
            for name, value in pairs:
                if (
                    isinstance(name, ast.Name)
                    and name.id == "kl_prompts"
                    and isinstance(value, ast.List)
                    and len(value.elts) == 1
                    and isinstance(value.elts[0], ast.Constant)
                    and isinstance(value.elts[0].value, str)
                    and value.elts[0].value.count("{}") == 1
                ):
                    return value.elts[0].value.replace("{}", "{s}")
    return None


@dataclass(frozen=True)
class TaxiProtocol:
    """taxi's protocol text as read from a clone (``None`` where the clone lacks it)."""

    ike_template: str | None
    rewrite_prompt: str | None
    kl_prompt: str | None
    files: dict[str, str]


def read_protocol(root: str | os.PathLike) -> TaxiProtocol:
    """The IKE prefix and rewrite prompt of ``easyeditor/custom/custom.py`` (as ``str.format``
    templates: ``{s}`` the subject, ``{c}`` the category) and ROME's KL prompt from
    ``easyeditor/models/rome/compute_v.py``; each None where the file or the text is absent."""
    root = Path(root)
    files: dict[str, str] = {}
    ike = rewrite = kl = None
    if (root / CUSTOM).is_file():
        tree, files[CUSTOM] = _parse(root / CUSTOM)
        fn = _edit_function(tree)
        if fn is not None:
            ike, rewrite = _ike_prefix(fn), _rewrite_prompt(fn)
    if (root / COMPUTE_V).is_file():
        tree, files[COMPUTE_V] = _parse(root / COMPUTE_V)
        kl = _kl_prompt(tree)
    return TaxiProtocol(ike, rewrite, kl, files)


def read_hparams(root: str | os.PathLike) -> dict[str, dict]:
    """The clone's FT and ROME settings (``hparams/FT/llama-7b.yaml``, ``hparams/ROME/...``);
    an editor whose file is absent is left out."""
    import yaml

    out = {}
    for editor, rel in HPARAMS.items():
        path = Path(root) / rel
        if path.is_file():
            data = yaml.safe_load(path.read_text())
            if not isinstance(data, dict):
                raise TaxiProtocolError(f"{path}: expected a mapping of settings")
            out[editor] = data
    return out
