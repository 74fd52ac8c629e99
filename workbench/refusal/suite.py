"""The refusal suite: datasets x models (x abstainers), K sampled answers per prompt, every
detector and optionally an LLM judge, c(x) per prompt, per-split metrics, figures.

A run is resumable per prompt the way ``workbench.unknown.run_unknown`` is: prompts go in
chunks, and each chunk's rows are written atomically to ``runs/<name>/chunks/`` under a hash of
everything that determines them (model, abstainer, data, prompts, sampling settings, thinking
marker; the judge's verdicts under their own hash). A run killed at any moment loses at most the
chunk in flight, which a restart computes again; finished chunks are read, never recomputed, so
no row is lost or repeated. Detectors are applied when the rows are gathered (they are cheap),
so a newly registered detector shows up without generating again. Keys, finished chunks, durable
writes and the progress line are :mod:`workbench.resumable`'s; the suite keeps what a chunk is
(two files: the answers and the judge's verdicts), the order it answers them in (a model loaded
once, an abstainer prepared once per system) and its gathering.

Outputs in ``runs/<name>/``: ``rows.parquet`` (one row per sample, with provenance),
``prompts.csv`` (c(x) per prompt from every source), ``splits.csv`` (each source's rates per
split), ``metrics.json`` (seed 001's per-split shares), ``misbehaviour.csv`` (which split
misbehaves), ``figures/confidence_*`` and ``figures/source_rates`` (PDF and PNG).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from workbench.models.numerics import record_run_numerics
from workbench.refusal.config import AbstainerConfig, SuiteConfig
from workbench.refusal.datasets import PromptItem, PromptSet, load_dataset
from workbench.refusal.scores import (
    SPLIT_SHARES,
    answer_logprobs,
    metrics_json,
    misbehaviour,
    prompt_scores,
    split_name,
    split_table,
    split_thinking,
)
from workbench.resumable import (
    Progress,
    minutes,
    pending,
    run_local,
    run_units,
    unit_done,
    unit_key,
    write_frame,
)

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

ROW_KEY = ["system", "dataset", "prompt_id", "sample"]


@dataclass(frozen=True)
class System:
    """What answers: a model, unmodified or made to abstain by a technique."""

    model: str
    abstainer: AbstainerConfig | None = None

    @property
    def name(self) -> str:
        return self.model if self.abstainer is None else f"{self.model}+{self.abstainer.tag()}"

    @property
    def technique(self) -> str:
        return "base" if self.abstainer is None else self.abstainer.technique

    @property
    def target(self) -> str:
        return "" if self.abstainer is None else self.abstainer.target


@dataclass
class Chunk:
    """A few prompts of one dataset for one system; its rows live in ``gen_path`` (and the
    judge's verdicts in ``judge_path``)."""

    system: System
    dataset: PromptSet
    items: list[PromptItem]
    gen_path: Path
    judge_path: Path | None


@dataclass
class SuiteResult:
    """A finished run's tables (also written to ``run_dir``)."""

    run_dir: Path
    rows: pd.DataFrame
    scores: pd.DataFrame
    table: pd.DataFrame
    metrics: dict
    misbehaviour: pd.DataFrame
    figures: list[Path] = field(default_factory=list)


def _whole(path: Path) -> bool:
    """Whether a chunk file is there and whole; a damaged one (empty, cut) is set aside with one
    warning line and its chunk counts as not done."""
    return unit_done(path, then="that chunk is answered again")


class RefusalSuite:
    """Runs a :class:`SuiteConfig`. ``models`` maps model names to already loaded models (tests,
    notebooks holding one); ``bench`` is the benchmark of abstainers that name none."""

    def __init__(
        self,
        config: SuiteConfig,
        models: dict | None = None,
        bench: Benchmark | None = None,
        progress: bool = True,
    ):
        from workbench.paths import runs_root

        self.config = config
        self.loaded = dict(models or {})
        self._given = set(self.loaded)
        self.default_bench = bench
        self.progress = progress
        self.run_dir = runs_root() / config.name
        self.datasets: list[PromptSet] = []
        self.benches: dict[str | None, object] = {}
        self._judge_lms: dict[str, object] = {}

    # -- checks before any model loads -----------------------------------------------------------
    def prepare(self) -> None:
        """Read every dataset and check every abstainer's benchmark and target, and that the
        run folder can be written: a missing file, a malformed one, an unknown concept or a
        read-only folder is one line before any model loads."""
        from workbench.paths import check_writable

        c = self.config
        self.datasets = []
        for ref in c.datasets:
            data = load_dataset(ref.name, c.data_dir, ref.path, ref.expected)
            limit = c.limit if ref.limit is None else ref.limit
            data, dropped = data.limited(limit, c.sampling.seed)
            if dropped:
                n = len(data.splits) + len(dropped)
                print(
                    f"[{c.name}] limit {limit} < {n} splits of {ref.name}: "
                    f"{', '.join(dropped)} left out (a limit of at least {n} keeps every split)",
                    file=sys.stderr,
                )
            self.datasets.append(data)
        from workbench.errors import ConfigError, WorkbenchError
        from workbench.techniques import get_technique

        for i, ab in enumerate(c.abstainers):
            try:
                bench = self._bench(ab.benchmark)
            except WorkbenchError as e:
                raise ConfigError(f"config field 'abstainers[{i}].benchmark': {e}") from None
            try:
                get_technique(ab.technique, **ab.params).check_data(bench, ab.target)
            except WorkbenchError as e:
                raise ConfigError(f"config field 'abstainers[{i}]': {e}") from None
        # every model, the judge's, the device and the dtype against what is installed
        from workbench.backends import check_model, check_new_tokens
        from workbench.models.loading import resolve_device
        from workbench.models.numerics import resolve_dtype

        judge = c.judge.model if c.judge.model not in (None, "self") else None
        fields = [f"models[{i}]" for i in range(len(c.models))] + (["judge.model"] if judge else [])
        for where, name in zip(fields, [*c.models, *([judge] if judge else [])]):
            if name not in self.loaded:
                try:
                    check_model(name)
                except WorkbenchError as e:
                    raise ConfigError(f"config field '{where}': {e}") from None
                if where != "judge.model":  # the judge answers in its own few tokens
                    assert c.sampling.max_new_tokens is not None  # the preset gave it
                    check_new_tokens(
                        name, c.sampling.max_new_tokens, "config field 'sampling.max_new_tokens'"
                    )
        from workbench.runlock import check_run_kind

        resolve_dtype(c.dtype, resolve_device(c.device))
        check_run_kind(self.run_dir, "refusal-eval")
        check_writable(self.run_dir, "the run folder")

    def _bench(self, directory: str | None):
        if directory not in self.benches:
            if directory is None and self.default_bench is not None:
                self.benches[None] = self.default_bench
            else:
                from workbench.paths import project_path
                from workbench.taxonomy import load_benchmark

                self.benches[directory] = load_benchmark(
                    project_path(directory) if directory else None
                )
        return self.benches[directory]

    def systems(self) -> list[System]:
        c = self.config
        out = []
        for m in c.models:
            if c.include_base:
                out.append(System(m))
            out += [System(m, ab) for ab in c.abstainers]
        return out

    # -- the plan ---------------------------------------------------------------------------------
    def _gen_key(self, system: System, data: PromptSet, items: list[PromptItem]) -> dict:
        c = self.config
        ab = None
        if system.abstainer is not None:
            ab = {
                **system.abstainer.to_dict(),
                "benchmark_hash": self._bench(system.abstainer.benchmark).content_hash()[:16],
            }
        return {
            "model": system.model,
            "abstainer": ab,
            "dataset": data.name,
            "data_hash": data.content_hash,
            "prompts": [[i.prompt_id, i.prompt] for i in items],
            "generation": c.sampling.generation_config(c.system_prompt).to_dict(),
            "thinking_marker": c.thinking_marker,
        }

    def _judge_identity(self, system: System) -> dict | None:
        j = self.config.judge
        if j.model is None:
            return None
        model = system.model if j.model == "self" else j.model
        return {"model": model, "answer_chars": j.answer_chars, "categories": j.categories}

    def chunks(self) -> list[Chunk]:
        c = self.config
        out = []
        chunk_dir = self.run_dir / "chunks"
        for system in self.systems():
            for data in self.datasets:
                for start in range(0, len(data.items), c.chunk_size):
                    items = data.items[start : start + c.chunk_size]
                    gen_hash = unit_key(self._gen_key(system, data, items))
                    judge = self._judge_identity(system)
                    judge_path = None
                    if judge is not None:
                        judge_path = (
                            chunk_dir
                            / f"judge-{unit_key({'gen': gen_hash, 'judge': judge})}.parquet"
                        )
                    out.append(
                        Chunk(
                            system, data, items, chunk_dir / f"gen-{gen_hash}.parquet", judge_path
                        )
                    )
        return out

    # -- running ----------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.progress:
            print(f"[{self.config.name}] {text}", file=sys.stdout, flush=True)

    def _model(self, name: str):
        if name not in self.loaded:
            from workbench.backends import load_model, load_options_for
            from workbench.techniques import TECHNIQUES

            # what the abstainers need of the engine (vLLM: steering, adapters)
            needs = frozenset().union(
                *(
                    TECHNIQUES[ab.technique].requires
                    for ab in self.config.abstainers
                    if ab.technique in TECHNIQUES
                )
            )
            self._say(f"loading {name}")
            self.loaded[name] = load_model(
                name,
                device=self.config.device,
                dtype=self.config.dtype,
                options=load_options_for(name, None, needs),
            )
        return self.loaded[name]

    def _judge(self, system: System):
        from workbench.scoring.judge import LLMJudge

        j = self.config.judge
        assert j.model is not None  # called only for chunks with a judge path (a judge is set)
        name = system.model if j.model == "self" else j.model
        if name not in self._judge_lms:
            self._judge_lms[name] = LLMJudge(
                self._model(name),
                batch_size=j.batch_size,
                answer_chars=j.answer_chars,
                categories=j.categories,
            )
        return self._judge_lms[name]

    def run(self) -> SuiteResult:
        """Compute what is missing, then gather every chunk into the run's tables and figures
        (the run folder is this process's meanwhile: a second run on it is one line)."""
        from workbench.runlock import run_lock

        self.prepare()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with run_lock(self.run_dir, f"refusal-eval {self.config.name}", kind="refusal-eval"):
            return self._run()

    def _run(self) -> SuiteResult:
        from workbench.paths import write_text_atomic

        (self.run_dir / "chunks").mkdir(exist_ok=True)
        write_text_atomic(
            self.run_dir / "config.json", json.dumps(self.config.to_dict(), indent=2, default=str)
        )
        plan = self.chunks()
        # both files of every chunk asked (damaged ones, what a crash of an older version
        # left, set aside): a chunk is done when its answers and its verdicts are whole
        todo = pending(
            plan,
            lambda ch: all([_whole(ch.gen_path), ch.judge_path is None or _whole(ch.judge_path)]),
        )
        total = sum(len(ch.items) for ch in todo)
        if todo:
            self._say(
                f"{total} prompts to answer in {len(todo)} chunks "
                f"({len(plan) - len(todo)} of {len(plan)} chunks already done)"
            )
        progress = Progress(total)  # by the time spent answering and judging (no loads)
        for model in self.config.models:
            mine = [ch for ch in todo if ch.system.model == model]
            for name in dict.fromkeys(ch.system.name for ch in mine):
                chunks = [ch for ch in mine if ch.system.name == name]
                system = chunks[0].system
                gen = [ch for ch in chunks if not ch.gen_path.is_file()]
                if gen:
                    self._model(system.model)  # loads (and preparation) before the clock
                if any(ch.judge_path is not None and not ch.judge_path.is_file() for ch in chunks):
                    self._judge(system)
                abstainer = self._abstainer(system) if gen else None
                try:
                    local = functools.partial(
                        run_local, compute=self._compute(abstainer), catch=False
                    )
                    for result in run_units(chunks, local):
                        ch = result.unit
                        progress.finished(len(ch.items), seconds=result.rows)
                        self._say(
                            progress.line(
                                f"{system.name} / {ch.dataset.name}: "
                                f"{progress.done}/{total} prompts"
                            )
                        )
                finally:
                    if abstainer is not None:
                        abstainer.close()
            self._release(model)
        return self.gather(plan)

    def _compute(self, abstainer):
        """What a chunk's unit computes: the files it lacks, each written whole as it is made
        (the answers, then the judge's verdicts on them); returns the seconds it took."""

        def compute(ch: Chunk) -> float:
            t0 = time.time()
            if not ch.gen_path.is_file():
                write_frame(ch.gen_path, self.answer(ch, abstainer))
            if ch.judge_path is not None and not ch.judge_path.is_file():
                write_frame(ch.judge_path, self.judge(ch))
            return time.time() - t0

        return compute

    def _abstainer(self, system: System):
        if system.abstainer is None:
            return None
        from workbench.techniques import get_technique

        ab = system.abstainer
        self._say(f"preparing {ab.technique} for {ab.target} on {system.model}")
        technique = get_technique(ab.technique, **ab.params)
        return technique.prepare(
            self._model(system.model), self._bench(ab.benchmark), ab.target, seed=ab.seed
        )

    def _release(self, model: str) -> None:
        """Free a model once its systems are done, unless the caller gave it or it judges."""
        if model == self.config.judge.model or model in self._given:
            return
        self._judge_lms.pop(model, None)
        self.loaded.pop(model, None)

    def answer(self, chunk: Chunk, abstainer=None) -> pd.DataFrame:
        """Sample K answers to each prompt of ``chunk``; the thinking is split off the answer."""
        from workbench.experiments.runner import package_versions
        from workbench.generation import generate

        c = self.config
        system, data = chunk.system, chunk.dataset
        lm = self._model(system.model)
        cfg = c.sampling.generation_config(c.system_prompt)
        prompts = [i.prompt for i in chunk.items]
        rows = len(prompts) * cfg.num_samples
        if cfg.batch_size < rows <= 2 * cfg.batch_size:
            # the chunk in one pass rather than a full batch and a short one (8 prompts x 5
            # samples: 26% faster on 2 cores); answers do not depend on the batch
            cfg = cfg.replace(batch_size=rows)
        t0 = time.time()
        if abstainer is None:
            gens = generate(lm, prompts, cfg, progress=False)
        else:
            gens = abstainer.generate(prompts, cfg, progress=False)
        seconds = time.time() - t0
        mixed = len(data.splits) > 1
        common = {
            "run": c.name,
            "config_hash": chunk.gen_path.stem.removeprefix("gen-"),
            "system": system.name,
            "model": system.model,
            "model_id": lm.model_id,
            "revision": lm.revision,
            "backend": lm.backend,
            "dtype": lm.dtype_name,
            "numerics": lm.numerics,
            "technique": system.technique,
            "target": system.target,
            "dataset": data.name,
            "data_hash": data.content_hash[:16],
            "seed": c.sampling.seed,
            "thinking_marker": c.thinking_marker,
            "versions": json.dumps(package_versions(), sort_keys=True),
            "chunk_seconds": round(seconds, 2),
        }
        rows = []
        for g in sorted(gens, key=lambda g: (g.prompt_index, g.sample)):
            item = chunk.items[g.prompt_index]
            answer, thinking = split_thinking(g.text, c.thinking_marker)
            known = bool(g.logprobs) and bool(g.token_ids)  # an HTTP back end may not say
            lps = (
                answer_logprobs(
                    getattr(lm, "tokenizer", None),
                    g.token_ids,
                    g.logprobs,
                    g.text,
                    c.thinking_marker,
                )
                if known
                else []
            )
            rows.append(
                {
                    **common,
                    "split": split_name(data.name, item.expected, mixed),
                    "expected": item.expected,
                    "category": item.category,
                    "prompt_id": item.prompt_id,
                    "prompt": item.prompt,
                    "sample": g.sample,
                    "response": answer,
                    "thinking": thinking,
                    "thinking_closed": None if not c.thinking_marker else thinking is not None,
                    "response_complete": g.raw_text if g.raw_text is not None else g.text,
                    "n_tokens": g.num_tokens,
                    "has_logprobs": known,
                    "answer_tokens": len(lps) if known else None,
                    "finish_reason": g.finish_reason,
                    "logprob_sum": float(sum(lps)) if lps else None,
                    "logprob_mean": float(sum(lps) / len(lps)) if lps else None,
                }
            )
        return pd.DataFrame(rows)

    def judge(self, chunk: Chunk) -> pd.DataFrame:
        """The judge's verdict on every answer of ``chunk`` (its rows must exist)."""
        rows = pd.read_parquet(chunk.gen_path)
        verdicts = self._judge(chunk.system).judge(list(zip(rows["prompt"], rows["response"])))
        identity = self._judge_identity(chunk.system)
        assert identity is not None  # the suite judges only when the config names a judge
        return pd.DataFrame(
            {
                "prompt_id": rows["prompt_id"],
                "sample": rows["sample"],
                "refused_judge": [v.refusal for v in verdicts],
                "judge_p_refusal": [v.p_refusal for v in verdicts],
                "judge_mass": [v.mass for v in verdicts],
                "judge_category": [v.category for v in verdicts],
                "judge_model": identity["model"],
            }
        )

    # -- gathering --------------------------------------------------------------------------------
    def rows(self, plan: list[Chunk] | None = None) -> pd.DataFrame:
        """Every finished chunk's rows with every detector's decision (and the judge's)."""
        from workbench.scoring.detectors import LEARNED, detector_decisions, detectors_for
        from workbench.scoring.phrases import detect_refusal

        frames = []
        for ch in plan if plan is not None else self.chunks():
            if not _whole(ch.gen_path):
                continue
            f = pd.read_parquet(ch.gen_path)
            if ch.judge_path is not None:
                if not _whole(ch.judge_path):
                    continue
                f = f.merge(
                    pd.read_parquet(ch.judge_path),
                    on=["prompt_id", "sample"],
                    how="left",
                    validate="one_to_one",
                )
            frames.append(f)
        if not frames:
            return pd.DataFrame()
        rows = pd.concat(frames, ignore_index=True)
        rows = rows.drop_duplicates(subset=ROW_KEY, keep="last").reset_index(drop=True)
        detectors = detectors_for()
        decisions = [
            detector_decisions(r, q, detectors) for q, r in zip(rows["prompt"], rows["response"])
        ]
        for col in decisions[0] if decisions else []:
            rows[col] = [d[col] for d in decisions]
        if self.config.probe or self.config.detector in LEARNED:
            from workbench.scoring.probe import add_probe_columns

            rows = add_probe_columns(rows, progress=self.progress)
        phrase = [detect_refusal(r, question=q) for q, r in zip(rows["prompt"], rows["response"])]
        rows["phrase_partial"] = [p.partial for p in phrase]
        rows["phrase_kind"] = [p.kind for p in phrase]
        # a sample's log-weight in c(x): none without answer tokens (seed 001 leaves it out);
        # 0 (equal weights) from a back end that records no log-probabilities
        col = "logprob_mean" if self.config.sampling.weighting == "mean" else "logprob_sum"
        known = rows["has_logprobs"].astype(bool)
        rows["weight"] = rows[col].where(known & (rows["answer_tokens"].fillna(0) > 0))
        rows.loc[~known, "weight"] = 0.0
        return rows

    def gather(self, plan: list[Chunk] | None = None) -> SuiteResult:
        """Write the run's tables and figures from its chunks."""
        from workbench.plots.save import save_run_figure
        from workbench.refusal.plots import plot_confidence_histograms, plot_source_rates

        c = self.config
        rows = self.rows(plan)
        if rows.empty:
            raise RuntimeError(f"run {c.name!r} has no finished chunks")
        from workbench.paths import atomic_file, write_text_atomic

        with atomic_file(self.run_dir / "rows.parquet") as tmp:
            rows.to_parquet(tmp, index=False)
        record_run_numerics(self.run_dir, rows.get("dtype", []), rows.get("numerics", []))
        primary = "judge" if "refused_judge" in rows else c.detector
        scores = prompt_scores(rows, primary, c.margin)
        with atomic_file(self.run_dir / "prompts.csv") as tmp:
            scores.to_csv(tmp, index=False)
        table = split_table(rows, scores)
        with atomic_file(self.run_dir / "splits.csv") as tmp:
            table.to_csv(tmp, index=False, float_format="%.2f")
        metrics = metrics_json(table, primary, c.margin)
        write_text_atomic(self.run_dir / "metrics.json", json.dumps(metrics, indent=2))
        bad = misbehaviour(table, primary, c.refusal_threshold, c.over_refusal_threshold)
        with atomic_file(self.run_dir / "misbehaviour.csv") as tmp:
            bad.to_csv(tmp, index=False, float_format="%.2f")
        figures: list[Path] = []

        def save(fig, name: str) -> None:
            # drawn for a paper's column and saved at exactly its width; the paths are said
            # (a notebook shows the figure, then this line, as save_run_figure's own repr does)
            saved = save_run_figure(fig, c.name, name, width="column")
            if saved:
                from workbench.paths import shown_path

                self._say("saved: " + ", ".join(shown_path(p) for p in saved))
            figures.extend(saved)

        for system in dict.fromkeys(scores["system"]):
            save(
                plot_confidence_histograms(scores, system, c.margin), f"confidence_{_slug(system)}"
            )
        save(plot_source_rates(table), "source_rates")
        return SuiteResult(self.run_dir, rows, scores, table, metrics, bad, figures)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def run_suite(
    config: SuiteConfig | dict,
    models: dict | None = None,
    bench: Benchmark | None = None,
    progress: bool = True,
) -> SuiteResult:
    """Run (or resume) a suite and return its tables."""
    if isinstance(config, dict):
        config = SuiteConfig.from_dict(config)
    return RefusalSuite(config, models=models, bench=bench, progress=progress).run()


def run_config_file(
    path: str | os.PathLike,
    name: str | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> SuiteResult:
    """The ``refusal-eval`` command: read a YAML config (checked before any model loads), run or
    resume it, print the splits that misbehave and where everything went."""
    from workbench.errors import ConfigError, Interrupted

    config = SuiteConfig.from_yaml(path)
    for option, value in (("name", name), ("limit", limit)):
        if value is None:
            continue
        try:
            config = SuiteConfig.from_dict({**config.to_dict(), option: value})
        except ConfigError as e:  # the option's mistake, not the file's
            raise ConfigError(str(e).replace(f"config field '{option}'", f"--{option}")) from None
    start = time.time()
    suite = RefusalSuite(config, progress=progress)
    try:
        result = suite.run()
    except KeyboardInterrupt:  # finished chunks are whole on disk; the one in flight is not
        raise Interrupted(
            f"interrupted; the finished chunks are kept in {suite.run_dir / 'chunks'} and the "
            "same command resumes from them"
        ) from None
    cols = [*SPLIT_SHARES, "failure", "misbehaves"]
    with pd.option_context(
        "display.width",
        200,
        "display.max_columns",
        None,
        "display.max_rows",
        None,
        "display.float_format",
        "{:.1f}".format,
    ):
        print(f"\nc(x) from {result.metrics['score_source']}; splits, misbehaving first:")
        print(result.misbehaviour[cols].to_string(index=False))
    print(
        f"\n{len(result.rows)} answers in {result.run_dir / 'rows.parquet'}; metrics.json, "
        f"prompts.csv, splits.csv, misbehaviour.csv and figures/ beside it "
        f"({minutes(time.time() - start)})"
    )
    return result
