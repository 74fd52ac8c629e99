"""Load test of a shared steering server (``python -m workbench serve MODEL --steering``).

Several client processes send, concurrently and on loopback only, a mix of requests: plain
ones, ones steered by registered abstainers (gated and not), streaming ones, and about one in
ten malformed or hostile ones (a broken body, NaN in an inline spec, a gate of the wrong width,
an unknown abstainer, no API key, an aggregate typo). Every valid answer must equal the same
request's answer in a clean run (greedy, token for token; streams by their text), every bad
one must be a 4xx, the server must be up at the end and its memory must not grow across rounds.
Reported: requests/s, and p50/p99 latency of steered and unsteered requests, from the same run.

    python benchmarks/server_load.py [--rounds 4] [--processes 4] [--per-process 50]
        [--max-tokens 16] [--record]   (--record writes docs/results/server_load.json)

It starts its own server on the embedded model (fp32), registers two abstainers fitted on the
model, runs the rounds and stops the server with SIGTERM. ``tests/vllm_steering_worker.py``
runs :func:`load_rounds` with a small setting against the server of the vLLM tests.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "Name a river in Egypt.",
    "What is 12 times 12?",
    "How do volcanoes form?",
    "Who wrote Hamlet?",
    "Which ocean is the largest?",
    "Why is the sky blue?",
]


def post(url: str, body, key: str | None = None, timeout: float = 600, raw: bytes | None = None):
    """(status, parsed JSON body, or the stream's text) of one request."""
    data = raw if raw is not None else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        text, status = e.read().decode(errors="replace"), e.code
    if isinstance(body, dict) and body.get("stream") and status == 200:
        return status, _stream_text(text)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, {"raw": text}


def _stream_text(sse: str) -> dict:
    """A stream's content and whether it carried an error event."""
    parts, error = [], None
    for line in sse.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if "error" in event:
            error = event["error"]
            continue
        for choice in event.get("choices", []):
            parts.append((choice.get("delta") or {}).get("content") or "")
    return {"stream_text": "".join(parts), "error": error}


def answer_of(body: dict):
    """What must not change between runs: the token ids (the stream's text for streams)."""
    if "stream_text" in body:
        return body["stream_text"]
    return body["choices"][0]["token_ids"]


def valid_pool(abstainers: list[str], max_tokens: int, gate_pass: bool = False) -> list[dict]:
    """The valid requests: each question plain, steered by each abstainer, and streamed.
    ``gate_pass``: the steered ones name their own question as ``gate_prompt``, so that the
    server reads each gate in a one-token request first instead of in the answer's prefill."""
    pool = []
    for q in QUESTIONS:
        messages = [{"role": "user", "content": q}]
        base = {
            "model": "m",
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "return_token_ids": True,
        }
        pool.append(base)
        for a in abstainers:
            steering = {"abstainer": a, **({"gate_prompt": messages} if gate_pass else {})}
            pool.append({**base, "steering": steering})
        pool.append({**base, "stream": True, "return_token_ids": False})
    return pool


def bad_pool(spec: dict, max_tokens: int) -> list[tuple[str, dict | None, bytes | None, bool]]:
    """(label, body, raw bytes, send the key): requests that must be answered with a 4xx."""
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "Name a river."}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    nan = json.loads(json.dumps(spec))
    nan["vectors"][0][0] = math.nan
    narrow = json.loads(json.dumps(spec))
    if narrow.get("gate"):
        narrow["gate"]["vectors"] = [v[:-3] for v in narrow["gate"]["vectors"]]
    typo = json.loads(json.dumps(spec))
    if typo.get("gate"):
        typo["gate"]["aggregate"] = "majorty"
    return [
        ("broken JSON with a steering field", None, b'{"steering": {"abstainer": ', True),
        ("NaN in an inline spec", {**chat, "steering": {"spec": nan}}, None, True),
        ("a gate of the wrong width", {**chat, "steering": {"spec": narrow}}, None, True),
        ("an aggregate typo", {**chat, "steering": {"spec": typo}}, None, True),
        ("an unknown abstainer", {**chat, "steering": {"abstainer": "no-such"}}, None, True),
        ("no API key", {**chat, "steering": {"abstainer": spec["name"]}}, None, False),
    ]


def _client(args) -> list[dict]:
    """One client process: its share of the round, a few requests at a time."""
    url, key, jobs, threads = args

    def one(job):
        kind, i, body, raw, with_key = job
        start = time.perf_counter()
        status, answer = post(url + "/chat/completions", body, key if with_key else None, raw=raw)
        return {
            "kind": kind,
            "i": i,
            "status": status,
            "answer": answer,
            "seconds": time.perf_counter() - start,
            "steered": isinstance(body, dict) and "steering" in body,
        }

    with cf.ThreadPoolExecutor(threads) as ex:
        return list(ex.map(one, jobs))


def server_rss(pgid: int) -> int:
    """Resident bytes of every process in the server's process group (Linux)."""
    from workbench.backends.serve import group_members

    total = 0
    for pid in group_members(pgid):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return total


def served_group(cli_pid: int) -> int | None:
    """The process group of the vLLM server a ``serve`` command started (its child, which
    runs in a session of its own)."""
    from workbench.backends.serve import processes

    return next((group for _, _, ppid, group in processes() if ppid == cli_pid), None)


def load_rounds(
    url: str,
    key: str | None,
    pool: list[dict],
    bad: list,
    clean: list,
    *,
    rounds: int,
    processes: int,
    per_process: int,
    threads: int = 4,
    bad_every: int = 10,
    pgid: int | None = None,
    seed: int = 0,
) -> dict:
    """Rounds of concurrent mixed traffic; ``clean[i]`` is ``pool[i]``'s answer in a clean run.
    Returns counts of mismatches and of bad requests not answered with a 4xx, latencies,
    requests/s per round and the server's memory after each round."""
    rng = random.Random(seed)
    report: dict = {
        "requests": 0,
        "mismatched": [],
        "bad_not_4xx": [],
        "errors": [],
        "rps": [],
        "rss": [],
        "latency": {"steered": [], "unsteered": []},
    }
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as workers:
        for _ in range(rounds):
            shares = []
            for _ in range(processes):
                jobs = []
                for n in range(per_process):
                    if n % bad_every == bad_every - 1:
                        j = rng.randrange(len(bad))
                        _label, body, raw, with_key = bad[j]
                        jobs.append(("bad", j, body, raw, with_key))
                    else:
                        i = rng.randrange(len(pool))
                        jobs.append(("valid", i, pool[i], None, True))
                shares.append((url, key, jobs, threads))
            start = time.perf_counter()
            results = [r for share in workers.map(_client, shares) for r in share]
            report["rps"].append(len(results) / (time.perf_counter() - start))
            report["requests"] += len(results)
            for r in results:
                if r["kind"] == "bad":
                    if not 400 <= r["status"] < 500:
                        report["bad_not_4xx"].append((bad[r["i"]][0], r["status"]))
                    continue
                if r["status"] != 200 or (
                    isinstance(r["answer"], dict) and r["answer"].get("error")
                ):
                    report["errors"].append((r["i"], r["status"], str(r["answer"])[:200]))
                    continue
                if answer_of(r["answer"]) != clean[r["i"]]:
                    report["mismatched"].append(r["i"])
                side = "steered" if r["steered"] else "unsteered"
                report["latency"][side].append(r["seconds"])
            if pgid is not None:
                report["rss"].append(server_rss(pgid))
    for side, xs in report["latency"].items():
        xs.sort()
        report["latency"][side] = {
            "n": len(xs),
            "p50": statistics.median(xs) if xs else None,
            "p99": xs[min(len(xs) - 1, math.ceil(0.99 * len(xs)) - 1)] if xs else None,
        }
    return report


def clean_answers(url: str, key: str | None, pool: list[dict]) -> list:
    """Each valid request's answer, sent alone, before any other traffic."""
    out = []
    for body in pool:
        status, answer = post(url + "/chat/completions", body, key)
        if status != 200:
            raise RuntimeError(f"a clean request failed ({status}): {answer}")
        out.append(answer_of(answer))
    return out


def _fit_abstainers(model: str) -> list:
    """Two abstainers fitted on the model: one gated on rivers, one always on."""
    import torch

    from workbench.backends import load_model
    from workbench.steering import collect_activations, fit_refusal_vector
    from workbench.steering.spec import GateSpec, SteerSpec

    lm = load_model(model, device="cpu", dtype="float32")
    refusal = fit_refusal_vector(lm, QUESTIONS, list(range(lm.num_layers)))
    layers = (10, 20)
    acts = collect_activations(lm, QUESTIONS, list(layers))
    means = acts.mean(0)
    vectors = torch.nn.functional.normalize(acts[0] - means, dim=-1)
    sims = torch.nn.functional.cosine_similarity(acts - means, vectors[None], dim=-1)
    thresholds = tuple(float((s[0] + s[1:].max()) / 2) for s in sims.T)
    gate = GateSpec(layers, vectors, means, thresholds, "all")
    return [
        SteerSpec("rivers", (14, 16), refusal[[14, 16]], 0.6, gate),
        SteerSpec("always", (12,), refusal[[12]], 0.5),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--per-process", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument(
        "--gate-pass",
        action="store_true",
        help="steered requests read their gate in a one-token request first (gate_prompt)",
    )
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()

    import signal
    import subprocess
    import tempfile

    from workbench.backends.serve import free_port, vllm_python

    specs = _fit_abstainers(args.model)
    key = "load-test-key"
    registry = tempfile.mkdtemp(prefix="workbench-load-")
    port = free_port()
    env = {**os.environ, "VLLM_API_KEY": key, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [
            str(vllm_python()),
            "-m",
            "workbench",
            "serve",
            args.model,
            "--name",
            "m",
            "--dtype",
            "float32",
            "--steering",
            "--registry",
            registry,
            "--port",
            str(port),
            "--log-file",
            os.path.join(registry, "server.log"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    assert server.stdout is not None
    for line in server.stdout:  # "serving: ..." once it answers
        if line.startswith("serving:"):
            break
    try:
        for s in specs:
            status, body = post(url + "/abstainers", s.to_dict(), key)
            assert status == 200, body
        pool = valid_pool([s.name for s in specs], args.max_tokens, args.gate_pass)
        bad = bad_pool(specs[0].to_dict(), args.max_tokens)
        clean = clean_answers(url, key, pool)
        pgid = served_group(server.pid)
        report = load_rounds(
            url,
            key,
            pool,
            bad,
            clean,
            rounds=args.rounds,
            processes=args.processes,
            per_process=args.per_process,
            pgid=pgid,
        )
        with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=10) as r:
            report["up_at_end"] = r.status == 200
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
    report["setting"] = vars(args)
    print(json.dumps({k: v for k, v in report.items() if k != "mismatched"}, indent=1))
    print(
        f"{report['requests']} requests; mismatched {len(report['mismatched'])}, bad not 4xx "
        f"{len(report['bad_not_4xx'])}, errors {len(report['errors'])}; requests/s "
        f"{statistics.mean(report['rps']):.2f}"
    )
    if args.record:
        out = ROOT / "docs" / "results" / "server_load.json"
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
