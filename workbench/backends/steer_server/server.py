"""What the steering routes and the interception share, one per server.

:class:`SteeringServer` holds the registry (:class:`~.store.AbstainerStore`), the API key, the
abstainers the workers hold, the served model's shape and the calls that ask the workers for
the gates' votes (requests waiting at the same time share one call).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

from workbench.backends.steer_server.errors import error
from workbench.backends.steer_server.store import REGISTRY_ENV, AbstainerStore, log
from workbench.errors import ConfigError
from workbench.steering.spec import SteerSpec


class SteeringServer:
    """The state of ``serve --steering``'s server: the registry folder from
    ``WORKBENCH_STEERING_REGISTRY``, the key from ``VLLM_API_KEY`` (vLLM's ``--middleware``
    constructs the middleware with the app alone), and ``app``, vLLM's routes inside the
    middleware (where the served model's own requests go: no gate, no steering)."""

    def __init__(self, app: Any):
        self.app = app
        registry = os.environ.get(REGISTRY_ENV)
        self.store = AbstainerStore(Path(registry)) if registry else None
        key = os.environ.get("VLLM_API_KEY")
        self._key = hashlib.sha256(key.encode()).digest() if key else None
        self.in_workers: set[str] = set()  # digests registered with the workers
        self.shape: tuple[int, int] | None = None  # the model's (hidden, layers), asked once
        self._waiting: dict[str, asyncio.Future] = {}  # tags whose records are wanted
        self._fetcher: asyncio.Future | None = None
        if self.store is not None:
            for name, why in self.store.skipped().items():
                log(f"skipping {self.store.directory / name}: {why}")

    def authorized(self, scope: dict) -> bool:
        """The request carries the server's API key (always, when it has none)."""
        if self._key is None:
            return True
        header = dict(scope["headers"]).get(b"authorization", b"").decode(errors="replace")
        scheme, _, token = header.partition(" ")
        digest = hashlib.sha256(token.encode()).digest()
        return scheme.lower() == "bearer" and secrets.compare_digest(digest, self._key)

    def require_store(self) -> AbstainerStore:
        if self.store is None:
            raise error(400, "this server keeps no registry: start it with serve --steering")
        return self.store

    async def model_shape(self, engine) -> tuple[int, int]:
        """The served model's (hidden width, number of blocks), asked of the workers once."""
        if self.shape is None:
            hidden, layers = (await engine.collective_rpc("workbench_shape"))[0]
            self.shape = (int(hidden), int(layers))
        return self.shape

    async def register(self, engine, spec: SteerSpec) -> str:
        """The spec, checked against the served model, in the workers; its digest."""
        digest = spec.digest()
        if digest in self.in_workers:
            return digest
        shape = await self.model_shape(engine)
        try:
            spec.check_model(*shape)
        except ConfigError as e:
            raise error(400, str(e)) from None
        try:
            await engine.collective_rpc("workbench_register", args=(spec.to_json(),))
        except Exception as e:  # checked above: anything left is the server's fault
            raise error(500, f"abstainer {spec.name!r} could not be registered: {e}") from None
        self.in_workers.add(digest)
        return digest

    async def votes(self, engine, tag: str) -> dict | None:
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
