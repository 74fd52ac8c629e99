"""Run an experiment grid and write one tidy row per generated answer.

Rows: (model, technique, target, question, relation to target, sample) with the response, every
detector's decision and provenance (cell hash, model id and revision, seed, package versions).
Work is done cell by cell (model x technique x target x seed); each finished cell is written
atomically to ``runs/<name>/cells/<cell hash>.jsonl``, so an interrupted run, restarted, does only
the missing cells, and a cell whose configuration changed gets a new hash (never stale rows).
``results.parquet`` is rebuilt from the current grid's cells after every run. Keys, finished
cells, durable writes, execution and the progress line are :mod:`workbench.resumable`'s; the
grid keeps what a cell is, its whole-file check (a row per question and sample), its errors
file, its stops (an endpoint down, the time budget) and its executors.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from workbench.errors import ConfigError, WorkbenchError
from workbench.experiments.config import ExperimentConfig, system_prompt
from workbench.generation import GenerationConfig
from workbench.models.numerics import record_run_numerics
from workbench.paths import atomic_file, check_writable, runs_root, write_text_atomic
from workbench.progress import tqdm
from workbench.resumable import (
    Progress,
    jsonl_problem,
    pending,
    run_units,
    unit_done,
    unit_key,
    write_rows,
)
from workbench.scoring.detectors import detector_decisions, detectors_for
from workbench.scoring.phrases import detect_refusal, refusal_settled
from workbench.techniques.data import LabelledQuestion, question_pool, seeded_rng, spread_questions

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

#: What every row of a cell's file holds: which answer of the grid it is.
CELL_KEYS = frozenset({"model", "technique", "target", "seed", "question_index", "sample"})


class CellFailures(WorkbenchError):
    """Some cells of a grid failed (the others finished and their rows are kept)."""

    def __init__(self, failures: list[dict], path: Path, total: int):
        self.failures = failures
        lines = "; ".join(
            f"{f['technique']} / {f['target']} (seed {f['seed']}): {f['error']}: "
            f"{f['message'][:200]}"
            for f in failures
        )
        super().__init__(f"{len(failures)} of {total} cells failed (details in {path}): {lines}")


@dataclass(frozen=True)
class Cell:
    model: str
    technique: str
    target: str
    seed: int


def evaluation_questions(
    bench: Benchmark,
    target: str,
    n_target: int,
    n_descendant: int,
    n_specificity: int,
    seed: int = 0,
    n_constituent: int = 0,
    n_composition: int = 0,
    n_unrelated: int = 0,
) -> list[LabelledQuestion]:
    """The held-out questions a cell is scored on: the target's eval questions (abstention), its
    descendants' (generalization), SELECT's specificity set's (ancestors and siblings, or other
    relations' compositions: specificity), far concepts' (outside all of those: far
    specificity); for a composition, optionally its constituents' (it should answer them); for
    an atomic concept, optionally the compositions it is part of (it should abstain).

    Evaluation questions the benchmark excludes (``Benchmark.excluded_eval``: also some
    concept's training question) are never drawn; others fill their places."""
    tax = bench.taxonomy_of(target)
    rng = seeded_rng(seed, "eval:" + target)
    seen = getattr(bench, "excluded_eval", None) or frozenset()

    def pool(ids: list[str], relation: str) -> list[LabelledQuestion]:
        return [q for q in question_pool(bench, ids, "eval", relation) if q.question not in seen]

    out = [
        LabelledQuestion(q, target, "target")
        for q in [q for q in bench.questions[target].eval if q not in seen][:n_target]
    ]
    out += spread_questions(pool(tax.descendants(target), "descendant"), n_descendant, rng)
    near = bench.near_concepts(target)
    spec = [
        LabelledQuestion(q.question, q.concept_id, near[q.concept_id])
        for q in pool(list(near), "near")
    ]
    out += spread_questions(spec, n_specificity, rng)
    if n_unrelated:
        excluded = set(tax.subtree(target)) | set(tax.ancestors(target)) | set(near)
        far = sorted(c for c in tax.concepts if c not in excluded)
        far = rng.sample(far, min(len(far), n_unrelated))
        out += spread_questions(pool(far, "unrelated"), n_unrelated, rng)
    concept = tax[target]
    if n_constituent and concept.kind == "composition":
        out += spread_questions(pool(list(concept.constituents), "constituent"), n_constituent, rng)
    if n_composition and concept.kind != "composition":
        holders = [c.id for c in bench.compositions if target in c.constituents]
        out += spread_questions(pool(holders, "composition"), n_composition, rng)
    return out


def select_evaluation_questions(
    bench: Benchmark, target: str, n_target: int, n_descendant: int, n_specificity: int, seed: int
) -> list[LabelledQuestion]:
    """SELECT's evaluation questions for ``target`` (``workbench.select.sampling``), each group
    cut to its first ``n_*`` questions, labelled with their relation to the target."""
    from workbench.select.sampling import select_sample

    s = select_sample(bench, target, seed)
    near = bench.near_concepts(target)
    out = [LabelledQuestion(q, c, "target") for q, c in s.target[:n_target]]
    out += [LabelledQuestion(q, c, "descendant") for q, c in s.generalization[:n_descendant]]
    out += [LabelledQuestion(q, c, near[c]) for q, c in s.specificity[:n_specificity]]
    return out


def package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "peft", "trl", "abstention-workbench"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def _worker_runner(config: dict, bench: Benchmark, store_root: str | None) -> Runner:
    from workbench.techniques import ArtifactStore

    store = ArtifactStore(store_root) if store_root else None
    return Runner(
        ExperimentConfig.from_dict(config), bench=bench, progress=False, store=store, quiet=True
    )


class Runner:
    """Runs an :class:`ExperimentConfig`; ``run()`` returns the tidy results table."""

    def __init__(
        self,
        config: ExperimentConfig,
        root: str | os.PathLike | None = None,
        bench: Benchmark | None = None,
        progress: bool = True,
        store=None,
        executor="local",
        quiet: bool = False,
        time_budget: float | None = None,
        **executor_options,
    ):
        """``executor``: ``local`` (this process) or ``ray`` with
        :class:`~workbench.experiments.executors.RayExecutor`'s options (``address``,
        ``workers``, ``resources_per_worker``, ``threads``, ``store``, ``imports``).
        ``time_budget``: seconds the grid may run; past them it stops after the cell that
        finishes next (what finished is kept, and the same grid goes on from there)."""
        if time_budget is not None and not time_budget > 0:
            raise ConfigError(f"the grid's time budget must be above 0 seconds, got {time_budget}")
        from workbench.experiments.executors import make_executor

        self.config = config
        self.root = Path(root) if root else runs_root()
        self.run_dir = self.root / config.name
        self._bench = bench
        self.progress = progress
        self.store = store
        self.executor = make_executor(executor, **executor_options)
        self.quiet = quiet
        self.time_budget = time_budget
        self._progress: Progress | None = None

    @property
    def bench(self) -> Benchmark:
        """The grid's benchmark (the config's ``data_dir``, loaded on first use)."""
        if self._bench is None:
            from workbench.taxonomy import load_benchmark

            self._bench = load_benchmark(self.config.data_dir)
        return self._bench

    def worker_factory(self) -> Callable:
        """What a remote worker calls with ``(bench, store_root)`` to build a quiet Runner of
        this grid (picklable: a module-level function and the config as a dict)."""
        return functools.partial(_worker_runner, self.config.to_dict())

    # -- grid -----------------------------------------------------------------------------------
    def cells(self) -> list[Cell]:
        c = self.config
        assert c.seeds is not None  # the config sets it on construction
        return [
            Cell(m, t, g, s)
            for m in c.models
            for g in c.targets
            for s in c.seeds
            for t in c.techniques
            if s in c.seeds_for(t)
        ] + [
            Cell(m, t, g, s)
            for m in c.models
            for g in c.targets
            for t in c.techniques
            for s in c.seeds_for(t)
            if s not in c.seeds
        ]

    def _data_hash(self) -> str:
        return self.bench.content_hash()[:16]

    def cell_hash(self, cell: Cell) -> str:
        return unit_key(
            self.config.cell_config(
                cell.model, cell.technique, cell.target, cell.seed, self._data_hash()
            )
        )

    def cell_path(self, cell: Cell) -> Path:
        return self.run_dir / "cells" / f"{self.cell_hash(cell)}.jsonl"

    def pending(self) -> list[Cell]:
        """The cells without a whole result file (a damaged one is set aside: see
        :meth:`cell_done`)."""
        return pending(self.cells(), self.cell_done)

    def cell_done(self, cell: Cell) -> bool:
        """Whether ``cell``'s result file is there and whole. One that is empty (a cell with
        questions), cut or not JSON, which a crash of an older version could leave, is renamed
        to ``<name>.damaged`` with one line naming it, and the cell counts as not done."""

        def problem(path: Path) -> str | None:
            why = jsonl_problem(path)
            if why and why.startswith("it is empty") and not self.questions(cell):
                return None  # a cell with no questions has no rows
            if why is None:  # whole: a row per question and sample, each keyed
                rows = [json.loads(line) for line in path.read_text().splitlines()]
                want = len(self.questions(cell)) * self.config.num_samples
                if len(rows) != want:
                    return f"it holds {len(rows)} rows, not the cell's {want}"
                keyless = next((n for n, r in enumerate(rows, 1) if CELL_KEYS - set(r)), None)
                if keyless is not None:
                    return f"row {keyless} lacks {', '.join(sorted(CELL_KEYS - set(rows[keyless - 1])))}"
            return why

        return unit_done(self.cell_path(cell), problem, "that cell runs again")

    # -- running --------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Load the benchmark, validate the config and check that the run folder can be
        written (before any model loads)."""
        from workbench.runlock import check_run_kind

        self.config.check_against(self.bench)
        check_run_kind(self.run_dir, "grid")
        check_writable(self.run_dir, "the run folder")

    def run(self) -> pd.DataFrame:
        """Run the pending cells (on the runner's executor) and return the grid's rows.

        A cell that fails does not stop the others: its error is written to
        ``runs/<name>/errors.jsonl`` and, once every other cell is done and the results are
        written, :class:`CellFailures` is raised naming each failed cell. An endpoint that
        cannot be reached (:class:`~workbench.backends.openai_api.EndpointDown`) stops the grid
        at once instead: every cell after it would wait for it in vain. The run folder is
        this process's while it runs (a second grid on it is one line naming this one).
        """
        from workbench.runlock import run_lock

        self.prepare()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with run_lock(self.run_dir, f"grid {self.config.name}", kind="grid"):
            return self._run()

    def _run(self) -> pd.DataFrame:
        from workbench.experiments.executors import cell_cost

        write_text_atomic(self.run_dir / "config.json", json.dumps(self.config.to_dict(), indent=2))
        todo = self.pending()
        errors_path = self.run_dir / "errors.jsonl"
        errors_path.unlink(missing_ok=True)
        failures: list[dict] = []
        total = len(self.cells())
        progress = self._progress = Progress(
            total, done=total - len(todo), cost=sum(map(cell_cost, todo))
        )
        bar = tqdm(
            total=total,
            initial=total - len(todo),
            desc="cells",
            disable=not self.progress or self.quiet,
        )
        from workbench.backends.openai_api import EndpointDown

        stopped: EndpointDown | None = None
        spent = False
        # each cell's rows are written here, as they come, under the cell's hash
        results = run_units(
            todo,
            lambda cells: self.executor.execute(self, cells),
            lambda cell, rows: write_rows(self.cell_path(cell), rows),
        )
        try:
            for result in results:
                cell = result.unit
                if result.error is not None:
                    failures.append(self._failure(cell, result.error, result.traceback))
                    write_rows(errors_path, failures)
                self._finished(cell, result.error is None)
                bar.update(1)
                if isinstance(result.error, EndpointDown):
                    stopped = result.error
                    break
                over = self.time_budget is not None and progress.elapsed > self.time_budget
                if over and progress.done < total:
                    spent = True
                    break
        finally:
            results.close()  # an executor's workers stop too
            bar.close()
        table = self.results()
        if stopped is not None:
            done = progress.done - len(failures)
            again = "once it answers" if type(stopped) is EndpointDown else "to go on"
            raise type(stopped)(
                f"{stopped}; the grid stopped at its first cell on it ({done} of "
                f"{len(self.cells())} cells done and kept; run it again {again})"
            )
        if spent:
            from workbench.errors import Interrupted

            raise Interrupted(
                f"the grid's time budget ({self.time_budget:g} s) is spent: "
                f"{progress.done - len(failures)} of {total} cells are done and kept in "
                f"{self.run_dir}; the same grid goes on from there"
            )
        if failures:
            raise CellFailures(failures, errors_path, len(self.cells()))
        return table

    # -- progress -------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.progress and not self.quiet:
            # stdout: progress is not a warning (stderr shows pink in JupyterLab)
            print(f"[{self.config.name}] {text}", file=sys.stdout, flush=True)

    def started(self, cell: Cell) -> None:
        """Called by executors when a cell starts: one progress line (and the bar's label)."""
        p = self._progress
        self._say(
            f"cell {p.done + 1 if p else 1}/{p.total if p else '?'} started: {cell.technique} / "
            f"{self.bench.concept(cell.target).name} ({cell.model}, seed {cell.seed})"
        )

    def _finished(self, cell: Cell, ok: bool) -> None:
        from workbench.experiments.executors import cell_cost

        p = self._progress
        assert p is not None  # set by _run before any cell runs
        p.finished(cost=cell_cost(cell))
        self._say(
            p.line(
                f"cell {p.done}/{p.total} {'done' if ok else 'FAILED'}: {cell.technique} / "
                f"{self.bench.concept(cell.target).name}"
            )
        )

    def _failure(self, cell: Cell, error: BaseException, tb: str = "") -> dict:
        import traceback

        return {
            **asdict(cell),
            "config_hash": self.cell_hash(cell),
            "error": type(error).__name__,
            "message": str(error),
            "traceback": tb
            or "".join(traceback.format_exception(type(error), error, error.__traceback__)),
        }

    def run_cell(self, lm: Backend, cell: Cell) -> list[dict]:
        from workbench.techniques import get_technique

        c = self.config
        questions = self.questions(cell)
        technique = get_technique(cell.technique, **c.params_for(cell.technique))
        # the config sets these on construction
        assert c.max_new_tokens is not None and c.temperature is not None and c.top_p is not None
        gen_cfg = GenerationConfig(
            max_new_tokens=c.max_new_tokens,
            num_samples=c.num_samples,
            do_sample=c.sampled(),
            temperature=c.temperature,
            top_p=c.top_p,
            seed=cell.seed,
            batch_size=c.batch_size,
            return_logprobs=c.num_samples > 1,
            system_prompt=system_prompt(c.system_prompt, self.bench),
        )
        start = time.time()
        kwargs = {"store": self.store} if self.store is not None else {}
        with technique.prepare(lm, self.bench, cell.target, seed=cell.seed, **kwargs) as ab:
            gens = ab.generate(
                [q.question for q in questions],
                gen_cfg,
                progress=self.progress,
                stop_when=refusal_settled if c.early_stop else None,
            )
            gate = getattr(ab, "gate_decisions", None)
            votes = getattr(ab, "gate_votes", None)
        seconds = time.time() - start
        tax = self.bench.taxonomy_of(cell.target)
        target = tax[cell.target]
        common = {
            "run": c.name,
            "model": cell.model,
            "model_id": lm.model_id,
            "revision": lm.revision,
            "backend": lm.backend,
            "dtype": getattr(lm, "dtype_name", None),
            "numerics": getattr(lm, "numerics", None),
            "technique": cell.technique,
            "technique_nature": technique.nature,
            "technique_params": json.dumps(technique.params.to_dict(), sort_keys=True, default=str),
            "target": cell.target,
            "target_name": target.name,
            "target_kind": "composition" if target.kind == "composition" else "atomic",
            "target_level": tax.level(cell.target),
            "target_root": tax[tax.root_of(cell.target)].name,
            "seed": cell.seed,
            "config_hash": self.cell_hash(cell),
            "versions": json.dumps(package_versions(), sort_keys=True),
            "cell_seconds": round(seconds, 2),
            # how the published release under the benchmark loaded (workbench.releases)
            "release_load": (getattr(self.bench, "manifest", None) or {}).get("release_load"),
        }
        detectors = detectors_for(self.bench)
        rows = []
        for g in gens:
            q = questions[g.prompt_index]
            phrase = detect_refusal(g.text, question=q.question)
            rows.append(
                {
                    **common,
                    "question_concept": q.concept_id,
                    "relation": q.relation,
                    "question_index": g.prompt_index,
                    "question": q.question,
                    "sample": g.sample,
                    "response": g.text,
                    "n_tokens": g.num_tokens,
                    "finish_reason": g.finish_reason,
                    "logprob": float(sum(g.logprobs)) if g.logprobs else None,
                    **detector_decisions(g.text, q.question, detectors),
                    "phrase_partial": phrase.partial,
                    "phrase_kind": phrase.kind,
                    "phrase_match": phrase.matched,
                    "gate_fired": None if gate is None else bool(gate[g.prompt_index]),
                    "gate_votes": None if votes is None else votes[g.prompt_index],
                }
            )
            if g.cost is not None or g.cached is not None:  # an endpoint: what the answer cost
                rows[-1].update(prompt_tokens=g.prompt_tokens, cost=g.cost, cached=g.cached)
            if g.raw_text is not None:  # SELECT's CoT: the answer is scored, the reply kept
                rows[-1].update(response_complete=g.raw_text, answer_parsed=g.answer_parsed)
        return rows

    def questions(self, cell: Cell) -> list[LabelledQuestion]:
        """The evaluation questions of ``cell`` under the config's sampling (SELECT's or the
        workbench's), without those the benchmark excludes from evaluation (questions it also
        trains on)."""
        c = self.config
        # the config sets these on construction
        assert c.n_target is not None and c.n_descendant is not None
        assert c.n_specificity is not None and c.n_unrelated is not None
        counts = (c.n_target, c.n_descendant, c.n_specificity)
        qs: list[LabelledQuestion] = []
        if c.eval_sampling == "select":  # SELECT's draw of these three groups; the rest as ours
            assert c.eval_seed is not None  # set on construction
            qs = select_evaluation_questions(self.bench, cell.target, *counts, seed=c.eval_seed)
            counts = (0, 0, 0)
        qs += evaluation_questions(
            self.bench,
            cell.target,
            *counts,
            seed=cell.seed,
            n_constituent=c.n_constituent,
            n_composition=c.n_composition,
            n_unrelated=c.n_unrelated,
        )
        excluded = getattr(self.bench, "excluded_eval", None) or ()
        return [q for q in qs if q.question not in excluded]

    # -- results --------------------------------------------------------------------------------
    def results(self) -> pd.DataFrame:
        """The current grid's rows (finished cells only), also written to results.parquet."""
        frames = []
        for cell in self.cells():
            if self.cell_done(cell) and self.cell_path(cell).stat().st_size:
                frames.append(pd.read_json(self.cell_path(cell), lines=True, dtype=False))
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if not table.empty:
            key = ["model", "technique", "target", "seed", "question_index", "sample"]
            table = table.drop_duplicates(subset=key, keep="last").reset_index(drop=True)
            with atomic_file(self.run_dir / "results.parquet") as tmp:
                table.to_parquet(tmp, index=False)
            record_run_numerics(
                self.run_dir, table.get("dtype", pd.Series()), table.get("numerics", pd.Series())
            )
        return table


def run_experiment(
    config: ExperimentConfig | dict, root=None, progress: bool = True, **kwargs
) -> pd.DataFrame:
    """Convenience: run a config (object or dict) and return its results table."""
    if isinstance(config, dict):
        config = ExperimentConfig.from_dict(config)
    return Runner(config, root=root, progress=progress, **kwargs).run()
