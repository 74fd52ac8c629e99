"""Runs in the vLLM environment (.venv-vllm): answers a job of tests/test_vllm_steering.py.

    python tests/vllm_steering_worker.py JOB.json OUT.json

The job holds abstainers (SteerSpec JSON), prompts each assigned one abstainer or none, and
generation settings; this side answers them inside vLLM, in process (one mixed batch per engine
setting: prefix caching and chunked prefill on, then off) and through ``serve --steering``
(a registry an earlier server left, concurrent requests, an unknown abstainer, hostile
requests, a load test), and optionally runs the verify slice's
steering cell on ``vllm:``. The other cases run on the in-process engine the job names for
each (``on_engine``): one engine per setting, none more.
"""

import concurrent.futures as cf
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from server_load import post

#: the shared server's API key (test-only)
KEY = "test-key-not-a-secret"


def in_process(job, specs, options, out, last_label: str):
    """The mixed batch on an engine of this setting, and the job's other parts that run on
    it (``on_engine``: part -> setting; the last setting by default), so that no other
    engine is started for them."""
    from vllm_worker import load_in_process
    from workbench.generation import GenerationConfig

    began = time.time()
    engine_options = {k: v for k, v in options.items() if k != "host_copy"}
    with _host_copy(options.get("host_copy", False)):
        lm = load_in_process(
            job["model"], dtype="float32", options={"max_model_len": 2048, **engine_options}
        )
    started = round(time.time() - began, 1)
    try:
        config = GenerationConfig(**job["config"])
        chosen = [specs[a] if a else None for a in job["assign"]]
        engine, added = lm.llm.llm_engine, []
        add = engine.add_request
        engine.add_request = lambda rid, *a, **k: added.append(rid) or add(rid, *a, **k)
        try:
            gens, records = lm.generate_steered(job["prompts"], config, chosen, progress=False)
        finally:
            del engine.add_request
        # the prompts whose answer was sent again, steered, after its gate fired in its prefill
        # (request ids end in "-<prompt>-steered": vllm_gated)
        restarted = sorted(int(r.split("-")[-2]) for r in added if r.endswith("-steered"))
        result = {
            "token_ids": [g.token_ids for g in gens],
            "texts": [g.text for g in gens],
            "records": records,
            "restarted": restarted,
            "cached_tokens": lm.last_cached_tokens,
            "started_in": started,
            "status": lm.llm.collective_rpc("workbench_status")[0],
            "aot_compile": os.environ.get("VLLM_USE_AOT_COMPILE"),
        }
        label = job_label(options, job)
        result["generate_seconds"] = round(time.time() - began - started, 1)

        def timed(name, fn, *args):
            start = time.time()
            got = fn(*args)
            out["seconds"][f"{label}/{name}"] = round(time.time() - start, 1)
            return got

        def here(part):  # this part of the job runs on this engine
            return job.get(part) and job.get("on_engine", {}).get(part, last_label) == label

        if job.get("capture"):
            out.setdefault("capture", {})[label] = timed("capture", capture, lm, job["capture"])
        if here("select_like"):
            out["select_like"] = timed("select_like", select_like, lm, job, specs)
        cases = [c for c, on in job.get("gate_in_prefill", {}).items() if on == label]
        if cases:
            got = timed("gate_in_prefill", gate_in_prefill, lm, job, chosen, cases)
            out.setdefault("gate_in_prefill", {}).update(got)
        if options.get("enable_chunked_prefill"):  # sampling refused in one line (CPU)
            try:
                lm.generate_prompts(["Hi."], GenerationConfig(max_new_tokens=2, do_sample=True))
                result["sampling"] = "answered"
            except Exception as e:
                result["sampling"] = f"{type(e).__name__}: {e}"
        if here("fit"):
            out["fit_in_process"] = timed("fit", fit_in_process, lm, job["fit"])
        if here("slice"):
            out["slice"] = timed("slice", slice_cell, lm, job)
        return result
    finally:
        lm.close()


@contextlib.contextmanager
def _host_copy(on: bool):
    """With ``on``, the steering buffers' host side a buffer of its own, as on a GPU (where it
    is pinned memory): on CPU it is otherwise the device buffer itself, and the copies in and
    the clearing that a GPU engine does would go unchecked."""
    import torch

    import workbench.backends.vllm_steering as vs

    original = vs._host_side
    if on:
        vs._host_side = lambda t: torch.zeros_like(t)
    try:
        yield
    finally:
        vs._host_side = original


def job_label(options, job):
    """The engine setting's name in the job."""
    return next(k for k, v in job["engine_settings"].items() if v == options)


def capture(lm, case):
    """Activations read inside vLLM (no Hugging Face weights): each case twice, the second
    time with the prompts' blocks in the prefix cache."""
    from workbench.steering import collect_activations

    got = {}
    for name, kwargs in case["cases"].items():
        first = collect_activations(lm, case["prompts"], **kwargs)
        again = collect_activations(lm, case["prompts"], **kwargs)
        got[name] = {"acts": first.tolist(), "again_equal": bool((first == again).all())}
    return got


def fit_in_process(lm, case):
    """An abstainer fitted from question lists on the vLLM engine (activations read inside it)."""
    from workbench.steering.fit import fit_from_questions

    spec = fit_from_questions(
        lm,
        "fitted",
        case["related"],
        case["unrelated"],
        case["validation"]["related"],
        case["validation"]["unrelated"],
        case["refusal_questions"],
    )
    return spec.to_dict()


def fit_on_server(url, registry, case, n, ask):
    """POST /v1/abstainers/fit on the shared server, the spec it kept, and an answer by it."""
    from pathlib import Path

    from workbench.backends.steer_server import AbstainerStore

    body = {"model": "m", "name": "fitted-on-server", **case}
    status, answer = post(url + "/abstainers/fit", body, KEY)
    spec = AbstainerStore(Path(registry)).load("fitted-on-server")
    steered = ask(url, case["related"][0], "fitted-on-server", n, KEY)
    return {
        "status": status,
        "answer": answer,
        "spec": spec.to_dict() if spec else None,
        "steered": steered,
        "unknown_field": post(url + "/abstainers/fit", {**body, "colour": "blue"}, KEY),
    }


def select_like(lm, job, specs):
    """SELECT's preset as vLLM runs it: the gate reads a reading-template prompt without a
    system turn (final norm at the last layer), the answer is to the wrapped question with
    SELECT-style system prompt."""
    from workbench.generation import GenerationConfig

    case = job["select_like"]
    config = GenerationConfig(**{**job["config"], "system_prompt": case["system"]})
    gens, records = lm.generate_steered(
        [case["wrap"].format(question=q) for q in case["questions"]],
        config,
        [specs[case["spec"]]] * len(case["questions"]),
        gate_prompts=[case["reading"].format(question=q) for q in case["questions"]],
        gate_system=None,
        progress=False,
    )
    return {"token_ids": [g.token_ids for g in gens], "records": records}


def gate_in_prefill(lm, job, chosen, cases):
    """The mixed batch with each answer reading its gate in its own prefill (the default)
    against a separate gate pass first (``gate_prompts``: the same prompts), where a fired
    answer ends on its first token (one token long) and with sampled answers (two samples
    each); how many separate gate passes the default way ran. Only the named ``cases``, each
    on the plan's prompts or the rows the job names (``gate_in_prefill_rows``)."""
    from workbench.generation import GenerationConfig

    passes = []
    gate = lm.gate
    lm.gate = lambda *a, **k: passes.append(1) or gate(*a, **k)
    out = {}
    try:
        for name, change in {
            "one token": {"max_new_tokens": 1},
            "samples": {"max_new_tokens": 6, "do_sample": True, "num_samples": 2, "seed": 5},
        }.items():
            if name not in cases:
                continue
            config = GenerationConfig(**{**job["config"], **change})
            rows = job.get("gate_in_prefill_rows", {}).get(name, range(len(job["prompts"])))
            prompts = [job["prompts"][i] for i in rows]
            specs = [chosen[i] for i in rows]
            ways = {}
            separate = {"gate_prompts": prompts, "gate_system": config.system_prompt}
            for way, kwargs in {"prefill": {}, "pass": separate}.items():
                before = len(passes)
                gens, records = lm.generate_steered(
                    prompts, config, specs, progress=False, **kwargs
                )
                ways[way] = {
                    "token_ids": [g.token_ids for g in gens],
                    "fired": [r["fired"] for r in records],
                    "gate_passes": len(passes) - before,
                }
            out[name] = ways
    finally:
        lm.gate = gate
    return out


def through_server(job, specs):
    """The server as an operator starts it for a group (:func:`shared_server`), on a
    registry that a server before it left behind: the plan's abstainers saved as ``POST
    /v1/abstainers`` saves them (a server reads the registry on every request, so what a
    restart keeps is what is on disk)."""
    from pathlib import Path

    from workbench.backends.steer_server import AbstainerStore

    registry = tempfile.mkdtemp(prefix="workbench-registry-")
    for spec in specs.values():
        AbstainerStore(Path(registry)).save(spec)

    def ask(url, prompt, name, max_tokens, key=None, ids=False):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if ids:
            body["return_token_ids"] = True
        if job["config"].get("system_prompt"):
            body["messages"].insert(
                0, {"role": "system", "content": job["config"]["system_prompt"]}
            )
        if name:
            body["steering"] = {"abstainer": name}
        return post(url + "/chat/completions", body, key=key)

    out: dict = {}
    began = time.time()
    out["shared"] = shared_server(job, specs, registry, ask, out)
    out["shared_seconds"] = round(time.time() - began, 1)
    return out


def _get(url, key=None):
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def shared_server(job, specs, registry, ask, out):
    """The server as an operator starts it for a group: ``python -m workbench serve
    --steering`` with its key in VLLM_API_KEY, vLLM's log in --log-file, a corrupt file left
    in the registry. The registry's abstainers listed and answered by name (the restart),
    registered again and asked concurrently; then hostile requests interleaved with other
    clients' requests, a small load test, and SIGTERM to the command."""
    import subprocess
    from pathlib import Path

    from server_load import bad_pool, clean_answers, load_rounds, served_group, valid_pool
    from workbench.backends.serve import free_port

    Path(registry, "corrupt.json").write_text('{"name": "corrupt", "layers": [1], "vec')
    port, log = free_port(), os.path.join(registry, "shared.log")
    cli = subprocess.Popen(
        [sys.executable, "-m", "workbench", "serve", job["model"].removeprefix("vllm:")]
        + ["--name", "m", "--dtype", "float32", "--steering", "--registry", registry]
        + ["--port", str(port), "--log-file", log],
        env={**os.environ, "VLLM_API_KEY": KEY},
        stdout=subprocess.PIPE,
        text=True,
    )
    began = time.time()
    url = f"http://127.0.0.1:{port}/v1"
    res: dict = {}
    group = None
    try:
        assert cli.stdout is not None
        res["banner"] = [
            cli.stdout.readline(),
            cli.stdout.readline(),
        ]  # "serving: ...", "steering: ..."
        res["started_in"] = round(time.time() - began, 1)
        group = served_group(cli.pid)
        res["health"] = _get(f"http://127.0.0.1:{port}/health")[0]
        status, doc = _get(f"http://127.0.0.1:{port}/openapi.json")
        res["openapi"] = [
            status,
            {p: sorted(ops) for p, ops in doc["paths"].items() if p.startswith("/v1/abstainers")},
            "/v1/chat/completions" in doc["paths"],
            sorted(doc["components"]["schemas"]["ErrorInfo"]["properties"]),
        ]
        res["no_key"] = _get(url + "/abstainers")
        out["after_restart"] = _get(url + "/abstainers", KEY)[1]
        n = job["config"]["max_new_tokens"]
        i = next(k for k, a in enumerate(job["assign"]) if a)
        out["restart_answer"] = [i, ask(url, job["prompts"][i], job["assign"][i], n, KEY)]
        # registered again over HTTP (the key's route), then every prompt of the plan at once
        # with a request naming no registered abstainer among them
        out["registered"] = [post(url + "/abstainers", s.to_dict(), KEY) for s in specs.values()]
        calls = [(p, a) for p, a in zip(job["prompts"], job["assign"])]
        calls.append(("Say hello.", "no-such-abstainer"))
        with cf.ThreadPoolExecutor(len(calls)) as ex:
            answers = list(ex.map(lambda c: ask(url, c[0], c[1], n, KEY), calls))
        out["answers"] = answers[:-1]
        out["unknown"] = answers[-1]
        res["seconds"] = {"start": res["started_in"], "plan": round(time.time() - began, 1)}
        mark = time.time()
        res.update(hostile_rounds(url, job, specs, ask, n))
        res["seconds"]["hostile"] = round(time.time() - mark, 1)
        mark = time.time()
        pool = valid_pool(["rivers", "always"], 8)
        clean = clean_answers(url, KEY, pool)
        bad = bad_pool(specs["rivers"].to_dict(), 8)
        report = load_rounds(
            url,
            KEY,
            pool,
            bad,
            clean,
            rounds=3,
            processes=2,
            per_process=12,
            threads=3,
            bad_every=6,
            pgid=group,
        )
        res["load"] = report
        res["seconds"]["load"] = round(time.time() - mark, 1)
        mark = time.time()
        if job.get("fit"):
            res["fit"] = fit_on_server(url, registry, job["fit"], n, ask)
        res["seconds"]["fit"] = round(time.time() - mark, 1)
        res["health_after"] = _get(f"http://127.0.0.1:{port}/health")[0]
    finally:
        cli.send_signal(signal.SIGTERM)
        try:
            res["sigterm_rc"] = cli.wait(120)
        except subprocess.TimeoutExpired:
            res["sigterm_rc"] = None
            cli.kill()
    res["left_in_group"] = _members(group) if group else None
    res["port_free"] = _port_free(port)
    res["log"] = Path(log).read_text()
    return res


def hostile_rounds(url, job, specs, ask, n):
    """Other clients' requests (every prompt of the plan, plain and steered) alone; then in one
    burst with every hostile request; then once more alone. Token ids of each round."""
    import copy
    import math

    def others():
        calls = list(zip(job["prompts"], job["assign"]))
        with cf.ThreadPoolExecutor(len(calls)) as ex:
            got = list(ex.map(lambda c: ask(url, c[0], c[1], n, KEY, ids=True), calls))
        return [b["choices"][0]["token_ids"] if s == 200 else [s, b] for s, b in got]

    base = specs["rivers"].to_dict()
    ungated = {**specs["always"].to_dict(), "name": "loud"}

    def variant(**change):
        d = copy.deepcopy(base)
        d["name"] = "hostile"
        for k, v in change.items():
            *head, last = k.split("__")
            t = d
            for h in head:
                t = t[h]
            t[last] = v
        return d

    width = len(base["vectors"][0])
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "Name a river in Egypt."}],
        "max_tokens": n,
        "temperature": 0,
    }
    hostile = {
        "nan vector": ("chat", variant(vectors=[[math.nan] * width] * len(base["layers"]))),
        "inf gate means": (
            "chat",
            variant(gate__means=[[math.inf] * width] * len(base["gate"]["layers"])),
        ),
        "nan strength": ("chat", variant(strength=math.nan)),
        "gate of the wrong width (inline)": (
            "chat",
            variant(gate__vectors=[[0.1] * 100] * len(base["gate"]["layers"])),
        ),
        "gate of the wrong width (registered)": (
            "register",
            variant(gate__means=[[0.1] * 100] * len(base["gate"]["layers"])),
        ),
        "aggregate typo": ("chat", variant(gate__aggregate="majorty")),
        "overwrite rivers": ("register", {**variant(strength=3.0), "name": "rivers"}),
        "strength 1e6": ("chat", {**ungated, "strength": 1e6}),
        "strength past fp32": ("chat", {**ungated, "strength": 1e39}),
        "strength past fp32, streamed": ("stream", {**ungated, "strength": 1e39}),
        "register without the key": ("register-nokey", variant()),
        "unknown abstainer": ("name", "no-such-abstainer"),
        "broken JSON": ("raw", None),
    }

    def hit(item):
        kind, payload = item
        if kind == "register":
            return post(url + "/abstainers", payload, KEY)
        if kind == "register-nokey":
            return post(url + "/abstainers", payload, None)
        if kind == "raw":
            return post(url + "/chat/completions", None, KEY, raw=b'{"steering": {"spec": ')
        if kind == "name":
            return post(
                url + "/chat/completions", {**chat, "steering": {"abstainer": payload}}, KEY
            )
        body = {**chat, "steering": {"spec": payload}}
        if kind == "stream":
            body["stream"] = True
        return post(url + "/chat/completions", body, KEY)

    clean = others()
    with cf.ThreadPoolExecutor(len(hostile) + 1) as ex:
        burst = ex.submit(others)
        answers = dict(zip(hostile, ex.map(hit, hostile.values())))
        during = burst.result()
    after = [others()]
    # the delete of a registered one, and a request naming it afterwards
    post(url + "/abstainers", {**ungated, "name": "temporary"}, KEY)
    deleted = urllib.request.Request(
        url + "/abstainers/temporary", method="DELETE", headers={"authorization": f"Bearer {KEY}"}
    )
    with urllib.request.urlopen(deleted) as r:
        delete_status = r.status
    named = post(url + "/chat/completions", {**chat, "steering": {"abstainer": "temporary"}}, KEY)
    listed = _get(url + "/abstainers", KEY)[1]
    return {
        "clean": clean,
        "during": during,
        "after": after,
        "hostile": answers,
        "delete": [delete_status, named],
        "listed": sorted(a["name"] for a in listed["abstainers"]),
    }


def _members(pgid):
    """Live processes left in a process group."""
    from workbench.backends.serve import group_members

    return group_members(pgid)


def _port_free(port):
    """Nothing listens on ``port`` and a new server can bind it (as servers do, with
    SO_REUSEADDR: the closed connections' TIME_WAIT entries stay a while)."""
    import socket

    with socket.socket() as c:
        if c.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def slice_cell(lm, job):
    """The verify slice (base, zero-shot, few-shot CoT, steering) as a grid on the open engine
    ``lm``, counting every load of Hugging Face weights (there should be none: the steering
    cell's vectors are read inside vLLM)."""
    from pathlib import Path

    import transformers

    from workbench.backends.hf import HFModel
    from workbench.experiments.verify import SLICE, run_slice

    loads = []
    hf_load, pretrained = HFModel.load, transformers.PreTrainedModel.from_pretrained

    def counted(original, what):
        def load(*args, **kwargs):
            loads.append(what)
            return original(*args, **kwargs)

        return classmethod(load)

    HFModel.load = counted(hf_load.__func__, "HFModel.load")
    transformers.PreTrainedModel.from_pretrained = counted(pretrained.__func__, "from_pretrained")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            table = run_slice(
                Path(tmp),
                {"models": [job["model"]], "techniques": SLICE["techniques"]},
                models={job["model"]: lm},
            )
    finally:
        HFModel.load, transformers.PreTrainedModel.from_pretrained = hf_load, pretrained
    cols = ["technique", "target", "seed", "question_index", "sample", "response", "gate_fired"]
    rows = json.loads(table[cols + ["gate_votes", "backend"]].to_json(orient="records"))
    return {"rows": rows, "hf_loads": loads, "hf_copy": lm._hf is not None}


def main(job_path: str, out_path: str) -> None:
    from workbench.steering.spec import SteerSpec

    with open(job_path) as f:
        job = json.loads(f.read())
    specs = {name: SteerSpec.from_dict(d) for name, d in job["specs"].items()}
    out: dict = {"seconds": {}}
    settings = list(job["engine_settings"].items())
    for label, options in settings:
        start = time.time()
        out[label] = in_process(job, specs, options, out, settings[-1][0])
        out["seconds"][label] = round(time.time() - start, 1)
    if job.get("server"):
        start = time.time()
        out["server"] = through_server(job, specs)
        out["seconds"]["server"] = round(time.time() - start, 1)
    with open(out_path, "w") as f:
        f.write(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:3])
