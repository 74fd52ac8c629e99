"""A thread pool whose threads never hold the process open.

An HTTP request to an endpoint that accepts connections and never answers blocks its thread
until the client's timeout and retries run out (minutes). :class:`concurrent.futures.
ThreadPoolExecutor` joins its threads when the interpreter exits, so Ctrl-C during such a
request printed its line and then kept the command alive for those minutes. This pool's
threads are daemons: the request is abandoned with the process, and its answer, had it come,
would only have been cached.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    """``submit`` / ``shutdown`` like :class:`~concurrent.futures.ThreadPoolExecutor`, on at
    most ``max_workers`` daemon threads (one started per submission until there are that
    many)."""

    def __init__(self, max_workers: int, name: str = "workbench-request"):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, not {max_workers}")
        self.max_workers = max_workers
        self._name = name
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """A future for ``fn(*args)``, run on one of the pool's threads."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that was shut down")
            self._work.put((future, fn, args))
            if len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:  # shutdown
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:  # the caller sees it through the future
                    future.set_exception(e)

    def shutdown(self, wait: bool = False, cancel_futures: bool = True) -> None:
        """Refuse new work; cancel what has not started (``cancel_futures``); stop each thread
        after its current task, waiting for them only when ``wait``."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        item = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in self._threads:
                self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
