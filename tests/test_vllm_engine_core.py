"""Where the vLLM back end runs vLLM's engine core: the choice is made per engine through the
variable vLLM reads at build time, and neither it nor vLLM's cache of the environment leaks
into the next engine or the user's environment (a stand-in ``vllm`` records what it saw)."""

from __future__ import annotations

import os
import sys
import types

import pytest

from workbench.backends.vllm_engine import MULTIPROCESSING, VLLMOptions, _new_llm


class _Envs:
    """vLLM's ``envs`` module: variables read from the environment, or from a snapshot once
    an engine core has started (``enable_envs_cache``)."""

    def __init__(self, resets: list):
        self.cache: dict | None = None
        self.resets = resets

    def get(self, name):
        return (self.cache if self.cache is not None else os.environ).get(name)

    def _is_envs_cache_enabled(self):
        return self.cache is not None

    def enable_envs_cache(self):
        self.cache = self.cache if self.cache is not None else dict(os.environ)

    def disable_envs_cache(self):
        self.resets.append(1)
        self.cache = None


def fake_vllm():
    seen: list[str | None] = []
    resets: list[int] = []
    envs = _Envs(resets)

    class LLM:
        def __init__(self, **kwargs):
            seen.append(envs.get(MULTIPROCESSING))
            envs.enable_envs_cache()  # as vLLM does once the engine core is up
            if kwargs.get("fail"):
                raise RuntimeError("engine failed to start")

    return types.SimpleNamespace(LLM=LLM, envs=envs), seen, resets


@pytest.mark.parametrize(
    "before, in_process, during",
    [(None, True, "0"), (None, False, "1"), ("1", True, "0"), ("0", False, "1")],
)
def test_the_engine_core_is_placed_per_engine_and_the_environment_restored(
    monkeypatch, before, in_process, during
):
    vllm, seen, resets = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.envs", vllm.envs)
    if before is None:
        monkeypatch.delenv(MULTIPROCESSING, raising=False)
    else:
        monkeypatch.setenv(MULTIPROCESSING, before)
    _new_llm(vllm, {}, in_process)
    assert seen == [during]
    assert os.environ.get(MULTIPROCESSING) == before
    assert len(resets) == 2  # vLLM's cached environment dropped before and after the build
    # and cached again over the restored environment, for the engine's steps
    assert vllm.envs._is_envs_cache_enabled() and vllm.envs.get(MULTIPROCESSING) == before


def test_an_earlier_engines_cached_choice_does_not_stick(monkeypatch):
    vllm, seen, _ = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.envs", vllm.envs)
    monkeypatch.delenv(MULTIPROCESSING, raising=False)
    _new_llm(vllm, {}, True)
    _new_llm(vllm, {}, False)
    _new_llm(vllm, {}, True)
    assert seen == ["0", "1", "0"]


def test_a_failed_build_still_restores_the_environment(monkeypatch):
    vllm, seen, _ = fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.envs", vllm.envs)
    monkeypatch.delenv(MULTIPROCESSING, raising=False)
    with pytest.raises(RuntimeError, match="failed to start"):
        _new_llm(vllm, {"fail": True}, True)
    assert seen == ["0"] and MULTIPROCESSING not in os.environ


def test_where_the_engine_core_runs_does_not_change_a_cells_hash():
    assert "in_process" in VLLMOptions.not_in_answers
    with pytest.raises(Exception, match="in_process"):
        VLLMOptions(in_process="yes")  # type: ignore[arg-type]
