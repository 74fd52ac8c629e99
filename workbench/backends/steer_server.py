"""Conditional steering through vLLM's OpenAI-compatible server (``serve --steering``).

An ASGI middleware in front of vLLM's routes (loaded with ``--middleware``; the workers carry
:mod:`workbench.backends.vllm_steering`):

``POST /v1/abstainers``
    register an abstainer (a :class:`~workbench.steering.spec.SteerSpec` as JSON). It is kept
    in the server's registry directory, so a restarted server still knows it. A name already
    registered with other content is a 409 unless the request says ``?replace=true`` (the
    replacement is logged); the same content again is a no-op.
``GET /v1/abstainers``
    the registered abstainers (name, digest, mode, whether gated).
``POST /v1/abstainers/fit``
    fit an abstainer on the served model from question lists alone
    (``{"model", "name", "related", "unrelated"}``, optionally ``validation``,
    ``refusal_questions``, ``params``, ``system``; :func:`_fit_request`): its activations are
    read inside vLLM through the server's own completions route
    (:func:`workbench.steering.fit.fit_from_questions` on a :class:`_ServedModel`), and
    it is registered as above (409 for a taken name unless ``?replace=true``).
``DELETE /v1/abstainers/NAME``
    forget one.
``POST /v1/completions``, ``POST /v1/chat/completions`` with a ``steering`` field
    ``{"abstainer": NAME}`` (registered) or ``{"spec": {...}}`` (inline), optionally
    ``"gate_prompt"`` (text, or chat messages, the gate reads instead of the request's own) or
    ``"decision": true|false`` (no gate). The middleware sends the request on as its
    unsteered answer, which reads the gate in its own prefill (``vllm_xargs``), and holds the
    answer back until it has collected the decision from the workers: a shut gate's answer
    goes out as it is, a fired gate's is aborted and the request sent again steered, with a
    prefix-cache salt naming the abstainer; an ``in_pass`` abstainer's fired answer was
    steered in its own pass and goes out as it is too (sent again only where a long prompt
    was split over several engine steps). With ``gate_prompt``, or a request for several
    sequences (``n``, ``best_of``), the gate runs first as a one-token request of its own.
    The answer carries ``"steering": {"abstainer", "fired", "votes", "similarities"}`` and
    the header ``x-workbench-steering`` (streams: the header only).

Any OpenAI client asks for it with ``extra_body={"steering": {"abstainer": "river"}}``. A
request naming an unknown abstainer is a 400 with one line; the others are unaffected.

Every spec is checked at the door, whatever brings it (registration, an inline spec, a file in
the registry): :class:`~workbench.steering.spec.SteerSpec` checks shapes, finite values and
enumerations, :meth:`~workbench.steering.spec.SteerSpec.check_model` the width and layers
against the served model; a bad one is a 400 naming the field and never reaches a worker or the
registry. A registry file that does not read as a spec is skipped with one warning. An extreme
(finite) strength is served, and the answer's steering record carries a ``warnings`` line. A
steered request whose activations still become non-finite fails alone (422; a stream ends with
an error event); the others' answers are untouched (:mod:`workbench.backends.vllm_steering`).

With an API key (``VLLM_API_KEY``, which ``serve --api-key`` sets), everything this middleware
answers or steers needs ``Authorization: Bearer KEY`` as vLLM's own routes do: registering
changes what other clients' requests do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import sys
import uuid
from pathlib import Path
from typing import Any

from workbench.backends.vllm_steering import GATE, STEER, TAG, THEN, cache_salt, steers_prompt
from workbench.errors import ConfigError

#: the environment variable naming the registry directory (set by ``serve --steering``)
REGISTRY_ENV = "WORKBENCH_STEERING_REGISTRY"
MIDDLEWARE = "workbench.backends.steer_server.SteeringMiddleware"
HEADER = b"x-workbench-steering"
ROUTES = ("/v1/completions", "/v1/chat/completions")


def default_registry(served_name: str) -> Path:
    """Where a server of ``served_name`` keeps its abstainers unless told otherwise."""
    from workbench.paths import cache_home

    return cache_home() / "served-abstainers" / served_name


class Registry:
    """Abstainers on disk (``<name>.json``): what survives a restart. A file that does not
    read as a valid spec is treated as absent (:meth:`skipped` says which and why)."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def save(self, spec) -> None:
        from workbench.paths import write_text_atomic

        self.directory.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path(spec.name), spec.to_json())

    def delete(self, name: str) -> bool:
        path = self.path(name)
        if not _safe(name) or not path.is_file():
            return False
        path.unlink()
        return True

    def _read(self, name: str):
        """(spec, None), or (None, why) for a file that is not a valid spec."""
        from workbench.steering.spec import SteerSpec

        try:
            return SteerSpec.from_json(self.path(name).read_text(encoding="utf-8")), None
        except (ConfigError, OSError, UnicodeDecodeError) as e:
            return None, str(e)

    def load(self, name: str):
        if not _safe(name) or not self.path(name).is_file():
            return None
        return self._read(name)[0]

    def specs(self) -> dict[str, Any]:
        """name -> spec of every valid abstainer (each file read once)."""
        read = {n: self._read(n)[0] for n in self._files()}
        return {n: spec for n, spec in read.items() if spec is not None}

    def names(self) -> list[str]:
        """The names of the valid abstainers."""
        return list(self.specs())

    def skipped(self) -> dict[str, str]:
        """file name -> why, for each file that is not a valid spec."""
        bad = {}
        for n in self._files():
            why = self._read(n)[1]
            if why is not None:
                bad[self.path(n).name] = why
        return bad

    def _files(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))


def _safe(name: str) -> bool:
    return bool(name) and "/" not in name and not name.startswith(".")


def _warn(message: str) -> None:
    """A line in the server's log (vLLM's stderr, or serve's --log-file)."""
    print(f"[workbench steering] {message}", file=sys.stderr, flush=True)


class _Reply(Exception):
    """A response the middleware gives itself (status, JSON body)."""

    def __init__(self, status: int, body: dict):
        self.status, self.body = status, body


_KINDS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    409: "ConflictError",
    422: "UnprocessableEntityError",
}


def _error(status: int, message: str) -> _Reply:
    kind = _KINDS.get(status, "Error")
    if status >= 500:
        message += " (the cause is in the server's log: stderr, or serve's --log-file)"
    return _Reply(
        status, {"error": {"message": message, "type": kind, "param": None, "code": status}}
    )


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive, abort: asyncio.Event | None = None):
    """``receive`` that gives ``body`` once, then waits on the client (disconnects) or, with
    ``abort``, until it is set: the route then reads a disconnect and vLLM aborts the request."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if abort is None:
            return await receive()
        if abort.is_set():
            return {"type": "http.disconnect"}
        client, stop = asyncio.ensure_future(receive()), asyncio.ensure_future(abort.wait())
        done, _ = await asyncio.wait({client, stop}, return_when=asyncio.FIRST_COMPLETED)
        (stop if client in done else client).cancel()
        return client.result() if client in done else {"type": "http.disconnect"}

    return replayed


def _scope_for(scope: dict, body: bytes) -> dict:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}


async def _send_json(send, status: int, body: dict, headers=()) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data, "more_body": False})


class SteeringMiddleware:
    """The ASGI middleware ``serve --steering`` puts in front of vLLM's app: it answers the
    ``/v1/abstainers`` routes from its registry, runs the gate of a request whose body has a
    ``steering`` field and passes it on steered or not, and leaves every other request to vLLM.
    It reads the registry folder from ``WORKBENCH_STEERING_REGISTRY`` and the key from
    ``VLLM_API_KEY``, as vLLM's ``--middleware`` constructs it with the app alone."""

    def __init__(self, app):
        self.app = app
        registry = os.environ.get(REGISTRY_ENV)
        self.registry = Registry(Path(registry)) if registry else None
        key = os.environ.get("VLLM_API_KEY")
        self._key = hashlib.sha256(key.encode()).digest() if key else None
        self.in_workers: set[str] = set()  # digests registered with the workers
        self._shape: tuple[int, int] | None = None  # the model's (hidden, layers), asked once
        self._waiting: dict[str, asyncio.Future] = {}  # tags whose records are wanted
        self._fetcher: asyncio.Future | None = None
        if self.registry is not None:
            for name, why in self.registry.skipped().items():
                _warn(f"skipping {self.registry.directory / name}: {why}")

    def _authorized(self, scope) -> bool:
        """The request carries the server's API key (always, when it has none)."""
        if self._key is None:
            return True
        header = dict(scope["headers"]).get(b"authorization", b"").decode(errors="replace")
        scheme, _, token = header.partition(" ")
        digest = hashlib.sha256(token.encode()).digest()
        return scheme.lower() == "bearer" and secrets.compare_digest(digest, self._key)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        try:
            if path == "/v1/abstainers" or path.startswith("/v1/abstainers/"):
                if not self._authorized(scope):
                    raise _error(401, "this server needs its API key (Authorization: Bearer KEY)")
                return await self._abstainers(scope, receive, send, method, path)
            if method == "POST" and path in ROUTES:
                body = await _read_body(receive)
                try:
                    data = json.loads(body)
                except ValueError:
                    data = None
                xargs = data.get("vllm_xargs") if isinstance(data, dict) else None
                if isinstance(xargs, dict) and any(str(k).startswith("workbench_") for k in xargs):
                    # the workers read these inside the forward pass: only the server sets them
                    raise _error(
                        400,
                        "vllm_xargs keys starting with 'workbench_' are this server's own: ask "
                        "for an abstainer with the 'steering' field",
                    )
                if isinstance(data, dict) and data.get("steering") is not None:
                    if not self._authorized(scope):
                        raise _error(
                            401, "this server needs its API key (Authorization: Bearer KEY)"
                        )
                    return await self._steer(scope, receive, send, data)
                return await self.app(scope, _replay(body, receive), send)
        except _Reply as r:
            return await _send_json(send, r.status, r.body)
        return await self.app(scope, receive, send)

    async def _votes(self, engine, tag: str) -> dict | None:
        """The votes recorded under ``tag``. Requests waiting at the same time share one call to
        the workers: while a call is out, new tags wait for the next one."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting[tag] = future
        if self._fetcher is None or self._fetcher.done():
            self._fetcher = asyncio.ensure_future(self._fetch(engine))
        return await future

    async def _fetch(self, engine) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            try:
                votes = (await engine.collective_rpc("workbench_votes", args=(list(batch),)))[0]
            except Exception as e:
                for f in batch.values():
                    f.set_exception(e)
                continue
            for t, f in batch.items():
                f.set_result(votes.get(t))

    # -- registration ----------------------------------------------------------------------------
    async def _abstainers(self, scope, receive, send, method: str, path: str):
        from workbench.steering.spec import SteerSpec

        name = path.removeprefix("/v1/abstainers").strip("/")
        if name == "fit" and method == "POST":
            return await self._fit(scope, receive, send)
        if name:
            if method != "DELETE":
                raise _error(405, f"use DELETE on /v1/abstainers/{name}")
            if self.registry is None or not self.registry.delete(name):
                raise _error(404, f"no abstainer {name!r} is registered")
            _warn(f"abstainer {name!r} deleted")
            return await _send_json(send, 200, {"deleted": name})
        if method == "GET":
            specs = self.registry.specs() if self.registry else {}
            listed = [
                {"name": n, "digest": s.digest(), "mode": s.mode, "gated": s.gate is not None}
                for n, s in specs.items()
            ]
            return await _send_json(send, 200, {"abstainers": listed})
        if method != "POST":
            raise _error(405, "use GET or POST on /v1/abstainers (DELETE on /v1/abstainers/NAME)")
        if self.registry is None:
            raise _error(400, "this server keeps no registry: start it with serve --steering")
        try:
            spec = SteerSpec.from_json((await _read_body(receive)).decode())
        except (ConfigError, UnicodeDecodeError) as e:
            raise _error(400, str(e)) from None
        query = scope.get("query_string", b"").decode(errors="replace")
        replace = any(p in ("replace=true", "replace=1") for p in query.split("&"))
        old = self.registry.load(spec.name)
        if old is not None and old.digest() != spec.digest() and not replace:
            raise _error(
                409,
                f"abstainer {spec.name!r} is registered with other content (digest "
                f"{old.digest()}); POST to /v1/abstainers?replace=true to replace it",
            )
        digest = await self._register(scope, spec)
        self.registry.save(spec)
        if old is not None and old.digest() != spec.digest():
            _warn(f"abstainer {spec.name!r} replaced: digest {old.digest()} -> {digest}")
        return await _send_json(send, 200, {"name": spec.name, "digest": digest})

    async def _fit(self, scope, receive, send):
        """``POST /v1/abstainers/fit``: an abstainer fitted on the served model from question
        lists (its activations read inside vLLM), registered as ``POST /v1/abstainers``
        registers one."""

        from workbench.steering.fit import FitSettings, fit_from_questions

        if self.registry is None:
            raise _error(400, "this server keeps no registry: start it with serve --steering")
        try:
            data = json.loads(await _read_body(receive))
        except (ValueError, UnicodeDecodeError):
            raise _error(400, "the fit request is not JSON") from None
        request = _fit_request(data)
        query = scope.get("query_string", b"").decode(errors="replace")
        replace = any(p in ("replace=true", "replace=1") for p in query.split("&"))
        old = self.registry.load(request["name"])
        if old is not None and not replace:
            raise _error(
                409,
                f"abstainer {request['name']!r} is registered (digest {old.digest()}); POST to "
                "/v1/abstainers/fit?replace=true to replace it",
            )
        known = list(FitSettings.field_names())
        unknown = sorted(set(request["params"]) - set(known))
        if unknown:
            raise _error(
                400, f"'params' has no setting {unknown[0]!r}; a fit takes {', '.join(known)}"
            )
        settings = {k: tuple(v) if isinstance(v, list) else v for k, v in request["params"].items()}
        try:
            params = FitSettings(**settings)
        except ConfigError as e:
            raise _error(400, f"'params': {e}") from None
        engine = scope["app"].state.engine_client
        if self._shape is None:
            self._shape = tuple((await engine.collective_rpc("workbench_shape"))[0])
        served = _ServedModel(self, scope, request["model"], asyncio.get_running_loop())
        await served.ready()
        try:
            spec = await asyncio.to_thread(
                fit_from_questions,
                served,
                request["name"],
                request["related"],
                request["unrelated"],
                request["val_related"],
                request["val_unrelated"],
                request["refusal_questions"],
                params,
                system=request["system"],
            )
        except ConfigError as e:
            raise _error(400, str(e)) from None
        digest = await self._register(scope, spec)
        self.registry.save(spec)
        _warn(
            f"abstainer {spec.name!r} fitted from {served.asked} prompts"
            + (f"; replaced digest {old.digest()}" if old is not None else "")
        )
        gate = spec.gate
        return await _send_json(
            send,
            200,
            {
                "name": spec.name,
                "digest": digest,
                "layers": list(spec.layers),
                "strength": spec.strength,
                "mode": spec.mode,
                "gate": None
                if gate is None
                else {
                    "layers": list(gate.layers),
                    "thresholds": list(gate.thresholds),
                    "aggregate": gate.aggregate,
                },
            },
        )

    async def _register(self, scope, spec) -> str:
        """The spec, checked against the served model, in the workers; its digest."""
        digest = spec.digest()
        if digest in self.in_workers:
            return digest
        engine = scope["app"].state.engine_client
        if self._shape is None:
            self._shape = tuple((await engine.collective_rpc("workbench_shape"))[0])
        try:
            spec.check_model(*self._shape)
        except ConfigError as e:
            raise _error(400, str(e)) from None
        try:
            await engine.collective_rpc("workbench_register", args=(spec.to_json(),))
        except Exception as e:  # checked above: anything left is the server's fault
            raise _error(500, f"abstainer {spec.name!r} could not be registered: {e}") from None
        self.in_workers.add(digest)
        return digest

    def _spec(self, steering: Any):
        from workbench.steering.spec import SteerSpec

        if not isinstance(steering, dict):
            raise _error(
                400, '\'steering\' must be an object: {"abstainer": NAME} or {"spec": {...}}'
            )
        unknown = set(steering) - {"abstainer", "spec", "gate_prompt", "decision"}
        if unknown:
            raise _error(
                400,
                f"'steering' has unknown field(s) {', '.join(sorted(unknown))}; it takes "
                "abstainer or spec, and optionally gate_prompt or decision",
            )
        if "decision" in steering and not isinstance(steering["decision"], bool):
            raise _error(400, "'steering.decision' must be true or false")
        if "spec" in steering:
            try:
                return SteerSpec.from_dict(steering["spec"])
            except ConfigError as e:
                raise _error(400, str(e)) from None
        name = steering.get("abstainer")
        if not isinstance(name, str) or not name:
            raise _error(400, "'steering' names no abstainer ({\"abstainer\": NAME})")
        spec = self.registry.load(name) if self.registry else None
        if spec is None:
            known = ", ".join(self.registry.names()) if self.registry else ""
            raise _error(
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
            raise _error(400, "a steered completion takes one prompt; send one request per prompt")
        spec = self._spec(steering)
        digest = await self._register(scope, spec)
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
                rec = await self._votes(engine, tag)
                return rec.get("failed") if rec else None

        raw = json.dumps(body).encode()
        return await self.app(
            _scope_for(scope, raw), _replay(raw, receive), _Annotate(send, record, check)
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
            assert self._shape is not None  # read when the spec was registered
            if steers_prompt(spec, self._shape[1]):  # its blocks are its own
                salt = f"workbench-in-pass:{uuid.uuid4().hex}"
                body["cache_salt"] = (
                    f"{body['cache_salt']}|{salt}" if body.get("cache_salt") else salt
                )
        body["vllm_xargs"] = {**(body.get("vllm_xargs") or {}), **xargs}
        raw = json.dumps(body).encode()
        held, abort, client = _Held(), asyncio.Event(), _Client(receive)
        answer = asyncio.ensure_future(
            self.app(_scope_for(scope, raw), _replay(raw, client, abort), held)
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
            await held.release(_Annotate(send, record))
            return await answer
        if rec.get("steered"):  # steered in its own pass: asked at its end whether it failed

            async def check() -> str | None:
                if "failed" in rec:
                    return rec["failed"]
                later = await self._votes(engine, tag)
                return later.get("failed") if later else None

            await held.release(_Annotate(send, record, check))
            return await answer
        abort.set()
        await asyncio.gather(answer, return_exceptions=True)  # its messages are dropped
        return await self._answer(scope, client, send, data, digest, record)

    async def _decision(self, engine, tag: str, answer: asyncio.Future, held: _Held):
        """The gate's record under ``tag`` once the workers have it (asked after each wait of
        at most :data:`POLL` seconds, shared with the other waiting requests); None when the
        answer ended, or vLLM answered with an error, before a decision was read."""
        while True:
            ended = answer.done() or held.status not in (0, 200)
            rec = await self._votes(engine, tag)
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
        captured = _Capture()
        await self.app(_scope_for(scope, raw), _replay(raw, receive), captured)
        if captured.status != 200:
            try:
                raise _Reply(captured.status, json.loads(captured.body))
            except ValueError:
                raise _error(captured.status, captured.body.decode(errors="replace")) from None
        return _decided(await self._votes(scope["app"].state.engine_client, tag), tag)


def _decided(rec: dict | None, tag: str) -> dict:
    """The gate's decision recorded under ``tag`` (fired, votes, similarities); a 500 where the
    workers recorded none."""
    if rec is None or "fired" not in rec:
        _warn(f"the gate of {tag} recorded no decision")
        raise _error(500, "the gate recorded no decision for this request")
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


class _Client:
    """The client's ``receive``, remembering whether the client went away."""

    def __init__(self, receive):
        self.receive, self.gone = receive, False

    async def __call__(self):
        message = await self.receive()
        self.gone = self.gone or message["type"] == "http.disconnect"
        return message


class _Held:
    """An ASGI ``send`` that keeps the response's messages until :meth:`release` passes them,
    and every later one, to the client."""

    def __init__(self) -> None:
        self.status = 0
        self.messages: list[dict] = []
        self.send = None

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
        if self.send is not None:
            return await self.send(message)
        self.messages.append(message)
        return None

    async def release(self, send) -> None:
        while self.messages:  # messages that arrive meanwhile join the queue
            await send(self.messages.pop(0))
        self.send = send


class _Capture:
    """An ASGI ``send`` that keeps the response."""

    def __init__(self):
        self.status, self.body = 0, b""

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")


class _Annotate:
    """An ASGI ``send`` that adds the steering record: a header always, a ``steering`` field in
    a JSON answer. With ``check`` (a steered request), asks once the answer is complete whether
    the request failed in the workers: a JSON answer becomes a 422, a stream gets an error event
    before its end."""

    def __init__(self, send, record: dict, check=None):
        self.send, self.record, self.check = send, record, check
        self.header = (HEADER, json.dumps(record).encode())
        self.start: dict | None = None
        self.json = False
        self.chunks: list[bytes] = []

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", []), self.header]
            ctype = {k.lower(): v for k, v in headers}.get(b"content-type", b"")
            self.json = message["status"] == 200 and ctype.startswith(b"application/json")
            if not self.json:
                return await self.send({**message, "headers": headers})
            self.start = {**message, "headers": headers}
            return None
        if message["type"] == "http.response.body" and self.json:
            self.chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            failed = await self.check() if self.check is not None else None
            if failed:
                r = _error(422, f"steering failed for this request: {failed}; lower the strength")
                return await _send_json(self.send, r.status, r.body, [self.header])
            data = b"".join(self.chunks)
            try:
                parsed = json.loads(data)
                parsed["steering"] = self.record
                data = json.dumps(parsed).encode()
            except (ValueError, TypeError):
                pass
            assert self.start is not None
            headers = [(k, v) for k, v in self.start["headers"] if k.lower() != b"content-length"]
            await self.send(
                {**self.start, "headers": [*headers, (b"content-length", str(len(data)).encode())]}
            )
            return await self.send({"type": "http.response.body", "body": data, "more_body": False})
        if message["type"] == "http.response.body" and self.check is not None:
            body = message.get("body", b"")
            if b"data: [DONE]" in body or not message.get("more_body"):
                check, self.check = self.check, None  # asked once, before the stream's end
                failed = await check()
                if failed:
                    event = {"error": {"message": f"steering failed for this request: {failed}"}}
                    await self.send(
                        {
                            "type": "http.response.body",
                            "body": f"data: {json.dumps(event)}\n\n".encode(),
                            "more_body": True,
                        }
                    )
        return await self.send(message)


#: the most prompts one fit may send through the engine (captures and answers together)
FIT_MAX_PROMPTS = 4000
_FIT_FIELDS = {
    "model",
    "name",
    "related",
    "unrelated",
    "validation",
    "refusal_questions",
    "params",
    "system",
}


def _questions(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(q, str) and q.strip() for q in value):
        raise _error(400, f"'{field}' must be a list of questions (non-empty strings)")
    return list(value)


def _fit_request(data: Any) -> dict[str, Any]:
    """The fields of a fit request, checked (each fault a 400 naming the field): without a
    ``validation`` object, every third question of ``related`` and ``unrelated`` is held out
    for the thresholds; without ``refusal_questions``, the training questions serve."""
    if not isinstance(data, dict):
        raise _error(400, "the fit request must be a JSON object")
    unknown = set(data) - _FIT_FIELDS
    if unknown:
        raise _error(
            400,
            f"unknown field(s) {', '.join(sorted(unknown))}; a fit takes "
            + ", ".join(sorted(_FIT_FIELDS)),
        )
    for field in ("model", "name"):
        if not isinstance(data.get(field), str) or not data[field]:
            raise _error(400, f"'{field}' must be a non-empty string")
    if not _safe(data["name"]) or data["name"] == "fit":
        raise _error(400, f"'name' {data['name']!r} cannot name an abstainer")
    related = _questions(data.get("related"), "related")
    unrelated = _questions(data.get("unrelated"), "unrelated")
    validation = data.get("validation")
    if validation is None:
        val_related = [q for i, q in enumerate(related) if i % 3 == 2]
        val_unrelated = [q for i, q in enumerate(unrelated) if i % 3 == 2]
        related = [q for i, q in enumerate(related) if i % 3 != 2]
        unrelated = [q for i, q in enumerate(unrelated) if i % 3 != 2]
    elif isinstance(validation, dict) and set(validation) <= {"related", "unrelated"}:
        val_related = _questions(validation.get("related"), "validation.related")
        val_unrelated = _questions(validation.get("unrelated"), "validation.unrelated")
    else:
        raise _error(400, '\'validation\' must be {"related": [...], "unrelated": [...]}')
    refusal = data.get("refusal_questions")
    refusal = (
        (related + unrelated)[:48] if refusal is None else _questions(refusal, "refusal_questions")
    )
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise _error(400, "'params' must be an object of the steering technique's parameters")
    system = data.get("system")
    if system is not None and not isinstance(system, str):
        raise _error(400, "'system' must be a string (a system prompt)")
    total = len(related) + len(unrelated) + len(val_related) + len(val_unrelated) + 3 * len(refusal)
    if total > FIT_MAX_PROMPTS:
        raise _error(400, f"the fit would send {total} prompts; at most {FIT_MAX_PROMPTS}")
    return {
        "model": data["model"],
        "name": data["name"],
        "related": related,
        "unrelated": unrelated,
        "val_related": val_related,
        "val_unrelated": val_unrelated,
        "refusal_questions": refusal,
        "params": params,
        "system": system,
    }


class _ServedModel:
    """The served model as the steering fit sees a back end: activations read inside vLLM and
    greedy answers, both through vLLM's own routes (prompts rendered here with the model's chat
    template, sent as token ids, as the ``vllm:`` back end sends them). The fit runs in a
    worker thread; each call hands its requests to the server's event loop."""

    backend = "served"

    def __init__(self, middleware: SteeringMiddleware, scope, model: str, loop):
        from workbench.generation.backend import Capabilities

        self.middleware, self.scope, self.loop = middleware, scope, loop
        self.capabilities = Capabilities(
            activations=False,
            weights=False,
            adapters=False,
            logprobs=False,
            scoring=False,
            distribution=False,
            steering=True,
            capture=True,
        )
        self.name = self.model_id = model
        self.revision, self.dtype_name = "", "endpoint"
        self.tokenizer: Any = None
        self.num_layers = 0
        self.asked = 0
        self._limit = asyncio.Semaphore(64)

    async def ready(self) -> None:
        """The served model's tokenizer (from the files vLLM loaded) and depth."""
        from transformers import AutoTokenizer

        config = self.scope["app"].state.engine_client.vllm_config.model_config
        self.tokenizer = await asyncio.to_thread(
            AutoTokenizer.from_pretrained,
            config.tokenizer,
            revision=config.tokenizer_revision,
            trust_remote_code=config.trust_remote_code,
        )
        assert self.middleware._shape is not None
        self.num_layers = int(self.middleware._shape[1])

    def _encode(self, prompts, system, chat) -> list[list[int]]:
        from workbench.generation.engine import render_prompts

        texts = render_prompts(self.tokenizer, prompts, system, chat=chat)
        return [self.tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in texts]

    def _wait(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _post(self, body: dict) -> dict:
        """One request to vLLM's completions route (inside the middleware: no gate, no
        steering); its JSON answer, or a 500 naming what vLLM said."""
        raw = json.dumps({"model": self.name, **body}).encode()
        scope = {
            **_scope_for(self.scope, raw),
            "path": "/v1/completions",
            "raw_path": b"/v1/completions",
            "query_string": b"",
            "method": "POST",
        }

        async def connected():  # never disconnects: the answer is complete first
            await asyncio.Event().wait()

        captured = _Capture()
        async with self._limit:
            await self.middleware.app(scope, _replay(raw, connected), captured)
        self.asked += 1
        try:
            answer = json.loads(captured.body)
        except ValueError:
            answer = None
        if captured.status != 200 or not isinstance(answer, dict):
            message = (answer or {}).get("error", {}).get("message") if answer else None
            raise _error(
                500, f"vLLM answered a fit request with {captured.status}: {message or '?'}"
            )
        return answer

    def capture_activations(
        self,
        prompts,
        layers,
        *,
        pooling: str = "last",
        tail=None,
        chat: bool = True,
        system: str | None = None,
        batch_size: int = 32,
        progress: bool = False,
        final_norm: bool = False,
    ):
        """As :meth:`workbench.backends.VLLMModel.capture_activations`, through the server."""
        from workbench.backends.vllm_steering import captures_for
        from workbench.generation.hooks import check_layers

        check_layers(layers, self.num_layers)
        ids = self._encode(list(prompts), system, chat)
        caps = captures_for(len(ids), layers, pooling, tail, final_norm)
        return self._wait(self._capture(ids, caps))

    async def _capture(self, ids, caps):
        import torch

        from workbench.backends.vllm_steering import capture_args, captured_tensors

        tags = [f"capture-{uuid.uuid4().hex}" for _ in ids]
        await asyncio.gather(
            *(
                self._post(
                    {
                        "prompt": i,
                        "max_tokens": 1,
                        "temperature": 0.0,
                        "vllm_xargs": capture_args(c, t),
                        "cache_salt": f"workbench-capture:{t}",
                    }
                )
                for i, c, t in zip(ids, caps, tags)
            )
        )
        engine = self.scope["app"].state.engine_client
        got = (await engine.collective_rpc("workbench_captured", args=(tags,)))[0]
        out = captured_tensors(got, tags)
        if any(acts is None for acts in out):
            raise _error(500, "vLLM recorded no activations for a fit's prompt")
        return torch.stack(out)

    def generate_prompts(self, prompts, config, *, chat=True, hooks=(), repass=None, **_):
        """Greedy answers (what the refusal vector's complying half is read from)."""
        if hooks or repass is not None or config.do_sample or config.num_samples != 1:
            raise ConfigError("a fit's answers are greedy, one per prompt, without hooks")
        ids = self._encode(list(prompts), config.system_prompt, chat)
        return self._wait(self._answers(ids, config.max_new_tokens))

    async def _answers(self, ids, max_new: int):
        from workbench.generation.config import Generation

        answers = await asyncio.gather(
            *(
                self._post(
                    {
                        "prompt": i,
                        "max_tokens": max_new,
                        "temperature": 0.0,
                        "return_token_ids": True,
                    }
                )
                for i in ids
            )
        )
        gens = []
        for k, (i, a) in enumerate(zip(ids, answers)):
            choice = a["choices"][0]
            gens.append(
                Generation(
                    prompt_index=k,
                    sample=0,
                    text=str(choice.get("text", "")).strip(),
                    token_ids=list(choice.get("token_ids") or []),
                    finish_reason="length" if choice.get("finish_reason") == "length" else "eos",
                    prompt_tokens=len(i),
                )
            )
        return gens
