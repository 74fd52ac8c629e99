"""The raw ASGI pieces of the interception: where a completion's answer is held, aborted or
annotated, which a route handler cannot do (vLLM's route streams to the client itself).

:func:`replay` gives a route a body read once (and, with ``abort``, a disconnect when the
middleware drops the answer, so vLLM aborts the request); :class:`Held` keeps an answer until
its gate decided; :class:`Annotate` adds the steering record (and a failure the workers
reported); :class:`Capture` keeps an answer the server asked for itself.
"""

from __future__ import annotations

import asyncio
import json

from workbench.backends.steer_server.errors import error

#: the response header that carries a steered request's record
HEADER = b"x-workbench-steering"


async def read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def replay(body: bytes, receive, abort: asyncio.Event | None = None):
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


def scope_for(scope: dict, body: bytes) -> dict:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}


async def send_json(send, status: int, body: dict, headers=()) -> None:
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


class Client:
    """The client's ``receive``, remembering whether the client went away."""

    def __init__(self, receive):
        self.receive, self.gone = receive, False

    async def __call__(self):
        message = await self.receive()
        self.gone = self.gone or message["type"] == "http.disconnect"
        return message


class Held:
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


class Capture:
    """An ASGI ``send`` that keeps the response."""

    def __init__(self):
        self.status, self.body = 0, b""

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")


class Annotate:
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
                r = error(422, f"steering failed for this request: {failed}; lower the strength")
                return await send_json(self.send, r.status, r.body, [self.header])
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
