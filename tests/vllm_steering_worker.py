"""Runs in the vLLM environment (.venv-vllm): answers a job of tests/test_vllm_steering.py.

    python tests/vllm_steering_worker.py JOB.json OUT.json

The job holds abstainers (SteerSpec JSON), prompts each assigned one abstainer or none, and
generation settings; this side answers them inside vLLM, in process (one mixed batch per engine
setting: prefix caching and chunked prefill on, then off) and through ``serve --steering``
(concurrent requests, an unknown abstainer, a restart), and optionally runs the verify slice's
steering cell on ``vllm:``. The SELECT-like case and the slice run on the last in-process
engine: one engine per setting, none more.
"""

import concurrent.futures as cf
import json
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request


def post(url, body, timeout=300):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def in_process(job, specs, options, out, last: bool):
    """The mixed batch on an engine of this setting; on the last one (no prefix cache, no
    chunks: what neither case depends on), also the SELECT-like case and the verify slice,
    so that no other engine is started for them."""
    from vllm_worker import load_in_process
    from workbench.generation import GenerationConfig

    lm = load_in_process(job["model"], dtype="float32", options={"max_model_len": 2048, **options})
    try:
        config = GenerationConfig(**job["config"])
        chosen = [specs[a] if a else None for a in job["assign"]]
        gens, records = lm.generate_steered(job["prompts"], config, chosen, progress=False)
        result = {
            "token_ids": [g.token_ids for g in gens],
            "texts": [g.text for g in gens],
            "records": records,
            "cached_tokens": lm.last_cached_tokens,
        }
        if last and job.get("select_like"):
            out["select_like"] = select_like(lm, job, specs)
        if last and job.get("slice"):
            start = time.time()
            out["slice"] = slice_cell(lm, job)
            out["seconds"]["slice"] = round(time.time() - start, 1)
        return result
    finally:
        lm.close()


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


def through_server(job, specs):
    from workbench.backends.serve import start_vllm_server

    registry = tempfile.mkdtemp(prefix="workbench-registry-")
    out = {}

    def start(log):
        return start_vllm_server(
            job["model"].removeprefix("vllm:"),
            "m",
            dtype="float32",
            steering=True,
            registry=registry,
            log=log,
        )

    def ask(url, prompt, name, max_tokens):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if job["config"].get("system_prompt"):
            body["messages"].insert(
                0, {"role": "system", "content": job["config"]["system_prompt"]}
            )
        if name:
            body["steering"] = {"abstainer": name}
        return post(url + "/chat/completions", body)

    proc, url = start(os.path.join(registry, "server.log"))
    try:
        out["registered"] = [post(url + "/abstainers", s.to_dict()) for s in specs.values()]
        n = job["config"]["max_new_tokens"]
        calls = [(p, a) for p, a in zip(job["prompts"], job["assign"])]
        calls.append(("Say hello.", "no-such-abstainer"))
        with cf.ThreadPoolExecutor(len(calls)) as ex:
            answers = list(ex.map(lambda c: ask(url, c[0], c[1], n), calls))
        out["answers"] = answers[:-1]
        out["unknown"] = answers[-1]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    proc, url = start(os.path.join(registry, "server2.log"))
    try:
        with urllib.request.urlopen(url + "/abstainers") as r:
            out["after_restart"] = json.loads(r.read())
        i = next(k for k, a in enumerate(job["assign"]) if a)
        out["restart_answer"] = [i, ask(url, job["prompts"][i], job["assign"][i], n)]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return out


def slice_cell(lm, job):
    """The verify slice's steering cell as a grid on the open engine ``lm``."""
    from pathlib import Path

    from workbench.experiments.verify import run_slice

    with tempfile.TemporaryDirectory() as tmp:
        table = run_slice(
            Path(tmp),
            {"models": [job["model"]], "techniques": ["steering"]},
            models={job["model"]: lm},
        )
    cols = ["technique", "target", "seed", "question_index", "sample", "response", "gate_fired"]
    return json.loads(table[cols + ["gate_votes", "backend"]].to_json(orient="records"))


def main(job_path: str, out_path: str) -> None:
    from workbench.steering.spec import SteerSpec

    with open(job_path) as f:
        job = json.loads(f.read())
    specs = {name: SteerSpec.from_dict(d) for name, d in job["specs"].items()}
    out: dict = {"seconds": {}}
    settings = list(job["engine_settings"].items())
    for i, (label, options) in enumerate(settings):
        start = time.time()
        out[label] = in_process(job, specs, options, out, last=i == len(settings) - 1)
        out["seconds"][label] = round(time.time() - start, 1)
    if job.get("server"):
        start = time.time()
        out["server"] = through_server(job, specs)
        out["seconds"]["server"] = round(time.time() - start, 1)
    with open(out_path, "w") as f:
        f.write(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:3])
