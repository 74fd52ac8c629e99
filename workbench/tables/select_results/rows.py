"""Turning one results file into rows, in a worker process: each record joined to its
question, every registered detector's decision, SELECT's stored flags and provenance, written
atomically as a parquet chunk whose metadata holds the file's counts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.tables.select_results.join import _Joiner
from workbench.tables.select_results.reading import _iter_records, read_results
from workbench.tables.select_results.release import ResultFile, SelectResultsError, technique_family
from workbench.tables.select_results.schema import SELECT_FLAGS, schema

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

_NATURE = {"prompt": "inference-time", "steering": "inference-time", "tuning": "fine-tuning"}
#: Bumped when the rows an import writes change: older chunks are then rebuilt.
IMPORTER_VERSION = 1


def _flag(refusal: Any, key: str) -> bool | None:
    v = refusal.get(key) if isinstance(refusal, dict) else None
    if isinstance(v, dict):  # a detector that kept its reasons: {"decision": ...}
        v = v.get("decision")
    return None if v is None else bool(v)


_STATE: dict[str, Any] = {}


def _init_worker(bench: Benchmark, versions: str) -> None:
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


def detector_functions(bench: Benchmark | None = None) -> dict:
    """The registry's detectors, ``{name: fn(text, question)}`` (``detectors_for(bench)`` where
    the registry has it)."""
    from workbench.scoring import detectors as registry

    make = getattr(registry, "detectors_for", None)
    return dict(make(bench)) if make is not None else dict(registry.DETECTORS)


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
    from workbench.paths import atomic_file

    with atomic_file(task["chunk"]) as tmp:
        pq.write_table(table, tmp)
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
