"""The served model as the steering fit sees a back end (``POST /v1/abstainers/fit``).

:class:`ServedModel` reads activations inside vLLM (:mod:`workbench.backends.vllm_capture`,
the routine ``vllm:`` runs in process) and greedy answers, both through vLLM's own completions
route inside the steering middleware (no gate, no steering); prompts are rendered here with the
model's chat template and sent as token ids, as the ``vllm:`` back end sends them. The fit runs
in a worker thread; each call hands its requests to the server's event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from workbench.backends.steer_server.asgi import Capture, replay, scope_for
from workbench.backends.steer_server.errors import error
from workbench.backends.steer_server.server import SteeringServer
from workbench.backends.vllm_capture import capture_activations
from workbench.errors import ConfigError
from workbench.generation.backend import Capabilities
from workbench.generation.config import Generation
from workbench.generation.engine import render_prompts

#: the parts of the fit request's scope its own requests keep (the route's own are the router's)
_KEEP = (
    "type",
    "asgi",
    "http_version",
    "scheme",
    "server",
    "client",
    "root_path",
    "headers",
    "state",
    "extensions",
    "app",
)
#: requests to vLLM in flight at once per fit
_AT_ONCE = 64


class ServedModel:
    """The served model as a :class:`~workbench.generation.backend.Backend` the fit reads:
    ``capture_activations`` and greedy ``generate_prompts``."""

    backend = "served"

    def __init__(self, server: SteeringServer, scope: Mapping[str, Any], model: str, loop):
        self.server, self.loop = server, loop
        self.scope = {k: scope[k] for k in _KEEP if k in scope}
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
        self._limit = asyncio.Semaphore(_AT_ONCE)

    @property
    def engine(self):
        return self.scope["app"].state.engine_client

    async def ready(self) -> None:
        """The served model's tokenizer (from the files vLLM loaded) and depth."""
        from transformers import AutoTokenizer  # heavy: read once per fit

        config = self.engine.vllm_config.model_config
        self.tokenizer = await asyncio.to_thread(
            AutoTokenizer.from_pretrained,
            config.tokenizer,
            revision=config.tokenizer_revision,
            trust_remote_code=config.trust_remote_code,
        )
        self.num_layers = (await self.server.model_shape(self.engine))[1]

    def _encode(self, prompts, system, chat) -> list[list[int]]:
        texts = render_prompts(self.tokenizer, prompts, system, chat=chat)
        return [self.tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in texts]

    def _wait(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _post(self, body: dict) -> dict:
        """One request to vLLM's completions route (inside the middleware: no gate, no
        steering); its JSON answer, or a 500 naming what vLLM said."""
        raw = json.dumps({"model": self.name, **body}).encode()
        scope = {
            **scope_for(self.scope, raw),
            "path": "/v1/completions",
            "raw_path": b"/v1/completions",
            "query_string": b"",
            "method": "POST",
        }

        async def connected():  # never disconnects: the answer is complete first
            await asyncio.Event().wait()

        captured = Capture()
        async with self._limit:
            await self.server.app(scope, replay(raw, connected), captured)
        self.asked += 1
        try:
            answer = json.loads(captured.body)
        except ValueError:
            answer = None
        if captured.status != 200 or not isinstance(answer, dict):
            message = (answer or {}).get("error", {}).get("message") if answer else None
            raise error(
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
        """As :meth:`workbench.backends.VLLMModel.capture_activations` (the same routine),
        through the server."""
        assert self.server.shape is not None  # asked in ready()
        try:
            return capture_activations(
                prompts,
                layers,
                shape=self.server.shape,
                encode=self._encode,
                run=lambda ids, extra, salts, tags: self._wait(
                    self._capture(ids, extra, salts, tags)
                ),
                pooling=pooling,
                tail=tail,
                chat=chat,
                system=system,
                batch_size=batch_size,
                progress=progress,
                final_norm=final_norm,
            )
        except RuntimeError as e:  # the workers kept no record of a prompt
            raise error(500, f"{e} of a fit") from None

    async def _capture(self, ids, extra, salts, tags) -> dict:
        one = {"max_tokens": 1, "temperature": 0.0}
        await asyncio.gather(
            *(
                self._post({"prompt": i, **one, "vllm_xargs": x, "cache_salt": s})
                for i, x, s in zip(ids, extra, salts)
            )
        )
        return (await self.engine.collective_rpc("workbench_captured", args=(tags,)))[0]

    def generate_prompts(self, prompts, config, *, chat=True, hooks=(), repass=None, **_):
        """Greedy answers (what the refusal vector's complying half is read from)."""
        if hooks or repass is not None or config.do_sample or config.num_samples != 1:
            raise ConfigError("a fit's answers are greedy, one per prompt, without hooks")
        ids = self._encode(list(prompts), config.system_prompt, chat)
        return self._wait(self._answers(ids, config.max_new_tokens))

    async def _answers(self, ids, max_new: int) -> list[Generation]:
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
