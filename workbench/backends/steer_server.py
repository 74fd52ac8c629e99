"""Conditional steering through vLLM's OpenAI-compatible server (``serve --steering``).

An ASGI middleware in front of vLLM's routes (loaded with ``--middleware``; the workers carry
:mod:`workbench.backends.vllm_steering`):

``POST /v1/abstainers``
    register an abstainer (a :class:`~workbench.steering.spec.SteerSpec` as JSON). It is kept
    in the server's registry directory, so a restarted server still knows it.
``GET /v1/abstainers``
    the registered abstainers (name, digest, mode, whether gated).
``POST /v1/completions``, ``POST /v1/chat/completions`` with a ``steering`` field
    ``{"abstainer": NAME}`` (registered) or ``{"spec": {...}}`` (inline), optionally
    ``"gate_prompt"`` (text, or chat messages, the gate reads instead of the request's own) or
    ``"decision": true|false`` (no gate). The middleware runs the gate as a one-token request
    of its own, collects the votes from the workers, then passes the request on, steered when
    the gate fired (``vllm_xargs``) and with a prefix-cache salt naming the abstainer. The
    answer carries ``"steering": {"abstainer", "fired", "votes", "similarities"}`` and the
    header ``x-workbench-steering`` (streams: the header only).

Any OpenAI client asks for it with ``extra_body={"steering": {"abstainer": "river"}}``. A
request naming an unknown abstainer is a 400 with one line; the others are unaffected.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from workbench.backends.vllm_steering import GATE, STEER, TAG, cache_salt
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
    """Abstainers on disk (``<name>.json``): what survives a restart."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def save(self, spec) -> None:
        from workbench.paths import write_text_atomic

        self.directory.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path(spec.name), spec.to_json())

    def load(self, name: str):
        from workbench.steering.spec import SteerSpec

        if "/" in name or name.startswith("."):
            return None
        path = self.path(name)
        return SteerSpec.from_json(path.read_text()) if path.is_file() else None

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))


class _Reply(Exception):
    """A response the middleware gives itself (status, JSON body)."""

    def __init__(self, status: int, body: dict):
        self.status, self.body = status, body


def _error(status: int, message: str) -> _Reply:
    kind = "BadRequestError" if status == 400 else "NotFoundError" if status == 404 else "Error"
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


def _replay(body: bytes, receive):
    """``receive`` that gives ``body`` once, then waits on the client (disconnects)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

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
    """See the module docstring."""

    def __init__(self, app):
        self.app = app
        registry = os.environ.get(REGISTRY_ENV)
        self.registry = Registry(Path(registry)) if registry else None
        self.in_workers: set[str] = set()  # digests registered with the workers
        self._waiting: dict[str, asyncio.Future] = {}  # gate tags whose votes are wanted
        self._fetcher: asyncio.Future | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        try:
            if path == "/v1/abstainers":
                return await self._abstainers(scope, receive, send, method)
            if method == "POST" and path in ROUTES:
                body = await _read_body(receive)
                try:
                    data = json.loads(body)
                except ValueError:
                    data = None
                if isinstance(data, dict) and data.get("steering") is not None:
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
    async def _abstainers(self, scope, receive, send, method: str):
        from workbench.steering.spec import SteerSpec

        if method == "GET":
            names = self.registry.names() if self.registry else []
            listed = []
            for name in names:
                spec = self.registry.load(name) if self.registry else None
                if spec is not None:
                    listed.append(
                        {
                            "name": name,
                            "digest": spec.digest(),
                            "mode": spec.mode,
                            "gated": spec.gate is not None,
                        }
                    )
            return await _send_json(send, 200, {"abstainers": listed})
        if method != "POST":
            raise _error(405, "use GET or POST on /v1/abstainers")
        if self.registry is None:
            raise _error(400, "this server keeps no registry: start it with serve --steering")
        try:
            spec = SteerSpec.from_json((await _read_body(receive)).decode())
        except (ConfigError, UnicodeDecodeError) as e:
            raise _error(400, str(e)) from None
        digest = await self._register(scope, spec)
        self.registry.save(spec)
        return await _send_json(send, 200, {"name": spec.name, "digest": digest})

    async def _register(self, scope, spec) -> str:
        digest = spec.digest()
        if digest not in self.in_workers:
            engine = scope["app"].state.engine_client
            try:
                await engine.collective_rpc("workbench_register", args=(spec.to_json(),))
            except Exception as e:  # a spec the model cannot take (layers, width)
                raise _error(400, f"abstainer {spec.name!r} cannot steer this model: {e}") from None
            self.in_workers.add(digest)
        return digest

    def _spec(self, steering: Any):
        from workbench.steering.spec import SteerSpec

        if not isinstance(steering, dict):
            raise _error(
                400, '\'steering\' must be an object: {"abstainer": NAME} or {"spec": {...}}'
            )
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
        if "decision" in steering:
            record["fired"] = bool(steering["decision"])
        elif spec.gate is None:
            record["fired"] = True
        else:
            record.update(await self._gate(scope, receive, data, digest, steering))
        body = dict(data)
        if record["fired"]:
            body["vllm_xargs"] = {**(body.get("vllm_xargs") or {}), STEER: digest}
            salt = cache_salt(digest, True)
            body["cache_salt"] = f"{body['cache_salt']}|{salt}" if body.get("cache_salt") else salt
        raw = json.dumps(body).encode()
        header = (HEADER, json.dumps(record).encode())
        return await self.app(
            _scope_for(scope, raw), _replay(raw, receive), _Annotate(send, record, header)
        )

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
        rec = await self._votes(scope["app"].state.engine_client, tag)
        if rec is None or "fired" not in rec:
            raise _error(500, "the gate recorded no decision for this request")
        return {"fired": rec["fired"], "votes": rec["votes"], "similarities": rec["similarities"]}


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
    a JSON answer."""

    def __init__(self, send, record: dict, header: tuple[bytes, bytes]):
        self.send, self.record, self.header = send, record, header
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
        return await self.send(message)
