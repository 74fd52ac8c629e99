"""One resumable run: units of work keyed by a hash of their settings, each unit's result one
file written whole or not at all, finished units skipped, one progress line, units computed in
this process or by an executor.

Every run that may be killed and started again goes through here: the experiment grid (a unit is
a cell, ``experiments/runner.py``, in this process or on Ray through
``experiments/executors.py``), the refusal suite (a chunk of prompts, ``refusal/suite.py``),
UnknownBench's measures (a chunk of items, ``unknown/measures.py``) and the import of SELECT's
released results (one released file, ``tables/select_results``). Each runner keeps what is its
own: what a unit is, its file's name and format, how its rows are computed and gathered.

- **Keys.** A unit's file is named by :func:`unit_key`, the hash of everything that determines
  its rows (model, technique, data, prompts, sampling settings): a changed setting is a new
  file, never stale rows, and a cached run or a recorded reference keeps its name.
- **Finished units.** :func:`unit_done` says whether a unit's file is there and whole (by a
  check of its format, :func:`~workbench.paths.jsonl_problem` or
  :func:`~workbench.paths.parquet_problem`, or the runner's own); a damaged one (what a crash
  before durable writes could leave, a hand's edit) is set aside as ``<name>.damaged`` with one
  line naming it, and its unit runs again. :func:`pending` is the units not done.
- **Durable writes.** :func:`write_rows` (JSON Lines), :func:`write_frame` (a pandas table as
  Parquet) and :func:`write_table` (a pyarrow table, its metadata kept) write through
  :func:`~workbench.paths.atomic_file`: a temporary name, flushed and synced, renamed, the folder
  synced. A unit's file is whole or absent whatever moment a run is killed at.
- **Execution.** :func:`run_units` hands the units to an executor (any callable from a list of
  units to an iterator of :class:`UnitResult`: :func:`run_local` in this process,
  :func:`run_pool` in a process pool, the grid's Ray executor) and writes each result as it
  arrives, in this process, before taking the next: executors never write, so a unit is never
  written twice, and an interrupt loses only the units in flight.
- **Progress.** :class:`Progress` counts what is done and says one line per unit, ``<what>;
  1 min 05 s elapsed, about 3 min 10 s left`` (:func:`minutes`), the time left estimated from
  the cost of what is left.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workbench.paths import (
    atomic_file,
    jsonl_problem,
    parquet_problem,
    whole_or_set_aside,
    write_text_atomic,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "Progress",
    "UnitResult",
    "jsonl_problem",
    "minutes",
    "parquet_problem",
    "pending",
    "run_local",
    "run_pool",
    "run_units",
    "unit_done",
    "unit_key",
    "write_frame",
    "write_rows",
    "write_table",
]

U = TypeVar("U")


# -- keys and finished units ----------------------------------------------------------------------
def unit_key(settings: Mapping[str, Any]) -> str:
    """The name of a unit's file: the first 16 hex digits of the sha256 of ``settings`` as JSON
    (keys sorted, what JSON cannot hold as its ``str``). Every runner's files are named so;
    the hash is part of their names and of recorded references, so it never changes."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def unit_done(
    path: str | os.PathLike,
    problem: Callable[[Path], str | None] = parquet_problem,
    then: str = "that unit runs again",
) -> bool:
    """Whether a unit's file ``path`` is there and whole by ``problem`` (why it is damaged, or
    None); a damaged one is renamed ``<name>.damaged`` with one warning line naming it and
    saying ``then``, and the unit counts as not done."""
    return whole_or_set_aside(path, problem, then)


def pending(units: Iterable[U], done: Callable[[U], bool]) -> list[U]:
    """The units that are not ``done`` (each asked once, in order: damaged files set aside)."""
    return [u for u in units if not done(u)]


# -- durable writes -------------------------------------------------------------------------------
def write_rows(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rows as JSON Lines (one ``json.dumps`` per line), whole or not at all."""
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def write_frame(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    """A pandas table as Parquet (without its index), whole or not at all."""
    with atomic_file(path) as tmp:
        frame.to_parquet(tmp, index=False)


def write_table(path: str | os.PathLike, table: pa.Table) -> None:
    """A pyarrow table as Parquet (its schema's metadata kept), whole or not at all."""
    import pyarrow.parquet as pq

    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)


# -- execution ------------------------------------------------------------------------------------
@dataclass
class UnitResult:
    """A finished unit: what it computed (``rows``), or the error it raised."""

    unit: Any
    rows: Any = None
    error: BaseException | None = None
    traceback: str = ""


def run_local(
    units: Iterable[U],
    compute: Callable[[U], Any],
    started: Callable[[U], None] | None = None,
    catch: bool = True,
) -> Iterator[UnitResult]:
    """Each unit's ``compute(unit)`` in this process, one after another (``started(unit)``
    first). With ``catch``, a unit that raises an ``Exception`` is a result with its error and
    the others go on; without, the error stops the run. An interrupt always stops it."""
    for unit in units:
        if started is not None:
            started(unit)
        try:
            rows = compute(unit)
        except Exception as e:
            if not catch:
                raise
            yield UnitResult(unit, error=e, traceback=traceback.format_exc())
        else:
            yield UnitResult(unit, rows)


def run_pool(
    units: Sequence[U],
    compute: Callable[[U], Any],
    workers: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> Iterator[UnitResult]:
    """``compute(unit)`` for each unit in a pool of ``workers`` processes (each set up by
    ``initializer(*initargs)``; ``compute`` and the units must pickle), results as they finish.
    A unit that raises stops the run; so does closing the iterator: the units not started are
    cancelled."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(workers, initializer=initializer, initargs=initargs) as pool:
        futures = {pool.submit(compute, u): u for u in units}
        try:
            for fut in as_completed(futures):
                yield UnitResult(futures[fut], fut.result())
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def run_units(
    units: Sequence[U],
    execute: Callable[[list[U]], Iterator[UnitResult]],
    write: Callable[[U, Any], None] | None = None,
) -> Generator[UnitResult, None, None]:
    """``units`` through ``execute`` (an executor: :func:`run_local`, :func:`run_pool` or one of
    the grid's); each result without an error is written (``write(unit, rows)``) here, as it
    arrives and before the next is taken, then yielded. Closing the iterator (a ``break``, an
    interrupt) closes the executor's, which stops its workers."""
    results = execute(list(units))
    try:
        for result in results:
            if result.error is None and write is not None:
                write(result.unit, result.rows)
            yield result
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


# -- progress -------------------------------------------------------------------------------------
def minutes(seconds: float) -> str:
    """A duration as people read it: ``42 s``, ``3 min 07 s``; ``?`` when it is not known."""
    if not math.isfinite(seconds):
        return "?"
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


class Progress:
    """What a run has done, and one line per finished unit: ``<what>; 1 min 05 s elapsed,
    about 3 min 10 s left``.

    ``total`` and ``done`` count what the run counts (cells, prompts, files); ``cost`` is what
    is left to do in the ETA's units (default: ``total - done``; the grid weighs its cells by
    technique). The time left is the time per unit of cost so far times the cost left: the
    time the units themselves took where they say it (``seconds``, without model loads), else
    the wall clock since the start."""

    def __init__(
        self,
        total: int,
        done: int = 0,
        cost: float | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.total, self.done = total, done
        self.cost_done, self.cost_left = 0.0, float(total - done if cost is None else cost)
        self.busy: float | None = None
        self.clock = clock
        self.start = clock()

    def finished(self, amount: int = 1, cost: float | None = None, seconds: float | None = None):
        """Count a finished unit: ``amount`` of the total, ``cost`` of the ETA's (default
        ``amount``), ``seconds`` it took (if the run counts its units' own time)."""
        self.done += amount
        cost = float(amount if cost is None else cost)
        self.cost_done += cost
        self.cost_left -= cost
        if seconds is not None:
            self.busy = (self.busy or 0.0) + seconds

    @property
    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        """Seconds still to go (NaN before any cost is done)."""
        if not self.cost_done:
            return float("nan")
        spent = self.elapsed if self.busy is None else self.busy
        return spent / self.cost_done * self.cost_left

    def line(self, what: str) -> str:
        """``<what>; <elapsed> elapsed, about <left> left``."""
        return f"{what}; {minutes(self.elapsed)} elapsed, about {minutes(self.left())} left"
