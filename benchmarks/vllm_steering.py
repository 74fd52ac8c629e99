"""The vLLM half of benchmarks/steering.py, run with vLLM's python (.venv-vllm on CPU).

    python benchmarks/vllm_steering.py MODEL SPEC.json MAX_NEW_TOKENS REPEATS [--no-server]
        [--no-in-process]

On the shared 64 prompts, greedy, fp32: vLLM in process (a compiled plain engine, the
compiled steering engine and the eager one, :data:`ENGINES`) and vLLM's server (``serve
--steering``, 64 requests in flight), each unsteered and (steering) steered by the abstainer
in SPEC.json (its gate read in vLLM, then the prompts that fired steered; on the server also
with each gate read in a request of its own first, ``gate_prompt``; on the server each also
with prompts new to the prefix cache), interleaved REPEATS times after a full-size warm-up.
The compiled plain and compiled steering engines are loaded side by side and their passes
alternate; the compiled steering engine also runs the abstainer in CAST's order (``in_pass``:
each fired answer steered in the pass that read its gate); the engines of a group take turns
first, round by round. Prints one JSON line: per path the fastest pass's seconds (every
pass's too) and tokens of each kind, in process every pass's engine steps (how many, the first,
the second, a decoding step's median), and the texts.
``BENCH_SERVER_ARGS`` adds arguments to the server's command line (e.g. ``--block-size 128``,
vLLM's CPU default, to see what the steering server's 32 saves).
"""

import concurrent.futures as cf
import json
import os
import signal
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _best_runs(runs: dict, steps: dict | None = None) -> dict:
    """Per kind the fastest pass (the one least disturbed by the rest of a shared machine: the
    passes of one engine repeat the same work), every pass's time and tokens and (``steps``:
    an engine in process) every pass's engine steps (:func:`_steps`)."""
    return {
        kind: {
            "seconds": min(r[0] for r in rs),
            "tokens": rs[-1][1],
            "passes_s": [round(r[0], 2) for r in rs],
            # each pass's own seconds (unrounded) and tokens: what paired rounds are made of
            "passes": [[r[0], r[1]] for r in rs],
            **({"steps": steps[kind]} if steps and steps.get(kind) else {}),
        }
        for kind, rs in runs.items()
    }


def _timed_steps(lm) -> list[float] | None:
    """Time every engine step of ``lm`` where vLLM's engine core runs in this process (one call
    of ``LLMEngine.step`` is then one scheduled forward pass; with the core in a process of its
    own it only collects what is ready: None); returns the list each step's seconds are
    appended to."""
    from vllm.v1.engine.core_client import InprocClient

    engine = lm.llm.llm_engine
    if not isinstance(getattr(engine, "engine_core", None), InprocClient):
        return None
    step, times = engine.step, []

    def timed():
        t = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t)
        return out

    engine.step = timed
    return times


def _steps(times: list[float]) -> list[float]:
    """A pass's engine steps: how many, the first one's seconds (every prompt's uncached tail;
    on a steering engine the gates are read there), the second's (where the prompts whose gate
    fired start again, steered), the median of the rest (a decoding step) and their sum."""
    first, second, *rest = [*times, 0.0, 0.0][: max(len(times), 2)]  # a one-step pass too
    return [len(times), first, second, statistics.median(rest or [0.0]), sum(times)]


@dataclass
class _Loaded:
    """One engine of a group: what it runs and what its passes gave."""

    lm: Any
    kinds: dict  # kind -> the spec its steered passes use (none for unsteered)
    start_s: float
    runs: dict = field(init=False)  # kind -> [(seconds, tokens)] per pass
    #: each engine step's seconds while a pass runs (None: the engine core runs elsewhere)
    step_times: list | None = None
    steps: dict = field(default_factory=dict)  # kind -> [_steps(...)] per pass
    texts: dict = field(default_factory=dict)  # kind -> the last pass's texts
    fired: int | None = None

    def __post_init__(self):
        self.runs = {"unsteered": [], **{k: [] for k in self.kinds}}

    def clock(self, kind: str | None = None) -> None:
        """Keep the engine steps of the pass of ``kind`` that just ran (none: forget the steps
        so far, before a pass) and start counting again."""
        if self.step_times is None:
            return
        if kind is not None and self.step_times:
            self.steps.setdefault(kind, []).append(_steps(self.step_times))
        self.step_times.clear()


#: the in-process engines, each (label, options): a plain engine and the steering engine,
#: compiled (DYNAMO_TRACE_ONCE + inductor on CPU; CUDA graphs too on GPU) and eager, each with
#: the back end's choice of where vLLM's engine core runs (in this process on CPU), and the
#: plain engine once more with its engine core in a process of its own (vLLM's default). The
#: engines of a group are loaded side by side and their passes alternate, so that a shared
#: machine's drift falls on each alike: the compiled plain and compiled steering engines, whose
#: unsteered speeds the benchmark compares, are one group.
ENGINES = (
    (
        (
            "compiled plain, engine core in its own process",
            {"steering": False, "compiled": True, "in_process": False},
        ),
    ),
    (
        ("compiled plain", {"steering": False, "compiled": True}),
        # also steered by the abstainer in CAST's order (``in_pass``), each fired answer
        # steered in the pass that read its gate, against its separate order's restart
        ("compiled steering", {"steering": True, "compiled": True, "in_pass_too": True}),
    ),
    (("eager steering", {"steering": True, "compiled": False}),),
)


def in_process(model, spec, prompts, max_new, repeats, engines=ENGINES):
    """Each group of engines in turn, loaded side by side (the plain one first: the steering
    extension's load hook then finds only the steering engine's runner): per engine unsteered
    passes and (on a steering engine) steered passes (with ``in_pass_too`` also passes steered
    by ``spec`` in CAST's order: ``steered_in_pass``), every engine's passes of a round one
    after another (the engines' order reversed every other round), ``repeats`` rounds after a
    full-size warm-up; the texts of the last of each."""
    import torch

    from workbench.backends import load_model
    from workbench.generation import GenerationConfig, generate

    cfg = GenerationConfig(max_new_tokens=max_new)
    out = {}
    for group in engines:
        loaded: dict[str, _Loaded] = {}
        for label, options in group:
            began = time.perf_counter()
            # on CPU a steering engine uses 32-token KV blocks (the back end's choice): the
            # plain engine gets the same, so that both reuse cached prompts alike; on a GPU
            # the group's engines share the card's memory
            if torch.cuda.is_available():
                device_options = {"gpu_memory_utilization": round(0.85 / len(group), 3)}
            else:
                device_options = {"block_size": 32}
            lm = load_model(
                f"vllm:{model}",
                dtype="float32",
                options={
                    "max_model_len": 1024,
                    **device_options,
                    **{k: v for k, v in options.items() if k != "in_pass_too"},
                },
            )
            kinds = {}
            if options["steering"]:
                kinds["steered"] = spec
            if options.get("in_pass_too"):
                kinds["steered_in_pass"] = spec.replace(mode="in_pass")
            loaded[label] = _Loaded(lm, kinds, round(time.perf_counter() - began, 1))
            loaded[label].step_times = _timed_steps(lm)
        for e in loaded.values():
            # a warm-up at full size: the first pass compiles the batch's shapes and fills the
            # prefix cache, which every timed pass then finds as the others do
            generate(e.lm, prompts, cfg, progress=False)
            for s in e.kinds.values():
                e.lm.generate_steered(prompts, cfg, [s] * len(prompts), progress=False)
        for r in range(repeats):
            # the engines' order reversed every other round (ABBA): neither always runs first
            for e in list(loaded.values())[:: 1 if r % 2 == 0 else -1]:
                e.clock()
                t = time.perf_counter()
                gens = generate(e.lm, prompts, cfg, progress=False)
                e.runs["unsteered"].append(
                    (time.perf_counter() - t, sum(g.num_tokens for g in gens))
                )
                e.clock("unsteered")
                e.texts["unsteered"] = [g.text for g in gens]
                for kind, s in e.kinds.items():
                    t = time.perf_counter()
                    gens, records = e.lm.generate_steered(
                        prompts, cfg, [s] * len(prompts), progress=False
                    )
                    e.runs[kind].append((time.perf_counter() - t, sum(g.num_tokens for g in gens)))
                    e.clock(kind)
                    e.texts[kind] = [g.text for g in gens]
                    e.fired = sum(bool(r["fired"]) for r in records)
        for label, e in loaded.items():
            e.lm.close()
            out[label] = {
                **_best_runs(e.runs, e.steps),
                "texts": e.texts,
                "fired": e.fired,
                "start_s": e.start_s,
                # the engines loaded together, their passes alternating (none: alone)
                "group": list(loaded) if len(loaded) > 1 else [],
            }
    return out


def _post(url, body):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def server(model, spec, prompts, max_new, repeats):
    import tempfile

    from workbench.backends.serve import start_vllm_server

    registry = tempfile.mkdtemp(prefix="bench-registry-")
    extra = os.environ.get("BENCH_SERVER_ARGS", "").split()
    proc, url = start_vllm_server(
        model,
        "bench",
        dtype="float32",
        max_model_len=1024,
        steering=True,
        registry=registry,
        extra=extra,
    )
    try:
        _post(url + "/abstainers", spec.to_dict())

        def ask(prompt, kind, n=max_new):
            messages = [{"role": "user", "content": prompt}]
            body = {"model": "bench", "messages": messages, "max_tokens": n, "temperature": 0}
            if kind == "steered":  # the gate read in the answer's own prefill
                body["steering"] = {"abstainer": spec.name}
            elif kind == "gate pass":  # the same gate on the same prompt, in a request first
                body["steering"] = {"abstainer": spec.name, "gate_prompt": messages}
            return _post(url + "/chat/completions", body)

        def burst(kind, items=prompts, n=max_new):
            with cf.ThreadPoolExecutor(len(items)) as ex:
                return list(ex.map(lambda p: ask(p, kind, n), items))

        def new(kind, r):
            """The prompts with a mark of this pass's own in front: none of a question's
            key/value blocks comes from the prefix cache (the chat template's shared start
            may)."""
            return [f"Question {kind[0]}{r}.{i}: {p}" for i, p in enumerate(prompts)]

        kinds = ("unsteered", "steered", "gate pass")
        for kind in kinds:  # warm-up at full size, as in process
            burst(kind)
        runs: dict = {k: [] for k in kinds} | {f"{k}, new": [] for k in kinds}
        texts: dict = {}
        for r in range(repeats):
            for kind in kinds:
                for key, items in ((kind, prompts), (f"{kind}, new", new(kind, r))):
                    t = time.perf_counter()
                    answers = burst(kind, items)
                    secs = time.perf_counter() - t
                    tokens = sum(a["usage"]["completion_tokens"] for a in answers)
                    runs[key].append((secs, tokens))
                    texts[key] = [a["choices"][0]["message"]["content"].strip() for a in answers]
        best = _best_runs(runs)
        out = {}
        for way, kind in (("gate in prefill", "steered"), ("gate pass", "gate pass")):
            out[way] = {
                "unsteered": best["unsteered"],
                "steered": best[kind],
                "texts": {"unsteered": texts["unsteered"], "steered": texts[kind]},
            }
            # new prompts: not the engine's prompts, so no answers to compare
            out[f"{way}, new prompts"] = {
                "unsteered": best["unsteered, new"],
                "steered": best[f"{kind}, new"],
                "texts": {},
            }
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> None:
    from _prompts import PROMPTS
    from workbench.steering.spec import SteerSpec

    model, spec_path, max_new, repeats = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    spec = SteerSpec.from_json(Path(spec_path).read_text())
    out = {}
    if "--no-in-process" not in sys.argv:
        out["in_process"] = in_process(model, spec, PROMPTS, max_new, repeats)
    if "--no-server" not in sys.argv:
        out["server"] = server(model, spec, PROMPTS, max_new, repeats)
    print(json.dumps(out))


if __name__ == "__main__":  # vLLM spawns processes
    main()
