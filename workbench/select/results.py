"""Import SELECT's released results as a workbench run (tidy rows, like the experiment runner's).

The release keeps one gzipped JSON file per partition, model, evaluation type and technique:
``results/expr.abstain.select{,.compose}/<model>/<eval type>/<technique>.json.gz``, nested
``{seed: {concept: {md5(question): record}}}`` for atoms and ``{seed: {relation template:
{"a#b": {md5: record}}}}`` for compositions; a record holds the response (a string, or
``{"complete", "answer"}`` for chain-of-thought) and SELECT's stored refusal flags.

Each record becomes one row: the question joined back by md5 over the target's candidate
questions (its own for abstention, its descendants' for generalization, its specificity set's
for specificity), the workbench's relation label, the stored flags (``select_flag_*``), every
registered detector's decision (``refused_<name>``) and provenance. Which files the release
*should* hold is derived from its ``config/`` (every model x evaluation type x the techniques
SELECT ran for it; API models were prompted only; the published release has 144), so an import
is whole or an error naming the absent and unreadable files; ``allow_partial=True`` imports what
is there and every row records it (``release_load``, :mod:`workbench.releases`). Files are scored in a process pool; each one's rows are written
atomically to ``runs/<name>/chunks/`` under a key made of the file's sha256 and the import
settings, so an interrupted import resumes where it stopped, and ``results.parquet`` is rebuilt
from the chunks.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.select.protocol import is_lfs_pointer

#: Partition -> results folder of the release.
PARTITIONS = {"atoms": "expr.abstain.select", "compositions": "expr.abstain.select.compose"}
EVAL_TYPES = ("abstention", "generalization", "specificity")
#: SELECT's technique aliases -> the workbench's technique names.
TECHNIQUES = {
    "prompt-simple": "zero_shot",
    "prompt_cot-few_shot": "few_shot_cot",
    "steering-repe": "steering",
    "tuning-sft": "sft",
    "tuning-sft-dpo": "sft_dpo",
}
#: SELECT's stored refusal flags -> columns.
SELECT_FLAGS = {
    "phrase": "select_flag_phrase",
    "keyword": "select_flag_keyword",
    "phr+kw": "select_flag_phr_kw",
    "heuristic": "select_flag_heuristic",
}
#: Technique families that need the model's weights (SELECT ran them on open models only).
WHITE_BOX_FAMILIES = ("steering", "tuning")
#: Model-id prefixes of models SELECT reached through an API (prompting only).
API_PROVIDERS = ("openai",)
_NATURE = {"prompt": "inference-time", "steering": "inference-time", "tuning": "fine-tuning"}
#: Bumped when the rows an import writes change: older chunks are then rebuilt.
IMPORTER_VERSION = 1
LFS_REASON = "a Git LFS pointer, not the file (its blob was not downloaded)"


class SelectResultsError(WorkbenchError):
    """The release or its results cannot be imported as asked."""


@dataclass(frozen=True)
class ResultFile:
    """One results file the release should hold."""

    partition: str
    model: str  # SELECT's display alias ("Gemma-2-IT-2B")
    model_id: str  # the Hugging Face (or API) id
    model_dir: str  # the release's folder name for it
    eval_type: str
    select_technique: str

    @property
    def relpath(self) -> str:
        return (
            f"results/{PARTITIONS[self.partition]}/{self.model_dir}/{self.eval_type}/"
            f"{self.select_technique}.json.gz"
        )

    @property
    def technique(self) -> str:
        return TECHNIQUES.get(self.select_technique, self.select_technique)


@dataclass
class ImportReport:
    """What an import read, what it could not, and where the rows went."""

    run_dir: Path
    release_dir: str
    expected: int = 0
    read: list[dict] = field(default_factory=list)  # per file: path, sha256, rows, counts
    absent: list[str] = field(default_factory=list)
    unreadable: list[dict] = field(default_factory=list)  # {path, reason}
    rows: int = 0
    unjoined: int = 0
    ambiguous: int = 0
    unknown_targets: int = 0
    seconds: float = 0.0
    detectors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    release_load: str = "whole"  # or "partial: ..." (what every row records)

    @property
    def results_path(self) -> Path:
        return Path(self.run_dir) / "results.parquet"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir)
        return d

    def summary(self) -> str:
        resumed = sum(1 for f in self.read if f.get("resumed"))
        lines = [
            f"SELECT results from {self.release_dir} -> {self.results_path}",
            f"files: {self.expected} expected, {len(self.read)} read ({resumed} from earlier "
            f"chunks), {len(self.absent)} absent, {len(self.unreadable)} unreadable",
            f"rows: {self.rows}; ids not joined to a question: {self.unjoined}; joined to "
            f"more than one candidate concept: {self.ambiguous}; rows whose target the "
            f"benchmark lacks: {self.unknown_targets}",
            f"detectors: {', '.join(self.detectors)}",
            f"release: {self.release_load}",
            f"wall time: {self.seconds:.1f}s",
        ]
        lines += [f"absent: {p}" for p in self.absent]
        lines += [f"unreadable: {u['path']}: {u['reason']}" for u in self.unreadable]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# -- the expected set of files ---------------------------------------------------------------------
def release_root(release_dir: str | os.PathLike) -> Path:
    """The folder holding ``results/`` (a clone of SELECT's repository or its release)."""
    d = Path(release_dir)
    if any((d / "results" / folder).is_dir() for folder in PARTITIONS.values()):
        return d
    if d.name == "results" and any((d / folder).is_dir() for folder in PARTITIONS.values()):
        return d.parent
    raise SelectResultsError(
        f"no SELECT results under {d} (looked for results/{PARTITIONS['atoms']} "
        f"and results/{PARTITIONS['compositions']})"
    )


def model_dir_name(model_id: str) -> str:
    """The folder SELECT writes a model's results to: its id lower-cased, ``/`` as ``--``,
    characters unsafe in paths dropped (``?"<>``) or made dashes (``:\\|*``)."""
    name = re.sub(r'[?"<>]', "", model_id.lower().replace("/", "--"))
    return re.sub(r"[:/\\|*]", "-", name)


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SelectResultsError(f"{path}: cannot read ({e})") from None


def technique_family(alias: str) -> str:
    """``prompt_cot-few_shot`` -> ``prompt``, ``tuning-sft-dpo`` -> ``tuning``."""
    return re.split(r"[-_]", alias, maxsplit=1)[0]


def ran_for(model_id: str, technique: str) -> bool:
    """Whether SELECT ran ``technique`` for ``model_id``: white-box techniques need weights, so
    API models were prompted only."""
    api = model_id.split("/", 1)[0].lower() in API_PROVIDERS
    return not (api and technique_family(technique) in WHITE_BOX_FAMILIES)


def expected_files(
    release_dir: str | os.PathLike, models: list[str] | None = None
) -> tuple[list[ResultFile], list[str]]:
    """Every results file the release should hold, and notes on how the set was derived.

    Models: those of ``config/models.yaml`` plus any other model folder present; techniques:
    those of ``config/techniques.yaml`` that SELECT ran for the model (:func:`ran_for`).
    ``models`` (aliases, ids or folder names) restricts the set.
    """
    root = release_root(release_dir)
    notes: list[str] = []
    cfg = root / "config"
    aliases: dict[str, str] = {}
    if (cfg / "models.yaml").is_file():
        raw = _yaml(cfg / "models.yaml") or {}
        if not isinstance(raw, dict):
            raise SelectResultsError(f"{cfg / 'models.yaml'}: expected alias: model id pairs")
        aliases = {str(a): str(m) for a, m in raw.items()}
    else:
        notes.append(f"{cfg / 'models.yaml'} absent: models are the folders present")
    if (cfg / "techniques.yaml").is_file():
        raw = _yaml(cfg / "techniques.yaml") or {}
        techniques = list(raw) if isinstance(raw, dict) else []
    else:
        techniques = list(TECHNIQUES)
        notes.append(f"{cfg / 'techniques.yaml'} absent: techniques are the workbench's known ones")
    # model folder -> (alias, id): configured first, then folders the config does not name
    by_dir = {model_dir_name(mid): (alias, mid) for alias, mid in aliases.items()}
    for part, folder in PARTITIONS.items():
        base = root / "results" / folder
        for d in sorted(base.iterdir()) if base.is_dir() else ():
            if d.is_dir() and d.name not in by_dir:
                by_dir[d.name] = (d.name, d.name.replace("--", "/"))
                notes.append(f"model folder {folder}/{d.name} is not in config/models.yaml")
    if models:
        wanted = {m.lower() for m in models}
        by_dir = {
            k: v for k, v in by_dir.items() if {k.lower(), v[0].lower(), v[1].lower()} & wanted
        }
        unknown = wanted - {x.lower() for k, v in by_dir.items() for x in (k, *v)}
        if unknown:
            raise SelectResultsError(
                f"unknown model(s) {sorted(unknown)}; the release has "
                f"{sorted(a for a, _ in by_dir.values()) or 'none'}"
            )
    files = [
        ResultFile(part, alias, mid, mdir, et, t)
        for part in PARTITIONS
        for mdir, (alias, mid) in by_dir.items()
        for et in EVAL_TYPES
        for t in techniques
        if ran_for(mid, t)
    ]
    return files, notes


# -- reading one file ------------------------------------------------------------------------------
def read_results(path: Path, raw: bytes | None = None) -> dict:
    """A results file's nested dict; :class:`SelectResultsError` names why it cannot be read
    (a Git LFS pointer, a truncated or corrupt gzip, invalid JSON, an unexpected shape)."""
    raw = path.read_bytes() if raw is None else raw
    if is_lfs_pointer(raw):
        raise SelectResultsError(LFS_REASON)
    try:
        text = gzip.decompress(raw)
    except EOFError:
        raise SelectResultsError("truncated gzip (the download stopped early)") from None
    except (gzip.BadGzipFile, zlib.error, OSError) as e:
        raise SelectResultsError(f"not a readable gzip file ({e})") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SelectResultsError(f"invalid JSON ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SelectResultsError("not SELECT's {seed: {concept: {id: record}}} nesting")
    return data


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _flag(refusal: Any, key: str) -> bool | None:
    v = refusal.get(key) if isinstance(refusal, dict) else None
    if isinstance(v, dict):  # a detector that kept its reasons: {"decision": ...}
        v = v.get("decision")
    return None if v is None else bool(v)


STRING_COLUMNS = (
    "run",
    "model",
    "model_id",
    "revision",
    "technique",
    "technique_nature",
    "technique_params",
    "target",
    "target_name",
    "target_kind",
    "target_root",
    "config_hash",
    "versions",
    "question_concept",
    "relation",
    "question",
    "response",
    "finish_reason",
    "phrase_kind",
    "phrase_match",
    "eval_type",
    "partition",
    "select_technique",
    "select_model",
    "select_relation",
    "select_concept",
    "instance_id",
    "response_complete",
    "source_file",
    "source_sha256",
)
INT_COLUMNS = ("target_level", "seed", "question_index", "sample", "n_tokens")
FLOAT_COLUMNS = ("cell_seconds", "logprob")
BOOL_COLUMNS = ("phrase_partial", "gate_fired", "joined", *SELECT_FLAGS.values())
#: Column order: the runner's columns first, then the import's own.
LEADING = (
    "run",
    "model",
    "model_id",
    "revision",
    "technique",
    "technique_nature",
    "technique_params",
    "target",
    "target_name",
    "target_kind",
    "target_level",
    "target_root",
    "seed",
    "config_hash",
    "versions",
    "cell_seconds",
    "question_concept",
    "relation",
    "question_index",
    "question",
    "sample",
    "response",
    "n_tokens",
    "finish_reason",
    "logprob",
)
TRAILING = (
    "phrase_partial",
    "phrase_kind",
    "phrase_match",
    "gate_fired",
    "eval_type",
    "partition",
    "select_technique",
    "select_model",
    "select_relation",
    "select_concept",
    "instance_id",
    "joined",
    "response_complete",
    *SELECT_FLAGS.values(),
    "source_file",
    "source_sha256",
)


def schema(detector_names: list[str]):
    """The pyarrow schema of imported rows (every chunk has exactly this one)."""
    import pyarrow as pa

    def typ(c: str):
        if c in INT_COLUMNS:
            return pa.int64()
        if c in FLOAT_COLUMNS:
            return pa.float64()
        if c in BOOL_COLUMNS or c.startswith("refused_"):
            return pa.bool_()
        return pa.string()

    cols = [*LEADING, *(f"refused_{n}" for n in detector_names), *TRAILING]
    return pa.schema([(c, typ(c)) for c in cols])


class _Joiner:
    """Candidate questions by (eval type, target), md5-keyed, with their concept and relation."""

    def __init__(self, bench):
        self.bench = bench
        self.cache: dict[tuple[str, str], dict[str, list[tuple[str, str, str]]]] = {}
        self.by_pair = {(c.relation, "#".join(c.constituents)): c.id for c in bench.compositions}

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


_STATE: dict[str, Any] = {}


def _init_worker(bench, versions: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _STATE.clear()
    detectors = detector_functions(bench)
    from workbench.scoring import detectors as registry

    # the registry's own ``phrase`` is detect_refusal(...).refused: read it off the phrase
    # decision the row keeps anyway instead of running the rules twice
    shared = detectors.get("phrase") is getattr(registry, "DETECTORS", {}).get("phrase", False)
    _STATE.update(
        bench=bench,
        joiner=_Joiner(bench),
        detectors=detectors,
        versions=versions,
        phrase_shared=shared,
    )


def detector_functions(bench=None) -> dict:
    """The registry's detectors, ``{name: fn(text, question)}`` (``detectors_for(bench)`` where
    the registry has it)."""
    from workbench.scoring import detectors as registry

    make = getattr(registry, "detectors_for", None)
    return dict(make(bench)) if make is not None else dict(registry.DETECTORS)


def _iter_records(partition: str, data: dict):
    """(seed, relation, concept key, instance id, record) in file order."""
    for seed, per_seed in data.items():
        if partition == "compositions":
            for relation, per_rel in per_seed.items():
                if not isinstance(per_rel, dict):
                    raise SelectResultsError(f"seed {seed}: relation {relation!r} is not an object")
                for key, recs in per_rel.items():
                    if not isinstance(recs, dict):
                        raise SelectResultsError(
                            f"seed {seed}: {relation!r}/{key!r} is not an object"
                        )
                    yield seed, relation, key, recs
        else:
            for key, recs in per_seed.items():
                if not isinstance(recs, dict):
                    raise SelectResultsError(f"seed {seed}: concept {key!r} is not an object")
                yield seed, None, key, recs


def import_file(task: dict) -> dict:
    """Turn one results file into a parquet chunk (in a worker); returns its counts, or
    ``{"error": reason}`` when the file cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    start = time.time()
    f = ResultFile(**task["file"])
    try:
        data = read_results(Path(task["path"]))
    except SelectResultsError as e:
        return {"path": f.relpath, "error": str(e)}
    sch = schema(list(_STATE["detectors"]))
    cols: dict[str, list] = {c: [] for c in sch.names}
    fam = technique_family(f.select_technique)
    common = {
        "run": task["run"],
        "model": f.model,
        "model_id": f.model_id,
        "revision": None,
        "technique": f.technique,
        "technique_nature": _NATURE.get(fam),
        "technique_params": json.dumps({"select_technique": f.select_technique}),
        "config_hash": task["key"],
        "versions": _STATE["versions"],
        "cell_seconds": None,
        "sample": 0,
        "n_tokens": None,
        "finish_reason": None,
        "logprob": None,
        "gate_fired": None,
        "eval_type": f.eval_type,
        "partition": f.partition,
        "select_technique": f.select_technique,
        "select_model": f.model_dir,
        "source_file": f.relpath,
        "source_sha256": task["sha256"],
    }
    counts = {"unjoined": 0, "ambiguous": 0, "unknown_targets": 0, "id_mismatch": 0}
    try:
        _rows(f, data, cols, counts, common)
    except SelectResultsError as e:
        return {"path": f.relpath, "error": str(e)}
    table = pa.Table.from_pydict(cols, schema=sch)
    meta = {
        "rows": table.num_rows,
        **counts,
        "path": f.relpath,
        "sha256": task["sha256"],
        "seconds": round(time.time() - start, 2),
    }
    table = table.replace_schema_metadata({b"workbench_import": json.dumps(meta).encode()})
    out = Path(task["chunk"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp.{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
    return meta


def _rows(f: ResultFile, data: dict, cols: dict, counts: dict, common: dict) -> None:
    """Append one file's rows to ``cols`` (column lists), counting joins in ``counts``."""
    from workbench.scoring.phrases import detect_refusal

    memo: dict[
        tuple[str, str | None], tuple
    ] = {}  # (text, question) -> decisions: repeats are common

    bench, joiner, detectors = _STATE["bench"], _STATE["joiner"], _STATE["detectors"]
    shared = _STATE["phrase_shared"]
    names = list(detectors)
    for seed, relation, key, recs in _iter_records(f.partition, data):
        try:
            seed_value = int(seed)
        except ValueError:
            raise SelectResultsError(f"seed key {seed!r} is not an integer") from None
        target, known = joiner.target(f.partition, relation, key)
        if known:
            tax = bench.taxonomy_of(target)
            c = tax[target]
            tinfo = {
                "target_name": c.name,
                "target_kind": "composition" if c.kind == "composition" else "atomic",
                "target_level": tax.level(target),
                "target_root": tax[tax.root_of(target)].name,
            }
            cands = joiner.candidates(f.eval_type, target)
        else:
            tinfo = {
                "target_name": None,
                "target_kind": "composition" if relation else "atomic",
                "target_level": None,
                "target_root": None,
            }
            cands = {}
        for index, (iid, rec) in enumerate(recs.items()):
            rec = rec if isinstance(rec, dict) else {}
            if rec.get("id") not in (None, iid):
                counts["id_mismatch"] += 1
            hits = cands.get(iid, [])
            if not known:
                counts["unknown_targets"] += 1
            elif not hits:
                counts["unjoined"] += 1
            if len({h[0] for h in hits}) > 1:
                counts["ambiguous"] += 1
            qc, question, rel = hits[0] if hits else (None, None, None)
            resp = rec.get("response")
            complete = None
            if isinstance(resp, dict):  # chain-of-thought: the extracted answer is the response
                complete = resp.get("complete")
                resp = resp.get("answer")
            resp = None if resp is None else str(resp)
            text = resp or ""
            mk = (text, question)
            if mk not in memo:
                ph = detect_refusal(text, question=question)
                memo[mk] = (
                    tuple(
                        ph.refused if n == "phrase" and shared else bool(fn(text, question))
                        for n, fn in detectors.items()
                    ),
                    ph,
                )
            decisions, ph = memo[mk]
            row = {
                **common,
                **tinfo,
                "target": target,
                "seed": seed_value,
                "question_concept": qc,
                "relation": rel,
                "question_index": index,
                "question": question,
                "response": resp,
                "phrase_partial": ph.partial,
                "phrase_kind": ph.kind,
                "phrase_match": ph.matched,
                "select_relation": relation,
                "select_concept": key,
                "instance_id": iid,
                "joined": bool(hits),
                "response_complete": None if complete is None else str(complete),
            }
            for n, d in zip(names, decisions):
                row[f"refused_{n}"] = d
            refusal = rec.get("refusal")
            for k, col in SELECT_FLAGS.items():
                row[col] = _flag(refusal, k)
            for c in cols:
                cols[c].append(row.get(c))


def chunk_meta(path: Path) -> dict:
    import pyarrow.parquet as pq

    md = pq.read_schema(path).metadata or {}
    return json.loads(md.get(b"workbench_import", b"{}"))


def package_versions() -> str:
    import platform
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("abstention-workbench", "pandas", "pyarrow", "rapidfuzz"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return json.dumps(out, sort_keys=True)


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


# -- the import -----------------------------------------------------------------------------------
def import_select_results(
    release_dir: str | os.PathLike,
    bench,
    run_name: str = "select-release",
    root: str | os.PathLike | None = None,
    models: list[str] | None = None,
    progress: bool = True,
    workers: int | None = None,
    allow_partial: bool = False,
) -> ImportReport:
    """Import SELECT's released results into ``<root>/<run_name>/results.parquet``.

    Args:
        release_dir: a clone of SELECT's repository (or its release) with ``results/``.
        bench: the benchmark imported from the same release (``python -m workbench.taxonomy
            import-select``), or its directory.
        run_name: the run's folder; ``root`` defaults to :func:`workbench.paths.runs_root`.
        models: SELECT aliases, model ids or folder names to import (default: all).
        progress: print a line per file.
        workers: processes scoring files (default: up to 2, ``$OMP_NUM_THREADS`` each set to 1).
        allow_partial: import what is there when files are absent or unreadable (else a
            :class:`~workbench.releases.ReleaseError` naming them, before any row is written);
            every row's ``release_load`` says which.

    A rerun skips files whose chunk exists (same content, same settings) and rebuilds
    ``results.parquet`` from the chunks; absent and unreadable files are in the report and in
    ``missing_files.json``.
    """
    import pyarrow.parquet as pq

    from workbench.paths import runs_root

    start = time.time()
    if not hasattr(bench, "near_concepts"):  # a benchmark directory
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark(bench)
    if not run_name or any(c in run_name for c in "/\\") or run_name.startswith("."):
        raise SelectResultsError(f"run_name must be a plain folder name, got {run_name!r}")
    rel_root = release_root(release_dir)
    files, notes = expected_files(rel_root, models)
    run_dir = Path(root) if root is not None else runs_root()
    run_dir = run_dir / run_name
    chunks = run_dir / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    for stale in chunks.rglob("*.tmp.*"):
        stale.unlink(missing_ok=True)
    names = list(detector_functions(bench))
    settings = {"importer": IMPORTER_VERSION, "detectors": names, "bench": bench.content_hash()}
    report = ImportReport(run_dir, str(rel_root), expected=len(files), detectors=names, notes=notes)
    say = (lambda s: print(s, flush=True)) if progress else (lambda s: None)

    todo, done = [], []  # (file, path, sha, chunk, key)
    for f in files:
        path = rel_root / f.relpath
        if not path.is_file():
            report.absent.append(f.relpath)
            continue
        raw = path.read_bytes()
        if is_lfs_pointer(raw):
            report.unreadable.append({"path": f.relpath, "reason": LFS_REASON})
            continue
        sha = _sha256(raw)
        key = hashlib.sha256(
            json.dumps(
                {**settings, "source": sha, "model": f.model, "model_id": f.model_id},
                sort_keys=True,
            ).encode()
        ).hexdigest()[:16]
        chunk = (
            chunks
            / f.partition
            / f.model_dir
            / f.eval_type
            / f"{f.select_technique}.{sha[:16]}.{key}.parquet"
        )
        (done if chunk.is_file() else todo).append((f, path, sha, chunk, key))
    for p in report.absent:
        say(f"absent: {p}")
    for u in report.unreadable:
        say(f"unreadable: {u['path']}: {u['reason']}")
    _check_whole(report, rel_root, allow_partial)  # before scoring: absent files and LFS pointers
    total = len(todo) + len(done)
    metas: dict[str, dict] = {}
    for i, (f, _, sha, chunk, _) in enumerate(done, 1):
        m = chunk_meta(chunk)
        metas[f.relpath] = {**m, "resumed": True}
        say(f"[{i}/{total}] {f.relpath}: {m.get('rows', '?')} rows (done before)")

    versions = package_versions()
    tasks = [
        {
            "file": asdict(f),
            "path": str(path),
            "sha256": sha,
            "chunk": str(chunk),
            "key": key,
            "run": run_name,
        }
        for f, path, sha, chunk, key in todo
    ]
    tasks.sort(key=lambda t: -os.path.getsize(t["path"]))  # largest first: workers end together
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), len(tasks) or 1))
    k = len(done)

    def finished(meta: dict) -> None:
        nonlocal k
        k += 1
        if "error" in meta:
            report.unreadable.append({"path": meta["path"], "reason": meta["error"]})
            say(f"[{k}/{total}] {meta['path']}: UNREADABLE: {meta['error']}")
        else:
            metas[meta["path"]] = {**meta, "resumed": False}
            say(
                f"[{k}/{total}] {meta['path']}: {meta['rows']} rows, {meta['unjoined']} unjoined, "
                f"{meta['seconds']:.1f}s"
            )

    if n_workers == 1 or len(tasks) <= 1:
        _init_worker(bench, versions)
        try:
            for t in tasks:
                finished(import_file(t))
        finally:
            _STATE.clear()
    elif tasks:
        with ProcessPoolExecutor(
            n_workers, initializer=_init_worker, initargs=(bench, versions)
        ) as pool:
            futures = [pool.submit(import_file, t) for t in tasks]
            try:
                for fut in as_completed(futures):
                    finished(fut.result())
            except BaseException:
                for fu in futures:
                    fu.cancel()
                raise

    _check_whole(report, rel_root, allow_partial)  # files that turned out unreadable
    # results.parquet from the chunks of the files read, each exactly once
    order = {f.relpath: i for i, f in enumerate(files)}
    good = sorted(
        ((f, chunk) for f, _, _, chunk, _ in done + todo if f.relpath in metas),
        key=lambda x: order[x[0].relpath],
    )
    import pyarrow as pa

    from workbench.releases import RELEASE_COLUMN

    sch = schema(names)
    tmp = run_dir / "results.parquet.tmp"
    with pq.ParquetWriter(tmp, sch.append(pa.field(RELEASE_COLUMN, pa.string()))) as writer:
        for f, chunk in good:
            table = pq.read_table(chunk)
            if table.schema.remove_metadata() != sch:
                table = table.select(sch.names).cast(sch)
            # the load's record is the import's, not the chunk's: chunks stay reusable
            table = table.append_column(
                RELEASE_COLUMN, pa.array([report.release_load] * table.num_rows, pa.string())
            )
            writer.write_table(table.replace_schema_metadata(None))
    os.replace(tmp, run_dir / "results.parquet")

    for f, _ in good:
        m = metas[f.relpath]
        report.read.append(
            {
                k2: m.get(k2)
                for k2 in (
                    "path",
                    "sha256",
                    "rows",
                    "unjoined",
                    "ambiguous",
                    "unknown_targets",
                    "id_mismatch",
                    "seconds",
                    "resumed",
                )
            }
        )
        report.rows += m.get("rows", 0)
        report.unjoined += m.get("unjoined", 0)
        report.ambiguous += m.get("ambiguous", 0)
        report.unknown_targets += m.get("unknown_targets", 0)
    report.seconds = round(time.time() - start, 2)
    _write_json(
        run_dir / "missing_files.json",
        {"expected": report.expected, "absent": report.absent, "unreadable": report.unreadable},
    )
    _write_json(run_dir / "import_report.json", {**report.to_dict(), "settings": settings})
    return report


def _check_whole(report: ImportReport, root: Path, allow_partial: bool) -> None:
    """Set ``report.release_load``: "whole", or with ``allow_partial`` "partial: ..." naming
    the absent and unreadable files; without it a :class:`ReleaseError` in one line."""
    from workbench.releases import RELEASE_COLUMN, ReleaseError

    if not report.absent and not report.unreadable:
        report.release_load = "whole"
        return

    def some(paths: list[str]) -> str:
        return ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")

    got = report.expected - len(report.absent) - len(report.unreadable)
    parts = [f"{got:,} of {report.expected:,} files"]
    if report.absent:
        parts.append(f"absent {some(report.absent)}")
    if report.unreadable:
        parts.append(
            "unreadable " + some([f"{u['path']} ({u['reason']})" for u in report.unreadable])
        )
    summary = "; ".join(parts)
    if allow_partial:
        report.release_load = f"partial: {summary}"
        return
    raise ReleaseError(
        f"SELECT's results at {root} are incomplete against what its config/ "
        f"lists: {summary}; get the whole release, or pass allow_partial=True "
        f"(--allow-partial) to import what is there, recorded in every row's "
        f"{RELEASE_COLUMN}"
    )


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def select_results_table(results: str | os.PathLike, detector: str = "select_flag_heuristic"):
    """SELECT's aggregation (:func:`workbench.scoring.metrics.select_table`) of an imported run's
    ``results.parquet``, reading only the columns it needs."""
    import pandas as pd

    from workbench.scoring.metrics import select_table

    path = Path(results)
    path = path / "results.parquet" if path.is_dir() else path
    cols = ["target_kind", "model", "technique", "eval_type", "target", "seed", detector]
    try:
        rows = pd.read_parquet(path, columns=cols)
    except (OSError, KeyError, ValueError) as e:
        raise SelectResultsError(f"{path}: cannot read {detector!r} and its keys ({e})") from None
    return select_table(rows, detector)
