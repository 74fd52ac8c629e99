"""The steering spec and the server's steering middleware, without a model or vLLM.

The spec must survive JSON exactly (it travels to vLLM's workers, a server's registry and API
requests). The middleware is driven as an ASGI app in front of a stand-in for vLLM's routes
(which echoes the request it was handed) and a stand-in engine client (which records
registrations and answers the gate's votes), so what it sends on, what it answers and what it
keeps on disk are checked directly.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
import torch

from workbench.backends.steer_server import REGISTRY_ENV, SteeringMiddleware
from workbench.backends.vllm_steering import GATE, STEER, TAG, cache_salt
from workbench.errors import ConfigError
from workbench.steering.conditional import steerer_of
from workbench.steering.spec import GateSpec, SteerSpec


def _spec(name="river", gated=True, mode="separate") -> SteerSpec:
    g = torch.Generator().manual_seed(0)
    gate = None
    if gated:
        gate = GateSpec(
            (3, 7),
            torch.randn(2, 8, generator=g),
            torch.randn(2, 8, generator=g),
            (0.1, -0.2),
            "all",
            True,
            False,
        )
    return SteerSpec(name, (4, 5), torch.randn(2, 8, generator=g) / 3, 0.6, gate, mode)


def test_spec_round_trips_exactly_and_names_its_content():
    spec = _spec()
    back = SteerSpec.from_json(spec.to_json())
    assert torch.equal(back.vectors, spec.vectors) and torch.equal(back.gate.means, spec.gate.means)
    assert back.gate.thresholds == spec.gate.thresholds and back.digest() == spec.digest()
    assert _spec(mode="in_pass").digest() != spec.digest()


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"name": "x"}, "malformed"),
        ({"name": "a b", "layers": [1], "vectors": [[0.0]], "strength": 1}, "abstainer name"),
        ({"name": "x", "layers": [1, 2], "vectors": [[0.0]], "strength": 1}, "2 layers but 1"),
        ({"name": "x", "layers": [1], "vectors": [[0.0]], "strength": 1, "mode": "later"}, "mode"),
    ],
)
def test_a_malformed_spec_is_one_line(bad, message):
    with pytest.raises(ConfigError, match=message) as e:
        SteerSpec.from_dict(bad)
    assert "\n" not in str(e.value)


def test_the_engine_runs_the_same_spec():
    spec = _spec()
    steerer = steerer_of(spec)
    assert steerer.plan.layers == [4, 5] and torch.equal(steerer.plan.vectors, spec.vectors)
    assert steerer.condition.layers == [3, 7] and steerer.condition.inclusive


class _Engine:
    """vLLM's engine client as the middleware uses it: registrations and the gate's votes."""

    def __init__(self, fire: bool):
        self.fire, self.registered, self.tags = fire, [], []

    async def collective_rpc(self, method, args=()):
        if method == "workbench_register":
            self.registered.append(json.loads(args[0])["name"])
            return [None]
        tags = args[0]
        return [
            {
                t: {"fired": self.fire, "votes": [self.fire, True], "similarities": [0.5, 0.2]}
                for t in tags
            }
        ]


def _app(engine, seen):
    """vLLM's routes: answer with the request body they were handed."""

    async def app(scope, receive, send):
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        seen.append(json.loads(body))
        data = json.dumps({"choices": [{"message": {"content": "ok"}}], "echo": seen[-1]}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})

    app.state = SimpleNamespace(engine_client=engine)
    return app


def _call(mw, app, method, path, body=None):
    sent = []
    raw = json.dumps(body).encode() if body is not None else b""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"content-length", str(len(raw)).encode())],
        "app": app,
    }
    queue = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive():
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(m):
        sent.append(m)

    asyncio.run(mw(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(data), dict(start["headers"])


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "registry"))

    def make(fire=True):
        engine, seen = _Engine(fire), []
        app = _app(engine, seen)
        return SteeringMiddleware(app), app, engine, seen

    return make


CHAT = {"model": "m", "messages": [{"role": "user", "content": "Name a river."}], "max_tokens": 9}


@pytest.mark.parametrize("fire", [True, False])
def test_a_steered_request_is_gated_then_steered_only_when_it_fired(server, fire):
    mw, app, engine, seen = server(fire)
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    assert status == 200 and engine.registered == ["river"]
    status, body, headers = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"abstainer": "river"}}
    )
    assert status == 200
    gate, answer = seen
    digest = _spec().digest()
    assert (
        gate["max_tokens"] == 1 and gate["vllm_xargs"][GATE] == digest and TAG in gate["vllm_xargs"]
    )
    assert "steering" not in gate and "steering" not in answer and answer["max_tokens"] == 9
    if fire:
        assert answer["vllm_xargs"] == {STEER: digest}
        assert answer["cache_salt"] == cache_salt(digest, True)
    else:
        assert "vllm_xargs" not in answer and "cache_salt" not in answer
    assert body["steering"]["fired"] is fire and body["steering"]["votes"] == [fire, True]
    assert json.loads(headers[b"x-workbench-steering"])["fired"] is fire


def test_unknown_abstainer_is_a_one_line_400_and_nothing_is_sent(server):
    mw, app, _engine, seen = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    status, body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"abstainer": "lava"}}
    )
    message = body["error"]["message"]
    assert status == 400 and "'lava'" in message and "river" in message and "\n" not in message
    assert seen == []


def test_a_restarted_server_still_knows_its_abstainers(server):
    mw, app, _, _ = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    mw2, app2, engine2, seen2 = server()  # a new process: nothing registered with its workers
    status, listed, _ = _call(mw2, app2, "GET", "/v1/abstainers")
    assert [a["name"] for a in listed["abstainers"]] == ["river"]
    status, _body, _ = _call(
        mw2, app2, "POST", "/v1/chat/completions", {**CHAT, "steering": {"abstainer": "river"}}
    )
    assert status == 200 and engine2.registered == ["river"] and len(seen2) == 2


def test_plain_requests_pass_untouched_and_ungated_or_decided_ones_skip_the_gate(server):
    mw, app, _engine, seen = server()
    _call(mw, app, "POST", "/v1/chat/completions", CHAT)
    assert seen == [CHAT]
    _call(
        mw,
        app,
        "POST",
        "/v1/chat/completions",
        {**CHAT, "steering": {"spec": _spec("plain", gated=False).to_dict()}},
    )
    _call(
        mw,
        app,
        "POST",
        "/v1/chat/completions",
        {**CHAT, "steering": {"abstainer": "x", "decision": False, "spec": _spec().to_dict()}},
    )
    assert len(seen) == 3  # no gate requests
    assert seen[1]["vllm_xargs"][STEER] == _spec("plain", gated=False).digest()
    assert "vllm_xargs" not in seen[2]


def test_a_steered_completion_takes_one_prompt(server):
    mw, app, _, seen = server()
    status, body, _ = _call(
        mw,
        app,
        "POST",
        "/v1/completions",
        {"model": "m", "prompt": ["a", "b"], "steering": {"spec": _spec().to_dict()}},
    )
    assert status == 400 and "one prompt" in body["error"]["message"] and seen == []


def test_concurrent_requests_share_calls_to_the_workers(server):
    """Votes are fetched for all waiting requests at once, not one call per request."""
    mw, app, engine, _ = server()
    calls = []
    answer = engine.collective_rpc

    async def slow_rpc(method, args=()):
        if method == "workbench_votes":
            calls.append(list(args[0]))
            await asyncio.sleep(0.05)
        return await answer(method, args)

    engine.collective_rpc = slow_rpc
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())

    async def one(i):
        raw = json.dumps({**CHAT, "steering": {"abstainer": "river"}}).encode()
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": [(b"content-length", str(len(raw)).encode())],
            "app": app,
        }
        queue = [{"type": "http.request", "body": raw, "more_body": False}]
        sent = []

        async def receive():
            return queue.pop(0) if queue else {"type": "http.disconnect"}

        async def send(m):
            sent.append(m)

        await mw(scope, receive, send)
        return json.loads(b"".join(m.get("body", b"") for m in sent if "body" in m))

    async def burst():
        return await asyncio.gather(*(one(i) for i in range(16)))

    answers = asyncio.run(burst())
    assert all(a["steering"]["fired"] for a in answers)
    assert sum(len(c) for c in calls) == 16 and len(calls) < 16
