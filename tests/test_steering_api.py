"""The steering spec and the server's steering middleware, without a model or vLLM.

The spec must survive JSON exactly (it travels to vLLM's workers, a server's registry and API
requests). The middleware is driven as an ASGI app in front of a stand-in for vLLM's app (a
FastAPI app whose completion routes echo the request they were handed, on which the middleware
mounts its abstainer routes as it mounts them on vLLM's) and a stand-in engine client (which
records registrations and answers the gate's votes), so what it sends on, what it answers, what
the app's OpenAPI document lists and what it keeps on disk are checked directly.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
import torch

from workbench.backends.steer_server import REGISTRY_ENV, ROUTES, SteeringMiddleware
from workbench.backends.vllm_steering import GATE, STEER, TAG, THEN, cache_salt
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
        (
            {"name": "x", "layers": [1, 2], "vectors": [[0.0]], "strength": 1},
            "2 layers but the behaviour",
        ),
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
        self.failed: set[str] = set()  # abstainers whose steered requests fail in the workers
        self.steered = False  # a fired gate's request was steered in its own pass (THEN)

    async def collective_rpc(self, method, args=()):
        if method == "workbench_shape":
            return [(8, 10)]  # width 8, 10 blocks
        if method == "workbench_register":
            self.registered.append(json.loads(args[0])["name"])
            return [None]
        tags = args[0]
        gates = {
            t: {"fired": self.fire, "votes": [self.fire, True], "similarities": [0.5, 0.2]}
            for t in tags
            if t.startswith("gate-")
        }
        if self.steered and self.fire:
            for record in gates.values():
                record["steered"] = True
                if self.failed:
                    record["failed"] = "the steered activations became NaN or infinite at layer 5"
        failed = {
            t: {"failed": "the steered activations became NaN or infinite at layer 5"}
            for t in tags
            if t.startswith("steer-") and self.failed
        }
        return [{**gates, **failed}]


class _Asgi:
    """A raw ASGI app as a route's endpoint (Starlette calls a non-function endpoint as one)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)


def _vllm(routes, engine):
    """vLLM's app as the middleware meets it: FastAPI, its completion routes ``routes`` (raw
    ASGI), its engine client in ``state``."""
    from fastapi import FastAPI
    from starlette.routing import Route

    app = FastAPI()
    app.state.engine_client = engine
    for path in ROUTES:
        app.router.routes.append(Route(path, _Asgi(routes), methods=["POST"]))
    return app


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

    return _vllm(app, engine)


def _call(mw, app, method, path, body=None, key=None, query=b"", raw=None):
    sent = []
    raw = raw if raw is not None else json.dumps(body).encode() if body is not None else b""
    headers = [(b"content-length", str(len(raw)).encode())]
    if key is not None:
        headers.append((b"authorization", f"Bearer {key}".encode()))
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": headers,
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
def test_a_steered_request_reads_its_gate_in_its_answer_and_is_sent_again_when_it_fired(
    server, fire
):
    mw, app, engine, seen = server(fire)
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    assert status == 200 and engine.registered == ["river"]
    status, body, headers = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"abstainer": "river"}}
    )
    assert status == 200
    digest = _spec().digest()
    first = seen[0]  # the unsteered answer, its gate read in its prefill: no pass of its own
    assert first["max_tokens"] == 9 and first["vllm_xargs"][GATE] == digest
    assert first["vllm_xargs"][TAG].startswith("gate-") and "cache_salt" not in first
    assert THEN not in first["vllm_xargs"]  # a separate abstainer: steered from its first token
    assert all("steering" not in s for s in seen)
    if fire:
        answer = seen[1]
        assert answer["max_tokens"] == 9 and answer["vllm_xargs"][STEER] == digest
        assert answer["vllm_xargs"][TAG].startswith("steer-")  # the request's failures, if any
        assert answer["cache_salt"] == cache_salt(digest, True)
        assert body["echo"] == answer  # the answer given is the steered request's
    else:
        assert len(seen) == 1 and body["echo"] == first
    assert body["steering"]["fired"] is fire and body["steering"]["votes"] == [fire, True]
    assert json.loads(headers[b"x-workbench-steering"])["fired"] is fire


@pytest.mark.parametrize(
    "change", [{"steering": {"abstainer": "river", "gate_prompt": "About rivers?"}}, {"n": 2}]
)
def test_a_gate_on_another_prompt_or_several_sequences_runs_as_a_pass_of_its_own(server, change):
    mw, app, _, seen = server(False)
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    request = {**CHAT, "steering": {"abstainer": "river"}, **change}
    status, body, _ = _call(mw, app, "POST", "/v1/chat/completions", request)
    gate, answer = seen
    assert status == 200 and gate["max_tokens"] == 1 and GATE in gate["vllm_xargs"]
    assert "vllm_xargs" not in answer and body["echo"] == answer
    if "steering" in change:
        assert gate["messages"] == [{"role": "user", "content": "About rivers?"}]


def _streaming_app(engine, seen, chunks=6, status=200):
    """vLLM's streamed answers: a chunk per step until done or the client disconnects (read
    as vLLM's routes read it, on ``receive`` beside the work)."""

    async def app(scope, receive, send):
        m = await receive()
        seen.append({"body": json.loads(m["body"]), "disconnected": False})
        gone = asyncio.ensure_future(receive())
        await send({"type": "http.response.start", "status": status, "headers": []})
        for i in range(chunks):
            await asyncio.sleep(0.01)
            if gone.done():
                seen[-1]["disconnected"] = True
                return
            n = len(seen)
            await send(
                {"type": "http.response.body", "body": b"%d.%d " % (n, i), "more_body": True}
            )
        gone.cancel()
        await send({"type": "http.response.body", "body": b"data: [DONE]", "more_body": False})

    return _vllm(app, engine)


@pytest.mark.parametrize("fire", [True, False])
def test_a_streamed_answer_is_held_until_its_gate_decided(tmp_path, monkeypatch, fire):
    """Unfired: the stream reaches the client whole and in order; fired: the unsteered stream
    is aborted (its route reads a disconnect) and none of it reaches the client."""
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "registry"))
    engine, seen = _Engine(fire), []
    answer = engine.collective_rpc

    async def late(method, args=()):  # the decision is recorded a few steps in
        if method == "workbench_votes":
            await asyncio.sleep(0.02)
        return await answer(method, args)

    engine.collective_rpc = late
    app = _streaming_app(engine, seen)
    mw = SteeringMiddleware(app)
    request = {**CHAT, "stream": True, "steering": {"spec": _spec().to_dict()}}
    raw = json.dumps(request).encode()
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "app": app}
    scope["headers"] = [(b"content-length", str(len(raw)).encode())]
    queue = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list = []

    async def receive():
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()  # the client stays

    async def send(m):
        sent.append(m)

    asyncio.run(mw(scope, receive, send))
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1
    record = json.loads(dict(starts[0]["headers"])[b"x-workbench-steering"])
    assert record["fired"] is fire
    if fire:
        assert len(seen) == 2 and seen[0]["disconnected"] and not seen[1]["disconnected"]
        assert seen[1]["body"]["vllm_xargs"][STEER] == _spec().digest()
        assert text == b"2.0 2.1 2.2 2.3 2.4 2.5 data: [DONE]"
    else:
        assert len(seen) == 1 and not seen[0]["disconnected"]
        assert text == b"1.0 1.1 1.2 1.3 1.4 1.5 data: [DONE]"


def test_an_error_of_vllms_for_a_gated_request_reaches_the_client_as_it_is(server):
    """A request vLLM refuses (here a 400) reads no gate: its answer is passed on unchanged."""
    _mw, _app, engine, seen = server()

    async def refuse(scope, receive, send):
        await receive()
        seen.append(1)
        data = b'{"error": {"message": "max_tokens is too large", "code": 400}}'
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": data})

    refusing = _vllm(refuse, engine)
    mw = SteeringMiddleware(refusing)
    engine.fire = None  # no decision is ever recorded
    answer = engine.collective_rpc

    async def none(method, args=()):
        return [{}] if method == "workbench_votes" else await answer(method, args)

    engine.collective_rpc = none
    raw = {**CHAT, "steering": {"spec": _spec().to_dict()}}
    status, body, _ = _call(mw, refusing, "POST", "/v1/chat/completions", raw)
    assert status == 400 and body["error"]["message"] == "max_tokens is too large"
    assert seen == [1]


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


@pytest.mark.parametrize(
    "xargs",
    [
        {"workbench_capture": "x", "workbench_tag": "t"},  # not JSON: would raise in the pass
        {"workbench_steer": "0" * 64},  # an abstainer's digest, without the steering field
        {"workbench_tag": "t", "top_k": "5"},
    ],
)
@pytest.mark.parametrize("steered", [False, True])
def test_a_clients_own_workbench_xargs_are_a_400_and_reach_no_worker(server, xargs, steered):
    """The workers read ``workbench_*`` extra args inside the forward pass: only the server
    sets them (a malformed one would fail the engine's step, a digest would steer without the
    API key)."""
    mw, app, _engine, seen = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    request = {**CHAT, "vllm_xargs": xargs}
    if steered:
        request["steering"] = {"abstainer": "river"}
    status, body, _ = _call(mw, app, "POST", "/v1/chat/completions", request)
    message = body["error"]["message"]
    assert status == 400 and "'workbench_'" in message and "\n" not in message
    assert seen == []
    status, _body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "vllm_xargs": {"a": "1"}}
    )
    assert status == 200 and seen == [{**CHAT, "vllm_xargs": {"a": "1"}}]


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
    # 16 gates' votes, then 16 steered answers' failure checks
    assert sum(len(c) for c in calls) == 32 and len(calls) < 32


# -- checked at the door ---------------------------------------------------------------------------


def _bad(**change) -> dict:
    d = _spec().to_dict()
    for path, value in change.items():
        *head, last = path.split("__")
        target = d
        for h in head:
            target = target[h]
        target[last] = value
    return d


NAN = float("nan")
HOSTILE = {
    "NaN in a behaviour vector": (_bad(vectors=[[NAN] * 8, [0.0] * 8]), "NaN or infinite"),
    "inf in the gate's means": (
        _bad(gate__means=[[float("inf")] * 8, [0.0] * 8]),
        "gate's means hold NaN",
    ),
    "NaN strength": (_bad(strength=NAN), "strength nan is not finite"),
    "NaN threshold": (_bad(gate__thresholds=[NAN, 0.0]), "threshold is not finite"),
    "gate vectors of the wrong width": (
        _bad(gate__vectors=[[0.0] * 5, [0.0] * 5]),
        "gate's vectors have width 5",
    ),
    "gate means of the wrong width": (
        _bad(gate__means=[[0.0] * 9, [0.0] * 9]),
        "gate's means have width 9",
    ),
    "a typo in aggregate": (_bad(gate__aggregate="majorty"), "aggregate must be one of"),
    "a ragged vector": (_bad(vectors=[[0.0] * 8, [0.0] * 7]), "malformed"),
    "no layers": (_bad(layers=[], vectors=[]), "no behaviour layers"),
    "vectors for the wrong model": (
        _bad(vectors=[[0.0] * 6, [0.0] * 6], gate=None),
        "width 6; this model's is 8",
    ),
    "a layer the model lacks": (_bad(layers=[4, 10]), "layer 10 is outside 0..9"),
    "a gate layer the model lacks": (_bad(gate__layers=[3, -11]), "gate layer -11 is outside"),
    "a strength that is a string": (_bad(strength="high"), "malformed"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_spec_is_a_400_naming_the_field_and_reaches_no_worker(server, case):
    spec, message = HOSTILE[case]
    mw, app, engine, seen = server()
    for status, body, _ in (
        _call(mw, app, "POST", "/v1/abstainers", spec),
        _call(mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"spec": spec}}),
    ):
        assert status == 400, case
        assert message in body["error"]["message"] and "\n" not in body["error"]["message"]
    assert engine.registered == [] and seen == []  # no worker, no model call
    assert mw.store.names() == []  # nothing kept


def test_the_same_check_runs_in_process():
    """The spec's own checks run wherever a spec is built; the model's wherever it meets one."""
    for case, (spec, message) in HOSTILE.items():
        if "model" in case or "lacks" in case:
            built = SteerSpec.from_dict(spec)
            with pytest.raises(ConfigError, match=message.split(";")[0]):
                built.check_model(8, 10)
        else:
            with pytest.raises(ConfigError, match=message):
                SteerSpec.from_dict(spec)


def test_an_extreme_strength_is_served_and_said(server):
    mw, app, _, _ = server()
    status, body, _ = _call(
        mw,
        app,
        "POST",
        "/v1/chat/completions",
        {**CHAT, "steering": {"spec": _bad(strength=1e6, gate=None)}},
    )
    assert status == 200 and "strength 1e+06 is extreme" in body["steering"]["warnings"][0]
    status, body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"spec": _spec().to_dict()}}
    )
    assert "warnings" not in body["steering"]


@pytest.mark.parametrize("layers, own_blocks", [((4, 5), False), ((8, 9), True)])
@pytest.mark.parametrize("steered_in_its_pass", [True, False])
def test_an_in_pass_abstainers_fired_answer_is_steered_in_the_pass_that_read_its_gate(
    server, layers, own_blocks, steered_in_its_pass
):
    """CAST's order: the answer asks to be steered once its gate fires (THEN) and goes out as
    it is where the workers did so; where they could not (a prompt split over steps), it is
    sent again steered. Behaviour layers deeper than the gate (4, 5 against 3, 7: no) steer
    the prompt's own positions, so its blocks get a salt of their own."""
    mw, app, engine, seen = server(True)
    engine.steered = steered_in_its_pass
    spec = _spec(mode="in_pass").replace(layers=layers)
    status, body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"spec": spec.to_dict()}}
    )
    assert status == 200
    first = seen[0]
    assert first["vllm_xargs"][GATE] == spec.digest() and first["vllm_xargs"][THEN] == "1"
    assert ("cache_salt" in first) is own_blocks
    if steered_in_its_pass:
        assert len(seen) == 1 and body["echo"] == first
    else:
        assert len(seen) == 2 and seen[1]["vllm_xargs"][STEER] == spec.digest()
        assert seen[1]["cache_salt"] == cache_salt(spec.digest(), True)
    assert body["steering"]["fired"] is True and "steered" not in body["steering"]


def test_an_in_pass_answer_that_fails_after_its_gate_fired_is_a_422_alone(server):
    mw, app, engine, _ = server()
    engine.steered = True
    engine.failed.add("river")
    body = {**CHAT, "steering": {"spec": _spec(mode="in_pass").to_dict()}}
    status, body, _ = _call(mw, app, "POST", "/v1/chat/completions", body)
    assert status == 422 and "NaN or infinite at layer 5" in body["error"]["message"]


def test_a_steered_request_that_fails_in_the_workers_is_a_422_alone(server):
    mw, app, engine, _ = server()
    engine.failed.add("river")
    status, body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"spec": _spec().to_dict()}}
    )
    assert status == 422 and "NaN or infinite at layer 5" in body["error"]["message"]
    status, body, _ = _call(mw, app, "POST", "/v1/chat/completions", CHAT)  # plain: untouched
    assert status == 200


@pytest.mark.parametrize(
    "steering, message",
    [
        ({"abstainer": "river", "strenght": 2}, "unknown field(s) strenght"),
        ({"abstainer": "river", "decision": "yes"}, "must be true or false"),
        ("river", "must be an object"),
    ],
)
def test_a_bad_steering_field_is_one_line(server, steering, message):
    mw, app, _, seen = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    status, body, _ = _call(mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": steering})
    assert status == 400 and message in body["error"]["message"] and seen == []


# -- writes need a key; overwrites are explicit -------------------------------------------------


def test_with_an_api_key_every_route_of_the_middleware_needs_it(server, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sesame")
    mw, app, engine, seen = server()
    steered = {**CHAT, "steering": {"spec": _spec().to_dict()}}
    fit = {"model": "m", "name": "rivers", "related": ["a", "b"], "unrelated": ["c", "d"]}
    for method, path, body in [
        ("POST", "/v1/abstainers", _spec().to_dict()),
        ("GET", "/v1/abstainers", None),
        ("GET", "/v1/abstainers/river", None),
        ("DELETE", "/v1/abstainers/river", None),
        ("POST", "/v1/abstainers/fit", fit),
        ("POST", "/v1/chat/completions", steered),
    ]:
        for key in (None, "wrong"):
            status, answer, _ = _call(mw, app, method, path, body, key=key)
            assert status == 401 and "API key" in answer["error"]["message"], (method, path)
            if path.startswith("/v1/abstainers"):  # the routes' own check, behind the door's
                status, answer, _ = _call(app, app, method, path, body, key=key)
                assert status == 401 and "API key" in answer["error"]["message"], (method, path)
    assert engine.registered == [] and seen == [] and mw.store.names() == []
    assert _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict(), key="sesame")[0] == 200
    assert _call(mw, app, "POST", "/v1/chat/completions", steered, key="sesame")[0] == 200


def test_the_abstainer_routes_are_listed_in_the_apps_openapi_document(server):
    """The routes are FastAPI's, mounted on the app the middleware fronts: its OpenAPI
    document lists them, their pydantic request and response models and vLLM's error shape."""
    mw, app, _, _ = server()
    status, doc, _ = _call(mw, app, "GET", "/openapi.json")
    assert status == 200
    paths = {p: sorted(ops) for p, ops in doc["paths"].items() if p.startswith("/v1/abstainers")}
    assert paths == {
        "/v1/abstainers": ["get", "post"],
        "/v1/abstainers/fit": ["post"],
        "/v1/abstainers/{name}": ["delete", "get"],
    }
    fit = doc["paths"]["/v1/abstainers/fit"]["post"]
    body = fit["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/FitRequest") and {"200", "400", "401", "409"} <= set(
        fit["responses"]
    )
    schemas = doc["components"]["schemas"]
    assert set(schemas["ErrorInfo"]["properties"]) == {"message", "type", "param", "code"}
    assert {"related", "unrelated", "validation", "params"} <= set(
        schemas["FitRequest"]["properties"]
    )
    listed = doc["paths"]["/v1/abstainers"]["get"]["responses"]["200"]["content"]
    assert listed["application/json"]["schema"]["$ref"].endswith("/Listed")


def test_one_abstainer_is_read_by_name(server):
    mw, app, _, _ = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    status, one, _ = _call(mw, app, "GET", "/v1/abstainers/river")
    digest = _spec().digest()
    assert status == 200
    assert one == {"name": "river", "digest": digest, "mode": "separate", "gated": True}
    status, body, _ = _call(mw, app, "GET", "/v1/abstainers/lava")
    assert status == 404 and body["error"]["type"] == "NotFoundError"
    assert body["error"]["message"] == "no abstainer 'lava' is registered"


def test_a_body_that_is_not_json_or_of_the_wrong_shape_is_one_line(server):
    mw, app, engine, _ = server()
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers", raw=b'{"name": "x", ')
    assert status == 400 and "not JSON" in body["error"]["message"]
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers", {"name": "x", "strength": 1})
    message = body["error"]["message"]
    assert status == 400 and "malformed" in message and "\n" not in message
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers/fit", [1, 2])
    assert status == 400 and body["error"]["message"] == "the fit request must be a JSON object"
    assert engine.registered == [] and mw.store.names() == []


def test_replacing_an_abstainer_needs_replace_and_delete_forgets_one(server, capsys):
    mw, app, _, _ = server()
    first, other = _spec(), _spec(mode="in_pass")
    assert _call(mw, app, "POST", "/v1/abstainers", first.to_dict())[0] == 200
    assert _call(mw, app, "POST", "/v1/abstainers", first.to_dict())[0] == 200  # same: no-op
    status, body, _ = _call(mw, app, "POST", "/v1/abstainers", other.to_dict())
    assert status == 409 and "replace=true" in body["error"]["message"]
    assert mw.store.load("river").digest() == first.digest()  # kept
    status, body, _ = _call(
        mw, app, "POST", "/v1/abstainers", other.to_dict(), query=b"replace=true"
    )
    assert status == 200 and mw.store.load("river").digest() == other.digest()
    assert f"replaced: digest {first.digest()} -> {other.digest()}" in capsys.readouterr().err
    assert _call(mw, app, "DELETE", "/v1/abstainers/river")[0] == 200
    assert _call(mw, app, "GET", "/v1/abstainers")[1] == {"abstainers": []}
    status, body, _ = _call(mw, app, "DELETE", "/v1/abstainers/river")
    assert status == 404 and "no abstainer 'river'" in body["error"]["message"]


def test_a_corrupt_registry_file_is_skipped_with_one_warning(server, tmp_path, capsys):
    mw, app, _, _ = server()
    _call(mw, app, "POST", "/v1/abstainers", _spec().to_dict())
    folder = tmp_path / "registry"
    (folder / "broken.json").write_text('{"name": "broken", "layers": [1], "vec')
    (folder / "nan.json").write_text(json.dumps(_bad(name="nan", strength=NAN)))
    (folder / "latin.json").write_bytes(b"\xff\xfe")
    mw2, app2, _, seen2 = server()  # a restart
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("skipping" in line for line in err)
    assert any("broken.json" in line and "not JSON" in line for line in err)
    status, listed, _ = _call(mw2, app2, "GET", "/v1/abstainers")
    assert status == 200 and [a["name"] for a in listed["abstainers"]] == ["river"]
    status, body, _ = _call(
        mw2, app2, "POST", "/v1/chat/completions", {**CHAT, "steering": {"abstainer": "broken"}}
    )
    assert status == 400 and "unknown abstainer 'broken'" in body["error"]["message"]
    assert seen2 == []


def test_a_middleware_500_says_where_its_cause_was_logged(server):
    mw, app, engine, _ = server()
    answer = engine.collective_rpc

    async def no_votes(method, args=()):
        return [{}] if method == "workbench_votes" else await answer(method, args)

    engine.collective_rpc = no_votes
    status, body, _ = _call(
        mw, app, "POST", "/v1/chat/completions", {**CHAT, "steering": {"spec": _spec().to_dict()}}
    )
    assert status == 500 and "server's log" in body["error"]["message"]


# -- fitting an abstainer on the served model: POST /v1/abstainers/fit --------------------------


class _FitEngine(_Engine):
    """The engine client, plus activations for the capture requests the fit sends: a prompt
    about rivers points along the first axis, any other against it (and a little noise)."""

    def __init__(self, tokenizer_dir: str):
        super().__init__(True)
        self.prompts: dict[str, str] = {}  # capture tag -> the prompt's text
        self.vllm_config = SimpleNamespace(
            model_config=SimpleNamespace(
                tokenizer=tokenizer_dir, tokenizer_revision=None, trust_remote_code=False
            )
        )

    async def collective_rpc(self, method, args=()):
        if method != "workbench_captured":
            return await super().collective_rpc(method, args)
        out = {}
        for t in args[0]:
            text = self.prompts.pop(t)
            g = torch.Generator().manual_seed(len(text))
            acts = 0.1 * torch.randn(10, 8, generator=g)
            acts[:, 0] += 1.0 if "river" in text.lower() else -1.0
            out[t] = (list(acts.shape), acts.numpy().tobytes())
        return [out]


def _fit_app(engine, tokenizer):
    """vLLM's completions route: capture requests are remembered for the engine; answers are
    a few tokens."""

    async def app(scope, receive, send):
        body = json.loads((await receive())["body"])
        assert scope["path"] == "/v1/completions" and isinstance(body["prompt"], list)
        xargs = body.get("vllm_xargs") or {}
        if "workbench_capture" in xargs:
            assert body["cache_salt"].endswith(xargs["workbench_tag"])  # its own salt
            engine.prompts[xargs["workbench_tag"]] = tokenizer.decode(body["prompt"])
        ids = tokenizer("Sure, here it is.", add_special_tokens=False)["input_ids"]
        data = json.dumps(
            {"choices": [{"text": "Sure, here it is.", "token_ids": ids, "finish_reason": "stop"}]}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})

    return _vllm(app, engine)


RIVERS = [f"Tell me about the river number {i}." for i in range(9)]
OTHERS = [f"What is {i} plus {i}?" for i in range(9)]


@pytest.fixture
def fitter(tmp_path, monkeypatch, tiny_model_dir):
    from transformers import AutoTokenizer

    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "registry"))
    engine = _FitEngine(tiny_model_dir)
    app = _fit_app(engine, AutoTokenizer.from_pretrained(tiny_model_dir))
    return SteeringMiddleware(app), app, engine


def test_an_abstainer_fitted_on_the_server_is_registered_and_reads_the_concept(fitter):
    mw, app, engine = fitter
    body = {"model": "m", "name": "rivers", "related": RIVERS, "unrelated": OTHERS}
    status, got, _ = _call(mw, app, "POST", "/v1/abstainers/fit", body)
    assert status == 200, got
    assert got["name"] == "rivers" and engine.registered == ["rivers"]
    spec = mw.store.load("rivers")
    assert spec is not None and spec.digest() == got["digest"]
    assert got["gate"]["layers"] == list(spec.gate.layers) and spec.gate.layers
    # the gate points along the concept's axis; every capture was collected
    assert all(float(v[0]) > 0.9 for v in spec.gate.vectors) and engine.prompts == {}
    # a second fit of the name is a conflict unless it says replace
    status, again, _ = _call(mw, app, "POST", "/v1/abstainers/fit", body)
    assert status == 409 and "replace=true" in again["error"]["message"]
    status, _, _ = _call(mw, app, "POST", "/v1/abstainers/fit", body, query=b"replace=true")
    assert status == 200


@pytest.mark.parametrize(
    "change, message",
    [
        ({"related": RIVERS[:3]}, "related needs at least 2 questions"),
        ({"related": ["a river", 3]}, "'related' must be a list of questions"),
        ({"name": "fit"}, "cannot name an abstainer"),
        ({"colour": "blue"}, "unknown field(s) colour"),
        ({"params": {"n_layerz": 2}}, "'params' has no setting 'n_layerz'"),
        ({"params": {"n_layers": "2"}}, "'n_layers' must be"),
        ({"params": {"method": "repe_pca"}}, "workbench's methods"),
        ({"validation": {"related": RIVERS}}, "'validation.unrelated' must be a list"),
        ({"model": ""}, "'model' must be a non-empty string"),
    ],
)
def test_a_bad_fit_request_is_one_line_and_reaches_no_worker(fitter, change, message):
    mw, app, engine = fitter
    body = {"model": "m", "name": "rivers", "related": RIVERS, "unrelated": OTHERS, **change}
    status, got, _ = _call(mw, app, "POST", "/v1/abstainers/fit", body)
    assert status == 400, got
    assert message in got["error"]["message"] and "\n" not in got["error"]["message"]
    assert engine.registered == [] and mw.store.names() == []
