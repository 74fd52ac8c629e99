"""Timing passes that are compared with each other, shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def interleaved(repeats: int, *passes: Callable[[], Any]) -> list[tuple[Any, list[float]]]:
    """Each pass run in turn, ``repeats`` times over (interleaved, so that a slow spell of a
    shared machine falls on every pass alike); per pass its last result and every run's
    seconds."""
    results: list[Any] = [None] * len(passes)
    seconds: list[list[float]] = [[] for _ in passes]
    for _ in range(repeats):
        for i, run in enumerate(passes):
            t = time.perf_counter()
            results[i] = run()
            seconds[i].append(time.perf_counter() - t)
    return list(zip(results, seconds))
