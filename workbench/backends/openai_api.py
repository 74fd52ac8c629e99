"""Models behind an OpenAI-compatible HTTP endpoint: the OpenAI API, ``vllm serve``, llama.cpp's
server, Ollama.

``load_model("openai:gpt-4o")`` talks to ``OPENAI_BASE_URL`` (default the OpenAI API);
``load_model("openai:<served name>@http://127.0.0.1:8000/v1")`` to a server of one's own. Two
modes:

* **chat** (default): messages go to ``/chat/completions`` and the server applies its chat
  template. Choices among fixed options (the judge) are read from the first answer token's top
  log-probabilities, where the endpoint gives them.
* **local tokenizer** (``tokenizer=`` a path or hub id, or the served model is a local
  directory): prompts are rendered with the chat template here, exactly as the workbench's own
  engine renders them, and sent as token ids to ``/completions``; fixed continuations are
  scored exactly from the prompt's echoed log-probabilities (vLLM's server gives them).

Every request goes through the official ``openai`` client (retries with exponential backoff on
rate limits, timeouts and server errors; ``max_retries``), at most ``concurrency`` at a time,
and through a :class:`~workbench.backends.cache.ResponseCache`, so a resumed run never pays for
an answer twice. An endpoint that is down costs no retries: before its first request (a run
answered from the cache makes none) a TCP connection to it is opened once, and one that cannot
be opened is :class:`EndpointDown` at once, as is a connection that keeps failing after the
retries; the grid stops at the first (``workbench.experiments.runner``). The API key is read from the environment variable ``api_key_env`` when the
client is made and is never written to a file, a row or a cache key.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import wait
from pathlib import Path
from typing import ClassVar, Self

from pydantic import model_validator

from workbench.backends.base import (
    BlackBoxBackend,
    Capabilities,
    ModelRef,
    cut_when,
    register_engine,
)
from workbench.backends.cache import ResponseCache, request_key
from workbench.backends.daemon_pool import DaemonPool
from workbench.errors import ConfigError, ModelLoadError, WorkbenchError
from workbench.generation.config import FinishReason, Generation, GenerationConfig
from workbench.generation.engine import sample_seed
from workbench.models.chat import render_chat, to_messages
from workbench.paths import cache_home, check_writable_file
from workbench.progress import tqdm
from workbench.settings import Number, Settings

OPENAI_URL = "https://api.openai.com/v1"

#: Without a local tokenizer: generation and its log-probabilities, nothing exact to score.
API_CAPABILITIES = Capabilities(
    activations=False,
    weights=False,
    adapters=False,
    logprobs=True,
    scoring=False,
    distribution=False,
)


class APIOptions(Settings):
    """How to reach and pay an endpoint.

    Attributes:
        base_url: the endpoint (default: from the model name's ``@url``, else ``OPENAI_BASE_URL``,
            else the OpenAI API).
        api_key_env: the environment variable holding the key (read, never stored). Local
            servers need none.
        concurrency: requests in flight at once.
        max_retries: retries per request on rate limits, timeouts and server errors (the
            client backs off exponentially and honours ``Retry-After``).
        timeout: seconds per request.
        budget: seconds this endpoint may be used for in all, from its first request (None: no
            limit); past them nothing more is sent and a grid stops at its next cell on it.
        tokenizer: a local tokenizer (path or hub id) for the served model: exact prompt
            rendering and exact scoring of fixed continuations.
        price_in, price_out: USD per million prompt / completion tokens, for ``cost`` in rows.
        cache: answer repeated requests from the response cache.
        cache_path: the cache file (default under the workbench cache).
    """

    label: ClassVar[str] = "option"

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    max_retries: int = 6
    timeout: Number = 120.0
    budget: Number | None = None
    tokenizer: str | None = None
    price_in: Number | None = None
    price_out: Number | None = None
    cache: bool = True
    cache_path: str | None = None

    #: how answers are fetched and paid for, never what they are (not in a cell's hash)
    not_in_answers: ClassVar[frozenset[str]] = frozenset(
        {
            "concurrency",
            "max_retries",
            "timeout",
            "budget",
            "price_in",
            "price_out",
            "cache",
            "cache_path",
            "api_key_env",
        }
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        """Bounds, a credential where it would be written down, a cache file that is not one:
        each its own line (ConfigError passes through pydantic as raised)."""
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            # never echoed: what is here may be the key itself, written in the wrong field
            raise ConfigError(
                "api_key_env must name the environment variable that holds the key (such as "
                "OPENAI_API_KEY), and this is not a variable name: put the key in a variable "
                "and name the variable here"
            )
        if self.budget is not None and not self.budget > 0:
            raise ConfigError(f"budget must be above 0 seconds, got {self.budget}")
        if not self.timeout > 0:
            raise ConfigError(f"timeout must be above 0 seconds, got {self.timeout}")
        for where, url in (
            ("option base_url", self.base_url),
            ("OPENAI_BASE_URL", os.environ.get("OPENAI_BASE_URL")),
        ):
            if url and _masked(url) != url:  # never echoed, never written into a run
                raise ConfigError(
                    f"{where} ({_masked(url)}) carries a credential; the endpoint's URL is "
                    "written into every run, so give the key through an environment "
                    "variable (the option api_key_env) instead"
                )
        if self.cache and self.cache_path:  # before a run folder is made, not at the first answer
            path = check_writable_file(self.cache_path, "the response cache (option 'cache_path')")
            if path.is_file() and path.stat().st_size:
                with open(path, "rb") as f:
                    if f.read(16) != b"SQLite format 3\x00":
                        raise ConfigError(
                            f"option cache_path: {path} is not a response cache (an SQLite "
                            "file); name a new file or an earlier cache"
                        )
        return self


class EndpointError(WorkbenchError):
    """An endpoint kept failing (rate limits, server errors, timeouts) after every retry."""


#: Statuses no retry can change (the server does not implement the request): answered at once.
NO_RETRY = frozenset({501, 505})


def _client_class(openai):
    """The official client, less its retries of statuses that retrying cannot change (it
    retries every 5xx: a 501 cost six retries per request, in every cell), and with a timed-out
    request retried once, not ``max_retries`` times: an endpoint that accepts connections and
    never answers held each request for the timeout seven times over (14 minutes at the
    defaults) before the run could stop."""

    class Client(openai.OpenAI):
        def _should_retry(self, response) -> bool:
            if response.status_code in NO_RETRY:
                return False
            return super()._should_retry(response)

        def _send_request(self, request, **kwargs):
            try:
                return super()._send_request(request, **kwargs)
            except Exception as e:
                retried = request.headers.get("x-stainless-retry-count", "0") != "0"
                if retried and "Timeout" in type(e).__name__:
                    # an OpenAIError: the client raises it as it is, without a retry
                    raise openai.APITimeoutError(request=request) from e
                raise

    return Client


class EndpointDown(EndpointError):
    """An endpoint cannot be reached at all: nothing sent to it can be answered."""


class BudgetSpent(EndpointDown):
    """An endpoint's time budget (``APIOptions.budget``) is used up: nothing more is sent."""


#: Seconds to wait for a TCP connection to an endpoint before its first request.
CONNECT_TIMEOUT = 10.0


def connection_problem(url: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None when a TCP connection to ``url``'s host and port opens (or a proxy stands between:
    then the client's retries decide); else why it does not ("Connection refused")."""
    import socket
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(host):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


#: Query parameters of an endpoint URL that hold a credential.
_SECRET_QUERY = ("key", "token", "secret", "signature", "sig", "password", "auth")


def _masked(text: str) -> str:
    """``text`` with the credentials of any URL in it (``user:password@``, a query parameter
    named like a key or token) replaced by ``***``: never echoed, never written."""
    import re

    text = re.sub(r"(https?://)[^/@\s]*:[^/@\s]*@", r"\1***@", text)
    text = re.sub(r"(https?://)[^/@:\s]+@", r"\1***@", text)
    return re.sub(
        r"([?&][^=&\s]*(?:" + "|".join(_SECRET_QUERY) + r")[^=&\s]*=)[^&\s]+",
        r"\1***",
        text,
        flags=re.IGNORECASE,
    )


@register_engine
class OpenAIModel(BlackBoxBackend):
    """A model behind an OpenAI-compatible endpoint (see the module docstring)."""

    backend = "openai"
    options_type = APIOptions
    engine = "an OpenAI-compatible endpoint"
    capabilities = API_CAPABILITIES

    @classmethod
    def parse_target(cls, rest: str, name: str) -> ModelRef:
        """``<model>`` or ``<model>@<http(s) URL of the endpoint>``."""
        base_url = None
        if "@" in rest:
            rest, base_url = rest.split("@", 1)
            if not base_url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"model {_masked(name)!r}: the endpoint after '@' must be an "
                    "http(s) URL, e.g. openai:my-model@http://127.0.0.1:8000/v1"
                )
            if _masked(base_url) != base_url:
                raise ConfigError(
                    f"model {_masked(name)!r}: the endpoint URL carries a credential; a model's "
                    "name is written into every run's config and rows, so give the key through "
                    "an environment variable (the option api_key_env) instead"
                )
        return ModelRef(cls.backend, rest, base_url)

    @classmethod
    def check_target(cls, target: str) -> None:
        """Any served name: the endpoint is asked when the model is first used."""

    @classmethod
    def context_length(cls, target: str) -> None:
        """Unknown before the endpoint is asked (a server refuses a request too long itself)."""
        return None

    @classmethod
    def layer_count(cls, target: str) -> None:
        """An endpoint's model has no layers the workbench reaches."""
        return None

    @classmethod
    def technique_hint(cls, target: str) -> str:
        return (
            "an API model takes black-box techniques only (base, zero_shot, few_shot_cot); "
            f"steering runs on vllm:{target} or the Hugging Face engine"
        )

    @classmethod
    def load(
        cls,
        ref,
        name,
        *,
        options=None,
        device="auto",
        dtype="auto",
        revision=None,
        require_chat=True,
    ) -> OpenAIModel:
        """``options``: :class:`APIOptions` or a dict of its fields; an endpoint given after
        ``@`` in the name fills an unset ``base_url``."""
        opts = cls.options_from(options, name)
        if ref.base_url and not opts.base_url:
            opts = opts.replace(base_url=ref.base_url)
        return cls(ref.target, opts, name=name)

    def __init__(self, model: str, options: APIOptions | None = None, *, name: str | None = None):
        try:
            import openai
        except ImportError:
            raise ModelLoadError(
                "the HTTP back end needs the 'openai' package: pip install openai"
            ) from None
        self.options = o = options or APIOptions()
        self.base_url = (o.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")
        key = os.environ.get(o.api_key_env)
        if not key and self.base_url == OPENAI_URL:
            raise ModelLoadError(
                f"model {model!r} is served by the OpenAI API, which needs a key: "
                f"set the environment variable {o.api_key_env}"
            )
        self._errors = (openai.APIError,)
        # no connection after the retries (a timeout is a slow endpoint, not a dead one)
        self._connection_errors = (openai.APIConnectionError,)
        self._timeouts = (openai.APITimeoutError,)
        self._reached = False  # a TCP connection to the endpoint opened (asked once)
        self._down: EndpointDown | None = None
        self._reach_lock = threading.Lock()
        self.client: openai.OpenAI = _client_class(openai)(
            base_url=self.base_url,
            api_key=key or "no-key",
            max_retries=o.max_retries,
            timeout=o.timeout,
        )
        del key
        self.served = model
        self.name = name or f"openai:{model}"
        self.model_id = (
            self.name if self.base_url == OPENAI_URL else f"openai:{model}@{self.base_url}"
        )
        self.revision = f"endpoint:{self.base_url}"
        self.dtype_name = "endpoint"
        tok_source = o.tokenizer or (model if Path(model).expanduser().is_dir() else None)
        self.tokenizer = _load_tokenizer(tok_source) if tok_source else None
        self.capabilities = (
            API_CAPABILITIES
            if self.tokenizer is None
            else Capabilities(
                activations=False,
                weights=False,
                adapters=False,
                logprobs=True,
                scoring=True,
                distribution=False,
            )
        )
        path = o.cache_path or cache_home() / "responses" / "openai.sqlite"
        self.cache = ResponseCache(path) if o.cache else None
        self._pool = DaemonPool(o.concurrency)
        self._paid = threading.Lock()
        self._first_sent: float | None = None  # when the first request went out (the budget's)
        self.requests_sent = 0  # requests that reached the endpoint (not answered from cache)

    # -- requests ---------------------------------------------------------------------------
    def _check_reachable(self) -> None:
        """Before the first request: raise EndpointDown at once when no connection to the
        endpoint opens (instead of the client's retries, ~22 s per request)."""
        if self._reached:
            return
        with self._reach_lock:
            if self._down is not None:
                raise self._down
            if not self._reached:
                why = connection_problem(self.base_url, min(CONNECT_TIMEOUT, self.options.timeout))
                if why is not None:
                    self._down = EndpointDown(
                        f"endpoint {self.base_url} cannot be reached ({why}; is its server "
                        "running, and the URL right?)"
                    )
                    raise self._down
                self._reached = True

    def _time_left(self) -> float:
        """This request's timeout: the option's, or what is left of the budget when less;
        with the budget spent, :class:`BudgetSpent` (and nothing more is sent)."""
        o = self.options
        if o.budget is None:
            return o.timeout
        with self._paid:
            now = time.monotonic()
            if self._first_sent is None:
                self._first_sent = now
            left = o.budget - (now - self._first_sent)
        if left <= 0:
            self._down = BudgetSpent(
                f"endpoint {self.base_url} used its time budget ({o.budget:g} s, option "
                f"'budget') after {self.requests_sent} requests; their answers are cached"
            )
            raise self._down
        return min(o.timeout, left)

    def _call(self, path: str, body: dict) -> tuple[dict, bool]:
        """(response as JSON, whether it came from the cache)."""
        key = request_key(self.base_url + path, body)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and _has_choices(hit):  # one without: asked again, replaced
                return hit, True
        if self._down is not None:  # another request found it down: send nothing more
            raise self._down
        self._check_reachable()
        timeout = self._time_left()
        known = {
            "model",
            "messages",
            "prompt",
            "max_tokens",
            "temperature",
            "top_p",
            "seed",
            "stop",
            "n",
            "logprobs",
            "top_logprobs",
            "echo",
        }
        kwargs = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        endpoint = (
            self.client.chat.completions if path == "/chat/completions" else self.client.completions
        )
        try:
            # the body is forwarded as keyword arguments, which the SDK's per-endpoint
            # overloads (each with its own required fields) cannot match
            resp = endpoint.create(  # type: ignore[call-overload]
                **kwargs, **({"extra_body": extra} if extra else {}), timeout=timeout
            )
        except self._connection_errors as e:
            if isinstance(e, self._timeouts):
                self._time_left()  # cut short by the budget: BudgetSpent says so
                # it accepts connections and never answers: every later cell would wait as
                # long, so the grid stops here
                self._down = EndpointDown(
                    f"endpoint {self.base_url} does not answer: {path} timed out after "
                    f"{self.options.max_retries} retries ({self.options.timeout:g} s each)"
                )
                raise self._down from None
            # it connected before, and no longer does
            self._down = EndpointDown(
                f"endpoint {self.base_url} stopped answering: {path} failed after "
                f"{self.options.max_retries} retries ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:200]})"
            )
            raise self._down from None
        except self._errors as e:  # retries exhausted: answers so far stay in the cache
            raise EndpointError(
                f"{self.base_url}{path} failed after {self.options.max_retries} "
                f"retries: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            ) from None
        except ValueError as e:  # a 200 whose body is not JSON
            raise EndpointError(
                f"{self.base_url}{path} answered with something that is not an OpenAI "
                f"completion (not JSON: {str(e).splitlines()[0][:120]})"
            ) from None
        data = resp.model_dump(mode="json")
        if not _has_choices(data):
            # never cached: a fixed server is asked again on the next run
            raise EndpointError(
                f"{self.base_url}{path} answered with something that is not an OpenAI "
                f"completion (no choices: {json.dumps(data)[:120]})"
            )
        with self._paid:
            self.requests_sent += 1
        if self.cache is not None:
            self.cache.put(key, data)
        return data, False

    def _map(self, fn, items, progress: bool, desc: str):
        bar = tqdm(total=len(items), desc=desc, disable=not progress, leave=False)
        futures = [self._pool.submit(fn, it) for it in items]
        try:
            out = []
            for f in futures:
                out.append(f.result())
                bar.update()
            return out
        except BaseException as e:
            # Stop here: nothing more is sent once a request has failed for good; requests in
            # flight finish (their answers are cached, so a resumed run does not pay again).
            # Ctrl-C waits for none of them: one to an endpoint that never answers would hold
            # the command for its timeout and retries (the pool's threads are daemons).
            for f in futures:
                f.cancel()
            if not isinstance(e, KeyboardInterrupt):
                wait(futures)
            raise
        finally:
            bar.close()

    # -- generation -------------------------------------------------------------------------
    def generate_prompts(
        self,
        prompts,
        config: GenerationConfig,
        *,
        chat=True,
        stop_when=None,
        progress=True,
        desc="generating",
        adapter=None,
        hooks=(),
        repass=None,
    ) -> list[Generation]:
        self.refuse_hooks(hooks, repass)
        if adapter is not None:
            raise self.unavailable("adapters", "answering through a fine-tuned adapter")
        local = self.tokenizer is not None
        if not chat and not local:
            raise ConfigError(
                f"model {self.name!r}: raw (non-chat) prompts need a local tokenizer "
                "(the tokenizer= option)"
            )
        texts = (
            [
                render_chat(self.tokenizer, p, system=config.system_prompt) if chat else p
                for p in prompts
            ]
            if local
            else None
        )
        jobs = [(i, k) for i in range(len(prompts)) for k in range(config.num_samples)]
        want_lp = config.return_logprobs or stop_when is not None

        def one(job):
            i, k = job
            body = {
                "model": self.served,
                "max_tokens": config.max_new_tokens,
                "n": 1,
                "temperature": config.temperature if config.do_sample else 0.0,
            }
            seed_text = texts[i] if local else repr(prompts[i])
            if config.do_sample:
                body["top_p"] = config.top_p
                body["seed"] = sample_seed(config.seed, seed_text, k)
            if config.stop_strings:
                body["stop"] = list(config.stop_strings)
            if local:
                ids = self.tokenizer(texts[i], add_special_tokens=not chat)["input_ids"]
                body.update(prompt=ids, logprobs=1 if want_lp else None)
                data, cached = self._call(
                    "/completions", {k: v for k, v in body.items() if v is not None}
                )
            else:
                body["messages"] = to_messages(prompts[i], system=config.system_prompt)
                if want_lp:
                    body["logprobs"] = True
                data, cached = self._call("/chat/completions", body)
            return _generation(i, k, data, cached, config, stop_when, self.options)

        return self._map(one, jobs, progress, desc)

    # -- scoring ----------------------------------------------------------------------------
    def option_probabilities(self, texts, options, batch_size: int = 32):
        """Exact probabilities of each option's tokens after each rendered text, from the
        endpoint's echoed prompt log-probabilities (needs a local tokenizer)."""
        from workbench.generation.options import (
            OptionDistribution,
            combine_options,
            option_candidates,
        )

        if self.tokenizer is None:
            raise self.unavailable(
                "scoring",
                "scoring fixed continuations (the judge's constrained "
                "choice, number confidence) without a local tokenizer",
            )
        cands = option_candidates(self.tokenizer, options)

        def one(job):
            i, ids = job
            prompt = self.tokenizer(texts[i], add_special_tokens=False)["input_ids"] + list(ids)
            data, _ = self._call(
                "/completions",
                {
                    "model": self.served,
                    "prompt": prompt,
                    "max_tokens": 1,
                    "echo": True,
                    "logprobs": 1,
                    "temperature": 0.0,
                },
            )
            lps = data["choices"][0]["logprobs"]["token_logprobs"][
                len(prompt) - len(ids) : len(prompt)
            ]
            if any(lp is None for lp in lps):
                raise ConfigError(
                    f"endpoint {self.base_url} gave no prompt log-probabilities "
                    "(echo with logprobs); it cannot score fixed continuations"
                )
            return math.exp(sum(lps))

        jobs = [(i, ids) for i in range(len(texts)) for _, ids in cands]
        probs = self._map(one, jobs, False, "scoring")
        out: list[OptionDistribution] = []
        for i in range(len(texts)):
            row = probs[i * len(cands) : (i + 1) * len(cands)]
            out.append(
                combine_options(cands, dict(zip([ids for _, ids in cands], row)), len(options))
            )
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.cache is not None:
            self.cache.close()
            self.cache = None
        self.client.close()


def _has_choices(data: dict) -> bool:
    """Whether an endpoint's JSON answer is a completion: a non-empty list of choices."""
    choices = data.get("choices")
    return isinstance(choices, list) and bool(choices)


def _load_tokenizer(source: str):
    from transformers import AutoTokenizer

    local = Path(source).expanduser()
    try:
        tok = AutoTokenizer.from_pretrained(str(local) if local.exists() else source)
    except (OSError, ValueError) as e:
        raise ModelLoadError(
            f"could not load the tokenizer {source!r}: {str(e).splitlines()[0]}"
        ) from None
    return tok


def _generation(
    i: int,
    k: int,
    data: dict,
    cached: bool,
    config: GenerationConfig,
    stop_when: Callable[[str], bool] | None,
    o: APIOptions,
) -> Generation:
    choice = data["choices"][0]
    text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
    text = text or ""
    pieces, lps = _token_logprobs(choice)
    reason: FinishReason = (
        "length"
        if choice.get("finish_reason") == "length"
        else ("stop_string" if isinstance(choice.get("stop_reason"), str) else "eos")
    )
    if stop_when is not None and pieces:
        n = cut_when(pieces, lambda p: "".join(p), stop_when)
        if n is not None and n < len(pieces):
            text, pieces, lps, reason = "".join(pieces[:n]), pieces[:n], lps[:n], "stop_when"
    usage = data.get("usage") or {}
    p_tok, c_tok = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if reason == "stop_when":
        c_tok = len(pieces)
    cost = None
    if (
        o.price_in is not None
        and o.price_out is not None
        and p_tok is not None
        and c_tok is not None
    ):
        cost = (p_tok * o.price_in + c_tok * o.price_out) / 1e6
    return Generation(
        prompt_index=i,
        sample=k,
        text=text.strip(),
        token_ids=[],
        finish_reason=reason,
        prompt_tokens=int(p_tok or 0),
        logprobs=list(lps) if config.return_logprobs and lps else None,
        completion_tokens=None if c_tok is None else int(c_tok),
        cost=cost,
        cached=cached,
    )


def _token_logprobs(choice: dict) -> tuple[list[str], list[float]]:
    """(token strings, log-probabilities) of the answer from either endpoint's shape."""
    lp = choice.get("logprobs")
    if not lp:
        return [], []
    if lp.get("content") is not None:  # chat completions
        return [t["token"] for t in lp["content"]], [float(t["logprob"]) for t in lp["content"]]
    tokens, values = lp.get("tokens") or [], lp.get("token_logprobs") or []
    return list(tokens), [float(v) for v in values if v is not None]
