"""Completions that carry ``steering``: the middleware ``serve --steering`` puts in front of
vLLM's app (``--middleware``), kept as raw ASGI because it holds, aborts and annotates the
answer vLLM's route streams.

A ``POST /v1/completions`` or ``/v1/chat/completions`` whose body has a ``steering`` field is
sent on as its unsteered answer, which reads the gate in its own prefill (``vllm_xargs``); the
answer is held back until the middleware has collected the decision from the workers: a shut
gate's answer goes out as it is, a fired gate's is aborted and the request sent again steered,
with a prefix-cache salt naming the abstainer; an ``in_pass`` abstainer's fired answer was
steered in its own pass and goes out as it is too (sent again only where a long prompt was
split over several engine steps). With ``gate_prompt``, or a request for several sequences
(``n``, ``best_of``), the gate runs first as a one-token request of its own.

Every other request goes to vLLM untouched, but for two checks at the door: a client's own
``vllm_xargs`` keys starting with ``workbench_`` (the workers read them inside the forward
pass) are a 400, and the abstainer routes (:mod:`.routes`, which the middleware mounts on
vLLM's app at start) need the API key with this server's one-line message, before vLLM's own
key check answers ``Unauthorized``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from workbench.backends.steer_server.asgi import (
    Annotate,
    Capture,
    Client,
    Held,
    read_body,
    replay,
    scope_for,
    send_json,
)
from workbench.backends.steer_server.errors import Reply, error, unauthorized
from workbench.backends.steer_server.server import SteeringServer
from workbench.backends.steer_server.store import AbstainerStore, log
from workbench.backends.vllm_steering import GATE, STEER, TAG, THEN, cache_salt, steers_prompt
from workbench.errors import ConfigError
from workbench.steering.spec import SteerSpec

#: the completion routes whose requests may carry ``steering``
ROUTES = ("/v1/completions", "/v1/chat/completions")
#: the abstainer routes' prefix (:mod:`.routes`)
ABSTAINERS = "/v1/abstainers"


class SteeringMiddleware:
    """The ASGI middleware ``serve --steering`` puts in front of vLLM's app: it mounts the
    abstainer routes on the app (at its first call, the lifespan's start), runs the gate of a
    request whose body has a ``steering`` field and passes it on steered or not, and leaves
    every other request to vLLM. Its state (:class:`~.server.SteeringServer`) is the routes'."""

    def __init__(self, app):
        self.app = app
        self.server = SteeringServer(app)
        self._mounted = False

    @property
    def store(self) -> AbstainerStore | None:
        """The registry the server reads (None without one)."""
        return self.server.store

    def _mount(self, app: Any) -> None:
        """The abstainer routes on vLLM's FastAPI app, listed in its OpenAPI document, with
        this middleware's state in ``app.state.workbench_steering``."""
        self._mounted = True
        if app is None or not hasattr(app, "include_router"):
            return
        # FastAPI is vLLM's: the main environment imports this module without it (serve)
        from workbench.backends.steer_server.routes import router

        app.state.workbench_steering = self.server
        app.include_router(router)
        app.openapi_schema = None  # written again, with the routes, when next asked

    async def __call__(self, scope, receive, send):
        if not self._mounted:
            self._mount(scope.get("app"))
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        try:
            if path == ABSTAINERS or path.startswith(ABSTAINERS + "/"):
                if not self.server.authorized(scope):
                    raise unauthorized()
                return await self.app(scope, receive, send)
            if method == "POST" and path in ROUTES:
                body = await read_body(receive)
                try:
                    data = json.loads(body)
                except ValueError:
                    data = None
                xargs = data.get("vllm_xargs") if isinstance(data, dict) else None
                if isinstance(xargs, dict) and any(str(k).startswith("workbench_") for k in xargs):
                    # the workers read these inside the forward pass: only the server sets them
                    raise error(
                        400,
                        "vllm_xargs keys starting with 'workbench_' are this server's own: ask "
                        "for an abstainer with the 'steering' field",
                    )
                if isinstance(data, dict) and data.get("steering") is not None:
                    if not self.server.authorized(scope):
                        raise unauthorized()
                    return await self._steer(scope, receive, send, data)
                return await self.app(scope, replay(body, receive), send)
        except Reply as r:
            return await send_json(send, r.status, r.body)
        return await self.app(scope, receive, send)

    def _spec(self, steering: Any) -> SteerSpec:
        """The spec a request's ``steering`` field names or holds, checked; a 400 otherwise."""
        if not isinstance(steering, dict):
            raise error(
                400, '\'steering\' must be an object: {"abstainer": NAME} or {"spec": {...}}'
            )
        unknown = set(steering) - {"abstainer", "spec", "gate_prompt", "decision"}
        if unknown:
            raise error(
                400,
                f"'steering' has unknown field(s) {', '.join(sorted(unknown))}; it takes "
                "abstainer or spec, and optionally gate_prompt or decision",
            )
        if "decision" in steering and not isinstance(steering["decision"], bool):
            raise error(400, "'steering.decision' must be true or false")
        if "spec" in steering:
            try:
                return SteerSpec.from_dict(steering["spec"])
            except ConfigError as e:
                raise error(400, str(e)) from None
        name = steering.get("abstainer")
        if not isinstance(name, str) or not name:
            raise error(400, "'steering' names no abstainer ({\"abstainer\": NAME})")
        store = self.server.store
        spec = store.load(name) if store else None
        if spec is None:
            known = ", ".join(store.names()) if store else ""
            raise error(
                400,
                f"unknown abstainer {name!r}; registered: {known or 'none'} "
                "(POST /v1/abstainers registers one)",
            )
        return spec

    # -- a steered request -----------------------------------------------------------------------
    async def _steer(self, scope, receive, send, data: dict):
        steering = data.pop("steering")
        prompt = data.get("prompt")
        if isinstance(prompt, list) and len(prompt) > 1 and not isinstance(prompt[0], int):
            raise error(400, "a steered completion takes one prompt; send one request per prompt")
        spec = self._spec(steering)
        digest = await self.server.register(scope["app"].state.engine_client, spec)
        record: dict[str, Any] = {"abstainer": spec.name, "digest": digest}
        if spec.warnings():
            record["warnings"] = spec.warnings()
        if "decision" in steering:
            record["fired"] = bool(steering["decision"])
        elif spec.gate is None:
            record["fired"] = True
        elif _gate_in_prefill(data, steering):
            return await self._steer_in_prefill(scope, receive, send, data, spec, digest, record)
        else:
            record.update(await self._gate(scope, receive, data, digest, steering))
        return await self._answer(scope, receive, send, data, digest, record)

    async def _answer(self, scope, receive, send, data: dict, digest: str, record: dict):
        """Pass the request on, steered (with a prefix-cache salt naming the abstainer) when
        ``record`` says the gate fired, the record added to the answer."""
        body = dict(data)
        check = None
        if record["fired"]:
            tag = f"steer-{uuid.uuid4().hex}"
            body["vllm_xargs"] = {**(body.get("vllm_xargs") or {}), STEER: digest, TAG: tag}
            salt = cache_salt(digest, True)
            body["cache_salt"] = f"{body['cache_salt']}|{salt}" if body.get("cache_salt") else salt
            engine = scope["app"].state.engine_client

            async def check() -> str | None:
                rec = await self.server.votes(engine, tag)
                return rec.get("failed") if rec else None

        raw = json.dumps(body).encode()
        return await self.app(
            scope_for(scope, raw), replay(raw, receive), Annotate(send, record, check)
        )

    async def _steer_in_prefill(
        self, scope, receive, send, data: dict, spec, digest: str, record: dict
    ) -> None:
        """The request sent on as its unsteered answer, reading its gate in its own prefill
        (:mod:`~workbench.backends.vllm_gated`'s way, over HTTP). Its answer is held back
        until the decision is collected from the workers: a shut gate lets it through (no
        pass of its own for the gate), a fired one aborts it, as a client's disconnect would,
        and sends the request again steered; an ``in_pass`` abstainer's fired answer was
        steered in that same pass (the workers say so) and goes through too."""
        engine = scope["app"].state.engine_client
        tag = f"gate-{uuid.uuid4().hex}"
        body = dict(data)
        xargs = {GATE: digest, TAG: tag}
        if spec.mode == "in_pass":
            xargs[THEN] = "1"
            assert self.server.shape is not None  # read when the spec was registered
            if steers_prompt(spec, self.server.shape[1]):  # its blocks are its own
                salt = f"workbench-in-pass:{uuid.uuid4().hex}"
                body["cache_salt"] = (
                    f"{body['cache_salt']}|{salt}" if body.get("cache_salt") else salt
                )
        body["vllm_xargs"] = {**(body.get("vllm_xargs") or {}), **xargs}
        raw = json.dumps(body).encode()
        held, abort, client = Held(), asyncio.Event(), Client(receive)
        answer = asyncio.ensure_future(
            self.app(scope_for(scope, raw), replay(raw, client, abort), held)
        )
        try:
            rec = await self._decision(engine, tag, answer, held)
        except BaseException:
            abort.set()
            raise
        if rec is None:  # the answer ended with no decision read
            await answer
            if client.gone or held.status != 200:  # gone, or vLLM's own error: as it is
                return await held.release(send)
        record.update(_decided(rec, tag))
        if not record["fired"]:
            await held.release(Annotate(send, record))
            return await answer
        if rec.get("steered"):  # steered in its own pass: asked at its end whether it failed

            async def check() -> str | None:
                if "failed" in rec:
                    return rec["failed"]
                later = await self.server.votes(engine, tag)
                return later.get("failed") if later else None

            await held.release(Annotate(send, record, check))
            return await answer
        abort.set()
        await asyncio.gather(answer, return_exceptions=True)  # its messages are dropped
        return await self._answer(scope, client, send, data, digest, record)

    async def _decision(self, engine, tag: str, answer: asyncio.Future, held: Held):
        """The gate's record under ``tag`` once the workers have it (asked after each wait of
        at most :data:`POLL` seconds, shared with the other waiting requests); None when the
        answer ended, or vLLM answered with an error, before a decision was read."""
        while True:
            ended = answer.done() or held.status not in (0, 200)
            rec = await self.server.votes(engine, tag)
            if rec is not None and "fired" in rec:
                return rec
            if ended:
                return None
            await asyncio.wait([answer], timeout=POLL)

    async def _gate(self, scope, receive, data: dict, digest: str, steering: dict) -> dict:
        tag = f"gate-{uuid.uuid4().hex}"
        gate = {
            k: v
            for k, v in data.items()
            if k
            not in (
                "stream",
                "stream_options",
                "logprobs",
                "top_logprobs",
                "n",
                "max_completion_tokens",
                "best_of",
            )
        }
        gate.update(max_tokens=1, temperature=0.0, vllm_xargs={GATE: digest, TAG: tag})
        prompt = steering.get("gate_prompt")
        if prompt is not None:
            if scope["path"].endswith("/chat/completions"):
                gate["messages"] = (
                    [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
                )
            else:
                gate["prompt"] = prompt
        raw = json.dumps(gate).encode()
        captured = Capture()
        await self.app(scope_for(scope, raw), replay(raw, receive), captured)
        if captured.status != 200:
            try:
                raise Reply(captured.status, json.loads(captured.body))
            except ValueError:
                raise error(captured.status, captured.body.decode(errors="replace")) from None
        return _decided(await self.server.votes(scope["app"].state.engine_client, tag), tag)


def _decided(rec: dict | None, tag: str) -> dict:
    """The gate's decision recorded under ``tag`` (fired, votes, similarities); a 500 where the
    workers recorded none."""
    if rec is None or "fired" not in rec:
        log(f"the gate of {tag} recorded no decision")
        raise error(500, "the gate recorded no decision for this request")
    return {"fired": rec["fired"], "votes": rec["votes"], "similarities": rec["similarities"]}


#: seconds between asks for a decision the workers have not recorded yet (each ask waits for
#: the engine's current step, so a busy engine is asked about once a step)
POLL = 0.005
#: request fields that make vLLM run several sequences for one request: their gate is read
#: in a pass of its own (one decision, read once)
_SEVERAL = ("n", "best_of", "use_beam_search")


def _gate_in_prefill(data: dict, steering: dict) -> bool:
    """The gate can be read in the answer's own prefill: it reads the request's own prompt,
    and the request runs one sequence."""
    several = any(data.get(k) not in (None, 1, False) for k in _SEVERAL)
    return "gate_prompt" not in steering and not several
