"""Where a grid's cells run: in this process (``local``), or on a pool of Ray actors (``ray``).

Either way the driver (:class:`~workbench.experiments.runner.Runner`) receives each finished
cell's rows and writes them atomically under the cell's hash
(:func:`workbench.resumable.run_units`); executors never write results. An executor is what
:mod:`workbench.resumable` calls one: cells in, :class:`~workbench.resumable.UnitResult` out.

**Ray.** A pool of actors, each on its share of the resources (``{"CPU": 1}``, ``{"GPU": 1}``),
each loading a model once and running cells of it. Cells go out longest first (fine-tuning
before steering before prompting) and grouped by model, so a worker loads each model at most
once. A worker that dies (its process killed, its node lost) is replaced and its cell retried
on another worker, so no cell is lost, and since only the driver writes, none is written twice.
Workers get the benchmark from the driver (no shared file system is needed for data); fine-tuned
adapters and other artifacts go to ``store`` (default: each machine's own cache; point it at a
shared directory on a cluster to reuse them across workers). Each worker sets torch to its CPU
share and OpenMP to passive waiting: oversubscribed torch threads on a 2-core machine ran
10-70x slower.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError
from workbench.resumable import UnitResult, run_local

if TYPE_CHECKING:
    from workbench.generation.backend import Backend
    from workbench.taxonomy.benchmark import Benchmark

#: Relative cost of a cell by technique, for longest-first scheduling and the progress ETA.
CELL_COST = {
    "sft_dpo": 10.0,
    "sft": 6.0,
    "few_shot_cot": 3.0,
    "steering": 2.0,
    "zero_shot": 1.0,
    "base": 1.0,
}


def cell_cost(cell) -> float:
    return CELL_COST.get(cell.technique, 2.0)


#: A finished cell: its rows, or the error it raised (the resumable run's result of a unit).
CellResult = UnitResult


class LocalExecutor:
    """Cells one after another in this process, one model load per model; ``models`` (by the
    grid's model name) are models already loaded, used as they are instead of a load of
    their own (a notebook's model, an engine a script holds open)."""

    name = "local"

    def __init__(self, models: dict[str, Backend] | None = None) -> None:
        self.models = dict(models or {})

    def execute(self, runner, cells: Sequence) -> Iterator[CellResult]:
        from workbench.backends import load_model

        for model in dict.fromkeys(c.model for c in cells):
            if model in self.models:
                lm = self.models[model]
            else:
                lm = load_model(model, options=runner.config.load_options(model))
            # one broken cell must not cost the rest of the grid: its error is its result
            yield from run_local(
                [c for c in cells if c.model == model],
                functools.partial(runner.run_cell, lm),
                started=runner.started,
            )


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a worker using ``threads`` CPU threads (OpenMP waits passively)."""
    n = str(max(1, threads))
    return {
        "OMP_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "OMP_WAIT_POLICY": "PASSIVE",
        "TOKENIZERS_PARALLELISM": "false",
    }


class _Worker:
    """A Ray actor: runs cells of one grid (the body of ``ray.remote(_Worker)``)."""

    def __init__(
        self,
        make_runner: Callable,
        bench: Benchmark,
        store_root: str | None,
        threads: int,
        imports: Sequence[str] = (),
    ):
        import importlib

        import torch

        os.environ.update(thread_env(threads))
        torch.set_num_threads(max(1, threads))
        for module in imports:  # techniques or models registered by the user's own modules
            importlib.import_module(module)
        # the driver's Runner.worker_factory(): a Runner of the same grid, quiet, on this bench
        self.runner = make_runner(bench, store_root)
        self.models: dict[str, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def run(self, cell) -> tuple[list[dict] | None, str | BaseException | None, str]:
        """(rows, None, "") or (None, error message, traceback) for a cell that raised; an
        endpoint that is down comes back as itself (the driver stops the grid on its type)."""
        import traceback

        from workbench.backends import load_model
        from workbench.backends.openai_api import EndpointDown

        if cell.model not in self.models:
            self.models.clear()  # one model in memory at a time
            self.models[cell.model] = load_model(
                cell.model, options=self.runner.config.load_options(cell.model)
            )
        try:
            return self.runner.run_cell(self.models[cell.model], cell), None, ""
        except EndpointDown as e:
            return None, EndpointDown(str(e)), traceback.format_exc()
        except Exception as e:
            return None, f"{type(e).__name__}: {e}", traceback.format_exc()


@dataclass
class RayExecutor:
    """Cells on a pool of Ray actors.

    Attributes:
        address: a running cluster (``"auto"``, ``"ray://head:10001"``); None starts a local
            one sized for the workers.
        workers: actors in the pool.
        resources_per_worker: what each actor reserves, e.g. ``{"CPU": 1}`` or ``{"GPU": 1}``.
        threads: torch threads per worker (default: its CPUs, at least 1).
        store: artifact directory the workers share (default: each machine's cache).
        imports: modules each worker imports first (your own registered techniques).
        max_retries: times a cell is retried after its worker died.
    """

    address: str | None = None
    workers: int = 2
    resources_per_worker: dict[str, float] = field(default_factory=lambda: {"CPU": 1})
    threads: int | None = None
    store: str | None = None
    imports: tuple[str, ...] = ()
    max_retries: int = 3
    name: str = "ray"
    worker_pids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}")
        unknown = set(self.resources_per_worker) - {"CPU", "GPU"}
        if unknown:
            raise ConfigError(f"resources_per_worker takes CPU and GPU, got {sorted(unknown)}")

    def check_address(self) -> None:
        """Before any work: an address of a cluster (``host:port``, ``ray://host:port``) must
        answer, and a ``ray://`` one needs Ray's client installed. Ray itself retried a dead
        address for minutes without a word."""
        address = self.address or os.environ.get("RAY_ADDRESS")
        if not address or address == "auto":
            return
        import importlib.util
        import socket

        rest = address
        if address.startswith("ray://"):
            if importlib.util.find_spec("grpc") is None:
                raise ConfigError(
                    f"the address {address!r} needs Ray's client: pip install 'ray[client]'"
                )
            rest = address.removeprefix("ray://")
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"a Ray address is host:port or ray://host:port, got {address!r}")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as e:
            raise ConfigError(
                f"nothing answers at the Ray address {address!r} ({e.strerror or e}; is the "
                "cluster running? ray start --head starts one)"
            ) from None

    def _start(self):
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "the ray executor needs Ray: pip install 'ray>=2.40' (or the set-up's "
                "'.[ray]' extra)"
            ) from None
        cpus = float(self.resources_per_worker.get("CPU", 0))
        threads = self.threads or max(1, int(cpus))
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "ignore_reinit_error": True,
                "include_dashboard": False,
                "log_to_driver": False,
                "runtime_env": {"env_vars": thread_env(threads)},
            }
            if self.address is None and not os.environ.get("RAY_ADDRESS"):
                kwargs["num_cpus"] = max(1, int(self.workers * max(cpus, 1)))
                gpus = self.resources_per_worker.get("GPU", 0)
                if gpus:
                    kwargs["num_gpus"] = int(self.workers * gpus)
            else:
                kwargs["address"] = self.address or os.environ["RAY_ADDRESS"]
            try:
                start_ray(ray, kwargs)
            except (ConnectionError, ValueError, RuntimeError) as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                where = (
                    f"join the Ray cluster at {kwargs['address']!r}"
                    if "address" in kwargs
                    else "start a local Ray cluster"
                )
                raise ConfigError(f"cannot {where}: {first}") from None
        return ray, threads

    def execute(self, runner, cells: Sequence) -> Iterator[CellResult]:
        ray, threads = self._start()
        options = {
            "num_cpus": self.resources_per_worker.get("CPU", 0),
            "num_gpus": self.resources_per_worker.get("GPU", 0),
            "max_restarts": 0,
        }
        actor_cls = ray.remote(_Worker).options(**options)
        bench_ref = ray.put(runner.bench)
        store = self.store or (str(runner.store.root) if runner.store is not None else None)

        def new_actor():
            return actor_cls.remote(
                runner.worker_factory(), bench_ref, store, threads, tuple(self.imports)
            )

        actors = [new_actor() for _ in range(self.workers)]
        created = list(actors)
        self.worker_pids = ray.get([a.pid.remote() for a in actors])
        queue = sorted(cells, key=lambda c: (c.model, -cell_cost(c)))
        tries: dict[Any, int] = {}
        running: dict[Any, tuple[Any, Any]] = {}  # future -> (cell, actor)
        idle = list(actors)
        try:
            while queue or running:
                while queue and idle:
                    cell, actor = queue.pop(0), idle.pop(0)
                    runner.started(cell)
                    running[actor.run.remote(cell)] = (cell, actor)
                done, _ = ray.wait(list(running), num_returns=1)
                cell, actor = running.pop(done[0])
                try:
                    rows, error, tb = ray.get(done[0])
                except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as e:
                    tries[cell] = tries.get(cell, 0) + 1
                    if tries[cell] > self.max_retries:
                        yield CellResult(
                            cell, error=e, traceback=f"worker died {tries[cell]} times"
                        )
                    else:
                        queue.insert(0, cell)  # retried first, on a fresh worker
                    replacement = new_actor()
                    created.append(replacement)
                    self.worker_pids = [p for p in self.worker_pids if _alive(p)] + ray.get(
                        [replacement.pid.remote()]
                    )
                    idle.append(replacement)
                    continue
                idle.append(actor)
                if isinstance(error, BaseException):
                    yield CellResult(cell, error=error, traceback=tb)
                elif error is not None:
                    yield CellResult(cell, error=RuntimeError(error), traceback=tb)
                else:
                    yield CellResult(cell, rows=rows)
        finally:
            for a in created:
                try:
                    ray.kill(a)
                except Exception:
                    pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def start_ray(ray, kwargs: dict[str, Any], attempts: int = 3) -> None:
    """``ray.init(**kwargs)``; a local cluster whose start timed out is started again (up to
    ``attempts`` times in all). Ray gives its raylet a fixed 30 s to register, which a busy
    machine (two cores, a model running beside it) can miss; Ray then raises a bare
    ``Exception``, here a one-line :class:`ConfigError` once every attempt timed out."""
    for attempt in range(attempts):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:  # Ray raises a bare Exception for this one
            if "address" in kwargs or "timed out during startup" not in str(e):
                raise
            ray.shutdown()  # the half-started processes, before the next start
            if attempt == attempts - 1:
                raise ConfigError(
                    f"the local Ray cluster did not start ({attempts} tries of Ray's 30 s "
                    "start-up deadline): the machine is too busy; try again when it is less so"
                ) from None


def make_executor(executor: str | Any = "local", **kwargs):
    """An executor by name (``local`` or ``ray``, with RayExecutor's settings) or as given."""
    if not isinstance(executor, str):
        return executor
    if executor == "local":
        unknown = sorted(set(kwargs) - {"models"})
        if unknown:
            raise ConfigError(f"the local executor takes only models=, got {unknown}")
        return LocalExecutor(**kwargs)
    if executor == "ray":
        return RayExecutor(**kwargs)
    raise ConfigError(f"unknown executor {executor!r}; use local or ray")


def wait_for(predicate, timeout: float = 60.0, every: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass (for tests and tools)."""
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(every)
    return False
