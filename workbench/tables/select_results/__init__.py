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
settings, so an interrupted import resumes where it stopped (a damaged chunk is set aside and its
file imported again), and ``results.parquet`` is rebuilt from the chunks. Keys, finished chunks,
durable writes, the process pool and the progress line are :mod:`workbench.resumable`'s; the
import keeps its chunk layout and its per-file counts (the chunk's metadata), and its workers
write their chunks themselves (the rows never travel back to this process).

The package's modules, one job each:

- ``release``: the release's results files (layout, aliases) and the set it should hold;
- ``reading``: reading one file (its failures named) and walking its nested records;
- ``join``: joining a record back to the benchmark's target and candidate questions;
- ``schema``: the imported rows' columns and pyarrow schema;
- ``rows``: turning one file into rows and a parquet chunk (the worker's job);
- ``report``: the import's report and whether the release was whole;
- ``tables``: SELECT's aggregation of an imported run.

The import itself (:func:`import_select_results`) is here: it calls ``import_file`` through
this package's namespace, where it can be replaced.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.resumable import Progress, run_local, run_pool, run_units, unit_done, unit_key
from workbench.tables.select_results.reading import read_results
from workbench.tables.select_results.release import (
    API_PROVIDERS,
    EVAL_TYPES,
    LFS_REASON,
    PARTITIONS,
    TECHNIQUES,
    WHITE_BOX_FAMILIES,
    ResultFile,
    SelectResultsError,
    _head,
    expected_files,
    model_dir_name,
    ran_for,
    release_root,
    technique_family,
)
from workbench.tables.select_results.report import ImportReport, _check_whole
from workbench.tables.select_results.rows import (
    _STATE,
    IMPORTER_VERSION,
    _init_worker,
    chunk_meta,
    detector_functions,
    import_file,
)
from workbench.tables.select_results.schema import (
    BOOL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    LEADING,
    SELECT_FLAGS,
    STRING_COLUMNS,
    TRAILING,
    schema,
)
from workbench.tables.select_results.tables import (
    check_detector,
    detector_columns,
    select_results_table,
)
from workbench.taxonomy.select_format.protocol import is_lfs_pointer

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

__all__ = [
    "API_PROVIDERS",
    "BOOL_COLUMNS",
    "EVAL_TYPES",
    "FLOAT_COLUMNS",
    "IMPORTER_VERSION",
    "INT_COLUMNS",
    "LEADING",
    "LFS_REASON",
    "PARTITIONS",
    "SELECT_FLAGS",
    "STRING_COLUMNS",
    "TECHNIQUES",
    "TRAILING",
    "WHITE_BOX_FAMILIES",
    "ImportReport",
    "ResultFile",
    "SelectResultsError",
    "check_detector",
    "check_targets",
    "chunk_meta",
    "detector_columns",
    "detector_functions",
    "expected_files",
    "import_file",
    "import_select_results",
    "model_dir_name",
    "package_versions",
    "ran_for",
    "read_results",
    "release_root",
    "schema",
    "select_results_table",
    "technique_family",
]


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


def import_select_results(
    release_dir: str | os.PathLike,
    bench: Benchmark | str | os.PathLike,
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
        bench: the benchmark imported from the same release (``python -m workbench taxonomy
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
    ``missing_files.json``. Before anything is written: a benchmark that holds none of the
    release's targets, a run folder that cannot be written, or another import of the same run
    (its lock) is one line.
    """
    from workbench.paths import check_run_name, check_writable, runs_root
    from workbench.runlock import new_run

    start = time.time()
    if isinstance(bench, (str, os.PathLike)):  # a benchmark directory
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark(bench)
    check_run_name(run_name)
    rel_root = release_root(release_dir)
    files, notes = expected_files(rel_root, models, allow_partial)
    check_targets(rel_root, files, bench)
    run_dir = check_writable(
        (Path(root) if root is not None else runs_root()) / run_name, "the run folder"
    )
    survey = ImportReport(run_dir, str(rel_root), expected=len(files), notes=notes)
    for f in files:  # absent files and LFS pointers: before the run folder is made
        path = rel_root / f.relpath
        if not path.is_file():
            survey.absent.append(f.relpath)
        elif is_lfs_pointer(_head(path)):
            survey.unreadable.append({"path": f.relpath, "reason": LFS_REASON})
    if (survey.absent or survey.unreadable) and not allow_partial and progress:
        print(survey.missing_lines(), flush=True)  # all of them, once: the error names four
    _check_whole(survey, rel_root, allow_partial)
    with new_run(run_dir, "import-select-results", kind="select-results"):
        return _import(
            rel_root,
            files,
            survey,
            bench,
            run_dir,
            run_name,
            progress,
            workers,
            allow_partial,
            start,
        )


def check_targets(rel_root: Path, files: list[ResultFile], bench: Benchmark) -> None:
    """Raise SelectResultsError when the benchmark holds none of the targets of the release's
    smallest readable file of each partition: the benchmark of another release (or none
    imported from it), found before anything is imported, not as a table of unknown rows."""
    from workbench.tables.select_results.join import _Joiner
    from workbench.tables.select_results.reading import _iter_records

    joiner = _Joiner(bench)
    seen: list[str] = []
    for partition in PARTITIONS:
        paths = [rel_root / f.relpath for f in files if f.partition == partition]
        for path in sorted((p for p in paths if p.is_file()), key=lambda p: p.stat().st_size):
            try:
                data = read_results(path)
                keys = [(rel, key) for _, rel, key, _ in _iter_records(partition, data)]
            except SelectResultsError:
                continue  # unreadable files are the import's to report
            for relation, key in keys:
                target, known = joiner.target(partition, relation, key)
                if known:
                    return
                seen.append(target)
            if keys:
                break
    if seen:
        name = (getattr(bench, "manifest", None) or {}).get("name", "given")
        raise SelectResultsError(
            f"the benchmark {name!r} holds none of the release's targets ({len(set(seen))} "
            f"read, e.g. {seen[0]!r}): give the one imported from this release (python -m "
            f"workbench taxonomy import-select {rel_root} --out DIR)"
        )


def _import(
    rel_root: Path,
    files: list[ResultFile],
    report: ImportReport,
    bench: Benchmark,
    run_dir: Path,
    run_name: str,
    progress: bool,
    workers: int | None,
    allow_partial: bool,
    start: float,
) -> ImportReport:
    """The import proper, in a run folder this process holds (:func:`import_select_results`),
    of the files ``report`` does not list as absent or unreadable."""
    import pyarrow.parquet as pq

    from workbench.paths import atomic_file

    chunks = run_dir / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    for stale in [*chunks.rglob("*.tmp.*"), *chunks.rglob(".*.tmp")]:  # a killed import's
        stale.unlink(missing_ok=True)
    names = list(detector_functions(bench))
    settings = {"importer": IMPORTER_VERSION, "detectors": names, "bench": bench.content_hash()}
    report.detectors = names
    say = (lambda s: print(s, flush=True)) if progress else (lambda s: None)

    skipped = set(report.absent) | {u["path"] for u in report.unreadable}
    todo: list[tuple] = []  # (file, path, sha, chunk, key)
    done: list[tuple] = []
    for f in files:
        if f.relpath in skipped:
            continue
        path = rel_root / f.relpath
        raw = path.read_bytes()
        sha = _sha256(raw)
        key = unit_key({**settings, "source": sha, "model": f.model, "model_id": f.model_id})
        chunk = (
            chunks
            / f.partition
            / f.model_dir
            / f.eval_type
            / f"{f.select_technique}.{sha[:16]}.{key}.parquet"
        )
        whole = unit_done(chunk, then="that file is imported again")
        (done if whole else todo).append((f, path, sha, chunk, key))
    total = len(todo) + len(done)
    metas: dict[str, dict] = {}
    for i, (f, _, _sha, chunk, _) in enumerate(done, 1):
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
    count = Progress(total, done=len(done))

    def finished(meta: dict) -> None:
        count.finished()
        k = count.done
        if "error" in meta:
            report.unreadable.append({"path": meta["path"], "reason": meta["error"]})
            say(f"[{k}/{total}] {meta['path']}: UNREADABLE: {meta['error']}")
        else:
            metas[meta["path"]] = {**meta, "resumed": False}
            say(
                count.line(
                    f"[{k}/{total}] {meta['path']}: {meta['rows']} rows, "
                    f"{meta['unjoined']} unjoined, {meta['seconds']:.1f}s"
                )
            )

    # each worker writes its file's chunk itself (import_file), the rows with their counts
    if n_workers == 1 or len(tasks) <= 1:
        _init_worker(bench, versions)
        try:
            # import_file through this namespace, where it can be replaced
            for result in run_units(tasks, lambda ts: run_local(ts, import_file, catch=False)):
                finished(result.rows)
        finally:
            _STATE.clear()
    elif tasks:
        pool = functools.partial(
            run_pool,
            compute=import_file,
            workers=n_workers,
            initializer=_init_worker,
            initargs=(bench, versions),
        )
        for result in run_units(tasks, pool):
            finished(result.rows)

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
    with (
        atomic_file(run_dir / "results.parquet") as tmp,
        pq.ParquetWriter(tmp, sch.append(pa.field(RELEASE_COLUMN, pa.string()))) as writer,
    ):
        for _f, chunk in good:
            table = pq.read_table(chunk)
            if table.schema.remove_metadata() != sch:
                table = table.select(sch.names).cast(sch)
            # the load's record is the import's, not the chunk's: chunks stay reusable
            table = table.append_column(
                RELEASE_COLUMN, pa.array([report.release_load] * table.num_rows, pa.string())
            )
            writer.write_table(table.replace_schema_metadata(None))

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


def _write_json(path: Path, obj: Any) -> None:
    from workbench.paths import write_text_atomic

    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
