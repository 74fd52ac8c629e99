"""Models on vLLM in this process (``load_model("vllm:<name, path or hub id>")``).

For everything that needs no activations: base, zero-shot and chain-of-thought answers, K
samples, fine-tuned abstainers (their LoRA adapters served over the base weights, no merged
copy), the judge and number confidence (exact log-probabilities of fixed continuations from
vLLM's prompt log-probabilities), and conditional steering inside vLLM's model runner, per
request (:meth:`VLLMModel.generate_steered`, :mod:`workbench.backends.vllm_steering`): the
vectors, means and thresholds are fitted from activations read inside vLLM
(:meth:`VLLMModel.capture_activations`), each answer reads its gate in its own prefill
(:mod:`workbench.backends.vllm_gated`) and the steering runs in vLLM. Editing needs the layers' weights in hand and stays on the
Hugging Face engine; asking for it here is an error before anything runs.

The answers match the workbench's engine, not just vLLM's defaults: prompts are rendered with
the same chat template and sent as token ids, each sample gets the same per-(prompt, sample)
seed, texts are decoded from the token ids the same way (stop strings cut, specials skipped),
and a ``stop_when`` predicate cuts the same token. Log-probabilities are vLLM's raw ones
(temperature 1), as the engine records them.

vLLM starts worker processes: a script that loads a ``vllm:`` model needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from workbench.backends.base import BlackBoxBackend, Capabilities, cut_when, register_engine
from workbench.errors import ConfigError, ModelLoadError, SteeringError
from workbench.generation.config import FinishReason, Generation, GenerationConfig
from workbench.generation.engine import eos_token_ids, sample_seed
from workbench.models.chat import render_chat
from workbench.settings import NonNegative, Settings

#: Generation, adapters, exact scoring and per-request steering; no layers to hook, no full
#: distributions.
VLLM_CAPABILITIES = Capabilities(
    activations=False,
    weights=True,
    adapters=True,
    logprobs=True,
    scoring=True,
    distribution=False,
    steering=True,
)


#: vLLM's switch between an engine core in its own process ("1") or in the caller's ("0")
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"


#: On CPU, vLLM keeps a compiled model in torch's own compile caches, not its ahead-of-time
#: artifacts: the CPU build saves those but cannot load them back ("'function' object has no
#: attribute 'finalize_loading'"), so every start compiled the model again (150-235 s on the
#: embedded model, 2 cores); with inductor's cache a later start of the same engine took 67 s.
#: A value set in the environment stands.
CPU_COMPILE_CACHE = ("VLLM_USE_AOT_COMPILE", "0")
#: tokens a step of a CPU engine schedules at most with chunked prefill off (vLLM's CPU default
#: with chunks on), or the model's length where that is longer
CPU_STEP_TOKENS = 4096


def cpu_whole_prompts(
    max_model_len: int, chunked: bool | None, budget: int | None
) -> dict[str, bool | int]:
    """The settings a CPU engine (or server) adds so that each prompt is prefilled in one step:
    vLLM's CPU build stops the engine when a sampled request's prompt is prefilled in chunks
    ("CPU Generator does not use offset"). ``chunked`` and ``budget`` are the user's own
    ``enable_chunked_prefill`` and ``max_num_batched_tokens`` (None where not given): a user
    who decides on chunks, or gives a step shorter than the model, keeps it; otherwise chunks
    go off and a step holds ``budget`` tokens, or as many as vLLM's CPU default with chunks
    (:data:`CPU_STEP_TOKENS`) or the model's length, whichever is longer."""
    if chunked is not None or (budget is not None and budget < max_model_len):
        return {}
    out: dict[str, bool | int] = {"enable_chunked_prefill": False}
    if budget is None:
        out["max_num_batched_tokens"] = max(max_model_len, CPU_STEP_TOKENS)
    return out


class VLLMOptions(Settings):
    """Engine settings (the rest are vLLM's defaults).

    Attributes:
        dtype: ``auto`` (the workbench's choice for the device: bf16 on GPUs and on CPUs with
            native bf16, else fp32) or a dtype name.
        max_model_len: longest prompt + answer in tokens (bounds the KV cache).
        max_lora_rank: the largest adapter rank served (a stacked SFT+DPO adapter has the sum).
        gpu_memory_utilization: share of GPU memory vLLM may take (GPU only).
        cpu_kv_cache_gib: KV cache size on CPU, unless ``VLLM_CPU_KVCACHE_SPACE`` is set.
        tensor_parallel_size: GPUs to shard the model over.
        seed: the engine's own seed (samples get their own, as in the workbench's engine).
        steering: load the steering extension (:mod:`workbench.backends.vllm_steering`: the
            gate, steering, and reading activations to fit vectors from). None: on CPU, off on
            GPU unless a grid or suite has a steering technique. Its adds are compiled with
            the model (CUDA graphs included); steps that read the gate or capture
            activations run eagerly.
        adapters: serve LoRA adapters (fine-tuned abstainers). None: only when a grid or
            suite has a fine-tuning technique, since an adapter-enabled engine pays for its
            LoRA kernels on every request, including those that use no adapter (and on CPU
            vLLM switches compilation off for it).
        compiled: torch.compile (and CUDA graphs on GPU). None: on GPU, off on CPU, where
            compiled and eager engines gave the same answers at the same speed while a
            compiled start took 3-5x as long (106-201 s against 30-44 s on the embedded model;
            a later start of the same engine reuses the compile cache, see
            :data:`CPU_COMPILE_CACHE`).
        enable_prefix_caching: vLLM's prefix cache (None: vLLM's default).
        enable_chunked_prefill: vLLM's chunked prefill (None: vLLM's default on GPU; off on
            CPU unless ``max_num_batched_tokens`` is shorter than the model: vLLM's CPU build
            stops the engine when a sampled request's prompt is prefilled in chunks, "CPU
            Generator does not use offset", so a CPU engine with chunks on refuses to sample,
            in one line).
        max_num_batched_tokens: tokens per scheduler step (None: vLLM's default); small values
            make long prompts prefill in chunks.
        block_size: tokens per KV-cache block (None: vLLM's default, 128 on CPU; 32 on CPU with
            steering, so that an unsteered answer reuses its gate pass's blocks).
        in_process: run vLLM's engine core in this process rather than a process of its own.
            None: on CPU, where the two processes contend for the same cores, and for a
            steering engine, whose gated answers read their gates in their own prefill: a
            prompt whose gate fired restarts steered at the very next engine step, where a
            separate engine core has already run a few steps ahead. A start also skips one
            process's imports. ``VLLM_ENABLE_V1_MULTIPROCESSING``, when set, decides instead.
            The answers are the same either way.
    """

    label: ClassVar[str] = "option"

    dtype: str = "auto"
    max_model_len: int = 4096
    max_lora_rank: int = 64
    gpu_memory_utilization: float = 0.85
    cpu_kv_cache_gib: int = 2
    tensor_parallel_size: int = 1
    seed: NonNegative = 0
    steering: bool | None = None
    adapters: bool | None = None
    compiled: bool | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    in_process: bool | None = None

    #: memory and scheduling: who is steered and what it answers never depend on them (not in
    #: a cell's hash)
    not_in_answers: ClassVar[frozenset[str]] = frozenset(
        {
            "gpu_memory_utilization",
            "cpu_kv_cache_gib",
            "steering",
            "adapters",
            "compiled",
            "enable_prefix_caching",
            "enable_chunked_prefill",
            "max_num_batched_tokens",
            "block_size",
            "in_process",
        }
    )


def _new_llm(vllm, kwargs: dict, in_process: bool):
    """``vllm.LLM(**kwargs)`` with its engine core in this process or in its own.

    vLLM reads the choice from ``VLLM_ENABLE_V1_MULTIPROCESSING`` when the engine is built and
    caches its environment once an engine core has started, so the cache is reset around the
    build (an earlier engine's choice would otherwise stick) and the variable set for it only.
    A cache the build turned on is turned on again over the restored environment: an engine
    core in this process reads vLLM's settings on every step.
    """
    import vllm.envs as envs

    reset = getattr(envs, "disable_envs_cache", lambda: None)
    before = os.environ.get(MULTIPROCESSING)
    os.environ[MULTIPROCESSING] = "0" if in_process else "1"
    reset()
    try:
        return vllm.LLM(**kwargs)
    finally:
        cached = getattr(envs, "_is_envs_cache_enabled", lambda: False)()
        if before is None:
            os.environ.pop(MULTIPROCESSING, None)
        else:
            os.environ[MULTIPROCESSING] = before
        reset()
        if cached:
            envs.enable_envs_cache()


def _require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ModelLoadError(
            "the vLLM back end needs vLLM in this environment: pip install -e '.[vllm]' on a GPU "
            "machine, or scripts/setup_vllm.sh for the CPU build in .venv-vllm"
        )


@register_engine
class VLLMModel(BlackBoxBackend):
    """A model loaded by vLLM's offline engine (see the module docstring)."""

    backend = "vllm"
    options_type = VLLMOptions
    engine = "vLLM"
    capabilities = VLLM_CAPABILITIES

    @classmethod
    def check_target(cls, target: str) -> None:
        """vLLM is installed here, and ``target`` can load (without loading it): one line
        before a run folder is made."""
        _require_vllm()
        super().check_target(target)

    @classmethod
    def options_for(cls, options: dict[str, Any] | None, needs: frozenset[str]) -> Any:
        """With a steering technique in the grid, the steering extension on; with a
        fine-tuning one, adapters on (unless the options say otherwise)."""
        turn_on = {
            key: True
            for key, need in (("steering", "steering"), ("adapters", "weights"))
            if need in needs and (options is None or options.get(key) is None)
        }
        return {**(options or {}), **turn_on} if turn_on else options

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
    ) -> VLLMModel:
        """``options``: :class:`VLLMOptions` or a dict of its fields; a ``dtype`` other than
        auto fills the options' auto dtype."""
        opts = cls.options_from(options, name)
        if dtype not in (None, "auto") and opts.dtype == "auto":
            opts = opts.replace(dtype=str(dtype).removeprefix("torch."))
        return cls(ref.target, opts, name=name)

    def __init__(self, target: str, options: VLLMOptions | None = None, *, name: str | None = None):
        _require_vllm()
        from workbench.models.loading import resolve_device, resolve_source
        from workbench.models.numerics import resolve_dtype

        self.options = o = options or VLLMOptions()
        src = resolve_source(target)  # a model that cannot load: one line before vLLM's import
        import vllm
        from transformers import AutoTokenizer

        self.name = name or f"vllm:{target}"
        self.model_id, self.revision, self.source_dir = src.model_id, src.revision, src.source_dir
        self.target = target
        device = resolve_device("auto")
        self.dtype = resolve_dtype(o.dtype, device)
        self.dtype_name = str(self.dtype).removeprefix("torch.")
        if device.type == "cpu":
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(o.cpu_kv_cache_gib))
            os.environ.setdefault(*CPU_COMPILE_CACHE)
        load_from = str(src.load_from)
        self.tokenizer = AutoTokenizer.from_pretrained(load_from, **src.kwargs)
        self.adapters = bool(o.adapters)
        kwargs = dict(
            model=load_from,
            tokenizer=load_from,
            dtype=self.dtype_name,
            max_model_len=o.max_model_len,
            seed=o.seed,
            tensor_parallel_size=o.tensor_parallel_size,
            **({"revision": src.kwargs["revision"]} if "revision" in src.kwargs else {}),
        )
        if device.type == "cuda":
            kwargs["gpu_memory_utilization"] = o.gpu_memory_utilization
        for key in (
            "enable_prefix_caching",
            "enable_chunked_prefill",
            "max_num_batched_tokens",
            "block_size",
        ):
            if getattr(o, key) is not None:
                kwargs[key] = getattr(o, key)
        if device.type == "cpu":  # whole prompts per step (VLLMOptions.enable_chunked_prefill)
            kwargs.update(
                cpu_whole_prompts(
                    o.max_model_len, o.enable_chunked_prefill, o.max_num_batched_tokens
                )
            )
        #: a CPU engine whose prompts may be prefilled in chunks cannot sample (see above)
        self._chunks_stop_sampling = (
            device.type == "cpu" and kwargs.get("enable_chunked_prefill") is not False
        )
        if self.adapters:
            kwargs.update(enable_lora=True, max_lora_rank=o.max_lora_rank)
        from vllm.platforms import current_platform

        # an engine whose adapters are trained here sleeps while they train (one copy on the card)
        self._sleeps = self.adapters and current_platform.is_sleep_mode_available()
        if self._sleeps:
            kwargs["enable_sleep_mode"] = True
        self.steering = o.steering if o.steering is not None else device.type == "cpu"
        self.compiled = o.compiled if o.compiled is not None else device.type != "cpu"
        if not self.compiled:
            kwargs["enforce_eager"] = True
        if self.steering:
            # imported before vLLM loads the model: its hooks become part of the compiled model
            from workbench.backends.vllm_steering import EXTENSION, install_at_load

            install_at_load()  # an in-process engine core loads the model in this process
            kwargs["worker_extension_cls"] = EXTENSION
            if device.type == "cpu" and o.block_size is None:
                kwargs["block_size"] = 32  # see VLLMOptions.block_size
            # the extension reads the V1 model runner's batch layout (V2 is GPU-only, with Triton)
            os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
            if self.compiled:
                print(
                    f"[{self.name}] steering compiled with the model; the steps that read the gate "
                    "or capture activations run eagerly",
                    flush=True,
                )
        self.capabilities = replace(
            VLLM_CAPABILITIES,
            steering=self.steering,
            capture=self.steering,
            adapters=self.adapters,
        )
        in_process = o.in_process
        if in_process is None:  # a choice made in the environment stands
            set_in_env = os.environ.get(MULTIPROCESSING)
            on_cpu = device.type == "cpu"
            in_process = (self.steering or on_cpu) if set_in_env is None else set_in_env == "0"
        self.llm = _new_llm(vllm, kwargs, in_process)
        self.version = vllm.__version__
        self._eos = eos_token_ids(_GenerationConfigHolder(load_from), self.tokenizer)
        self._adapters: dict[str, int] = {}
        self._registered: set[str] = set()
        self._shape: tuple[int, ...] | None = None  # (hidden, layers), asked once
        self._hf = None

    # -- generation -------------------------------------------------------------------------
    def _lora(self, adapter: str | None):
        if adapter is None:
            return None
        if not self.adapters:
            raise ModelLoadError(
                f"model {self.name!r} was loaded without adapters: load it with "
                "options={'adapters': True} to answer through a fine-tuned adapter"
            )
        from vllm.lora.request import LoRARequest

        path = str(Path(adapter).resolve())
        if path not in self._adapters:
            cfg = json.loads((Path(path) / "adapter_config.json").read_text())
            if int(cfg.get("r", 0)) > self.options.max_lora_rank:
                raise ModelLoadError(
                    f"adapter {path} has rank {cfg['r']}, above max_lora_rank="
                    f"{self.options.max_lora_rank}; raise it in the vLLM options"
                )
            self._adapters[path] = len(self._adapters) + 1
        return LoRARequest(f"adapter-{self._adapters[path]}", self._adapters[path], path)

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
        texts, encoded = self._encode(prompts, config.system_prompt, chat)
        return self._generate(texts, encoded, config, stop_when, progress, lora=self._lora(adapter))

    def _encode(
        self, prompts, system: str | None, chat: bool = True
    ) -> tuple[list[str], list[list[int]]]:
        """Each prompt rendered with the chat template as the engine renders it, and its ids."""
        texts = [render_chat(self.tokenizer, p, system=system) if chat else p for p in prompts]
        return texts, [self.tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in texts]

    def _generate(
        self,
        texts: list[str],
        encoded: list[list[int]],
        config: GenerationConfig,
        stop_when,
        progress: bool,
        *,
        lora=None,
        extra: list | None = None,
        salts: list | None = None,
        gate=None,
    ) -> list[Generation]:
        """One request per (prompt, sample); ``extra`` and ``salts`` are per prompt (vLLM's
        ``extra_args`` and ``cache_salt``); with ``gate`` (a
        :class:`~workbench.backends.vllm_gated.PrefillGate`) each gated prompt's answer reads
        its gate in its own prefill and is steered from its first token if the gate fires."""
        from vllm import SamplingParams

        if config.do_sample and self._chunks_stop_sampling:
            raise ConfigError(
                f"[{self.name}] vLLM's CPU build cannot sample with chunked prefill on (its "
                "seeded sampler cannot resume after a prompt prefilled in chunks: 'CPU Generator "
                "does not use offset', which stops the engine): load it with "
                "enable_chunked_prefill=False (the CPU default)"
            )
        want_lp = config.return_logprobs
        requests, params, keys = [], [], []
        for i, ids in enumerate(encoded):
            for k in range(config.num_samples):
                request: dict = {"prompt_token_ids": ids}
                if salts is not None and salts[i] is not None:
                    request["cache_salt"] = salts[i]
                requests.append(request)
                params.append(
                    SamplingParams(
                        n=1,
                        max_tokens=config.max_new_tokens,
                        temperature=config.temperature if config.do_sample else 0.0,
                        top_p=config.top_p if config.do_sample else 1.0,
                        seed=sample_seed(config.seed, texts[i], k) if config.do_sample else None,
                        stop=list(config.stop_strings) or None,
                        logprobs=0 if want_lp else None,
                        skip_special_tokens=True,
                        detokenize=True,
                        extra_args=extra[i] if extra is not None else None,
                    )
                )
                keys.append((i, k))
        if gate is None:
            outs = self.llm.generate(requests, params, use_tqdm=progress, lora_request=lora)
        else:
            from workbench.backends import vllm_gated

            prompt_of = [i for i, _ in keys]
            outs = vllm_gated.run(
                self.llm, requests, params, prompt_of, gate, lora=lora, progress=progress
            )
        #: prompt tokens the last call took from the prefix cache (tests, benchmarks)
        self.last_cached_tokens = sum(int(getattr(o, "num_cached_tokens", 0) or 0) for o in outs)
        gens = []
        for (i, k), out in zip(keys, outs):
            c = out.outputs[0]
            ids = list(c.token_ids)
            lps = (
                [float(step[t].logprob) for step, t in zip(c.logprobs, ids)]
                if want_lp and c.logprobs
                else None
            )
            reason: FinishReason = (
                "length"
                if c.finish_reason == "length"
                else "stop_string"
                if isinstance(c.stop_reason, str)
                else "eos"
            )
            if stop_when is not None:
                n = cut_when(
                    [t for t in ids if t not in self._eos],
                    lambda p: self.tokenizer.decode(p, skip_special_tokens=True),
                    stop_when,
                )
                if n is not None and (n < len(ids) or reason == "length"):
                    ids, reason = ids[:n], "stop_when"
                    lps = lps[:n] if lps is not None else None
            text = self.tokenizer.decode(
                [t for t in ids if t not in self._eos], skip_special_tokens=True
            )
            if reason == "stop_string":
                hits = [text.index(s) for s in config.stop_strings if s in text]
                text = text[: min(hits)] if hits else text
            gens.append(
                Generation(
                    prompt_index=i,
                    sample=k,
                    text=text.strip(),
                    token_ids=ids,
                    finish_reason=reason,
                    prompt_tokens=len(encoded[i]),
                    logprobs=lps,
                )
            )
        return gens

    # -- steering -----------------------------------------------------------------------------
    def _require_steering(self) -> None:
        if not self.steering:
            raise ModelLoadError(
                f"model {self.name!r} was loaded without the steering extension: load it with "
                "options={'steering': True}"
            )

    def register_abstainer(self, spec) -> str:
        """Register a :class:`~workbench.steering.spec.SteerSpec` in vLLM's workers; returns
        its digest (registering the same spec again is free)."""
        self._require_steering()
        digest = spec.digest()
        if digest not in self._registered:
            if self._shape is None:
                self._shape = tuple(self.llm.collective_rpc("workbench_shape")[0])
            spec.check_model(*self._shape)  # one ConfigError line, before any worker sees it
            self.llm.collective_rpc("workbench_register", args=(spec.to_json(),))
            self._registered.add(digest)
        return digest

    def gate(self, prompts, specs, system: str | None = None, *, chat: bool = True) -> list:
        """The gate of ``specs[i]`` (a spec or None) on ``prompts[i]``, read inside vLLM: per
        prompt ``None`` (no gate) or ``{"fired", "votes", "similarities"}``. One request per
        gated prompt, one token long, never steered (its prompt blocks are cached for the
        unsteered generation that may follow)."""
        import uuid

        from workbench.backends.vllm_steering import gate_args

        gated = [i for i, s in enumerate(specs) if s is not None and s.gate is not None]
        result: list = [None] * len(prompts)
        if not gated:
            return result
        texts, encoded = self._encode([prompts[i] for i in gated], system, chat)
        tags = [f"gate-{uuid.uuid4().hex}" for _ in gated]
        extra = [gate_args(self.register_abstainer(specs[i]), t) for i, t in zip(gated, tags)]
        one = GenerationConfig(max_new_tokens=1)
        self._generate(texts, encoded, one, None, False, extra=extra)
        votes = self.llm.collective_rpc("workbench_votes", args=(tags,))[0]
        for i, t in zip(gated, tags):
            if t not in votes or "fired" not in votes[t]:
                raise RuntimeError(f"vLLM's gate recorded no decision for prompt {i}")
            result[i] = votes[t]
        return result

    def generate_steered(
        self,
        prompts,
        config: GenerationConfig,
        specs,
        *,
        gate_prompts=None,
        gate_system: str | None = None,
        decisions=None,
        stop_when=None,
        progress: bool = True,
    ) -> tuple[list[Generation], list]:
        """Generate with conditional steering inside vLLM, one abstainer per prompt.

        ``specs[i]`` is prompt ``i``'s :class:`~workbench.steering.spec.SteerSpec` (None:
        unsteered); prompts with different abstainers, and unsteered ones, share vLLM's batch.
        The gate reads each prompt as it will be generated (the config's system prompt) in the
        answer's own prefill (:mod:`~workbench.backends.vllm_gated`: only the answers whose gate
        fired are started again, steered; an ``in_pass`` abstainer's are steered in that same
        pass), or ``gate_prompts[i]`` rendered with ``gate_system``
        (SELECT's reading template) in a pass of its own first; then each prompt whose gate
        fired (every prompt of a spec without a gate) is generated steered from its first
        token (``separate``) or as CAST does (``in_pass``), the others unsteered. ``decisions``
        (one bool per prompt) skips the gate. Returns the generations and, per prompt, the
        gate's record (``None`` for prompts with no gate).
        """
        import uuid

        from workbench.backends.vllm_gated import PrefillGate
        from workbench.backends.vllm_steering import cache_salt, steer_args, steers_prompt

        specs = list(specs)
        if len(specs) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(specs)} abstainers")
        if any(s is not None for s in specs):
            self._require_steering()
        digests = [self.register_abstainer(s) if s is not None else None for s in specs]
        tags = [f"steer-{uuid.uuid4().hex}" if d else None for d in digests]
        texts, encoded = self._encode(prompts, config.system_prompt)
        gated = [d if d and s.gate is not None else None for d, s in zip(digests, specs)]
        if decisions is None and gate_prompts is None and any(gated):
            # each answer reads its own gate in its prefill (vllm_gated): no pass of its own
            gate = PrefillGate(
                gated,
                lambda i: (
                    steer_args(str(digests[i]), True, tags[i]),
                    cache_salt(str(digests[i]), True),
                ),
                then={
                    # a prompt steered in its own pass keeps its blocks to itself
                    i: f"workbench-in-pass:{uuid.uuid4().hex}"
                    if steers_prompt(s, self.num_layers)
                    else None
                    for i, (g, s) in enumerate(zip(gated, specs))
                    if g and s.mode == "in_pass"
                },
            )
            plain = [
                steer_args(d, True, t) if d and not g else None
                for d, g, t in zip(digests, gated, tags)
            ]
            salts = [cache_salt(d, True) if d and not g else None for d, g in zip(digests, gated)]
            gens = self._generate(
                texts, encoded, config, stop_when, progress, extra=plain, salts=salts, gate=gate
            )
            records: list = [gate.records.get(i) for i in range(len(prompts))]
            fired = [
                d is not None and (r["fired"] if r is not None else True)
                for d, r in zip(digests, records)
            ]
        else:
            if decisions is not None:
                records = [None] * len(prompts)
                fired = [bool(d) and s is not None for d, s in zip(decisions, specs)]
            else:
                if gate_prompts is None:
                    records = self.gate(list(prompts), specs, config.system_prompt)
                else:
                    records = self.gate(list(gate_prompts), specs, gate_system)
                fired = [
                    s is not None and (r["fired"] if r is not None else True)
                    for s, r in zip(specs, records)
                ]
            extra = [steer_args(d, f, t) if d else None for d, f, t in zip(digests, fired, tags)]
            salts = [cache_salt(d, f) if d else None for d, f in zip(digests, fired)]
            gens = self._generate(
                texts, encoded, config, stop_when, progress, extra=extra, salts=salts
            )
        tags = [t if f else None for t, f in zip(tags, fired)]
        asked = [t for t in tags if t]
        failed = self.llm.collective_rpc("workbench_votes", args=(asked,))[0] if asked else {}
        bad = [(i, failed[t]["failed"]) for i, t in enumerate(tags) if t in failed]
        bad += [(i, r.pop("failed")) for i, r in enumerate(records) if r and "failed" in r]
        if bad:  # a steered request whose activations went non-finite fails, alone
            i, why = min(bad)
            raise SteeringError(
                f"prompt {i} ({specs[i].name}): {why}; {len(bad)} of {len(prompts)} steered "
                "prompts failed (the others' answers are unaffected): lower the strength"
            )
        return gens, [r if r is not None else {"fired": f} for r, f in zip(records, fired)]

    # -- activations, read inside vLLM ---------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """Decoder blocks of the served model (asked of the workers once)."""
        self._require_steering()
        if self._shape is None:
            self._shape = tuple(self.llm.collective_rpc("workbench_shape")[0])
        return int(self._shape[1])

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
        """Pooled residual-stream activations, shape ``(len(prompts), len(layers), hidden)``,
        float32 on the CPU, read inside vLLM's forward pass (one one-token request per prompt,
        never steered, never served from the prefix cache), as
        :func:`workbench.steering.collect_activations` reads them on the Hugging Face engine:
        the same rendering, layers, pooling and final norm. No second copy of the weights.
        The routine is :func:`workbench.backends.vllm_capture.capture_activations`, which the
        steering server's served model runs too."""
        from workbench.backends.vllm_capture import capture_activations

        self._require_steering()
        num_layers = self.num_layers  # the model's shape, asked of the workers once
        assert self._shape is not None
        one = GenerationConfig(max_new_tokens=1)

        def encode(prompts, system, chat):
            return list(zip(*self._encode(prompts, system, chat)))

        def run(encoded, extra, salts, tags):
            texts, ids = [t for t, _ in encoded], [i for _, i in encoded]
            self._generate(texts, ids, one, None, False, extra=extra, salts=salts)
            return self.llm.collective_rpc("workbench_captured", args=(tags,))[0]

        return capture_activations(
            prompts,
            layers,
            shape=(int(self._shape[0]), num_layers),
            encode=encode,
            run=run,
            pooling=pooling,
            tail=tail,
            chat=chat,
            system=system,
            batch_size=batch_size,
            progress=progress,
            final_norm=final_norm,
        )

    # -- scoring ----------------------------------------------------------------------------
    def option_probabilities(self, texts, options, batch_size: int = 32):
        """Exact probabilities of each option's tokens after each rendered text: one request
        per (text, option prefix) asks for the raw log-probabilities of just the tokens that can
        follow that prefix (``logprob_token_ids``)."""
        import math

        from vllm import SamplingParams

        from workbench.generation.options import combine_options, option_candidates

        cands = option_candidates(self.tokenizer, options)
        follow: dict[tuple[int, ...], set[int]] = {}
        for _, ids in cands:
            for t in range(len(ids)):
                follow.setdefault(ids[:t], set()).add(ids[t])
        # (prefix, tokens) queries of at most 20 tokens each (vLLM's default max_logprobs)
        queries = [
            (p, chunk)
            for p in sorted(follow, key=lambda p: (len(p), p))
            for chunk in _chunks(sorted(follow[p]), 20)
        ]
        enc = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        requests = [{"prompt_token_ids": e + list(p)} for e in enc for p, _ in queries]
        params = [
            SamplingParams(
                max_tokens=1, temperature=0.0, logprobs=len(toks), logprob_token_ids=toks
            )
            for _ in enc
            for _, toks in queries
        ]
        outs = self.llm.generate(requests, params, use_tqdm=False)
        result = []
        for i in range(len(enc)):
            logp: dict[tuple[int, ...], dict[int, float]] = {}
            for j, (p, _) in enumerate(queries):
                step = outs[i * len(queries) + j].outputs[0].logprobs[0]
                logp.setdefault(p, {}).update({int(t): float(lp.logprob) for t, lp in step.items()})
            p_seq = {
                ids: math.exp(sum(logp[ids[:t]][ids[t]] for t in range(len(ids))))
                for _, ids in cands
            }
            result.append(combine_options(cands, p_seq, len(options)))
        return result

    # -- training on the same weights -------------------------------------------------------
    @contextlib.contextmanager
    def training_copy(self):
        """The same weights on the Hugging Face engine (fp32), to train an adapter on, for the
        ``with`` block only: vLLM then serves the adapter over its own weights. On a GPU an
        engine with adapters sleeps meanwhile (vLLM's sleep mode: its weights go to host memory
        and its KV cache is freed) and wakes after, so the card holds one copy at a time; on
        CPU, which has no sleep mode, the copy is released when the block ends."""
        import gc

        import torch

        from workbench.backends.base import parse_model
        from workbench.backends.hf import HFModel

        asleep = self._sleeps
        if asleep:
            self.llm.sleep(level=1)
        try:
            yield HFModel.load(parse_model(self.target), self.target, dtype="float32")
        finally:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if asleep:
                self.llm.wake_up()

    def hf(self):
        """The same weights on the Hugging Face engine, kept (loaded on first use): for reading
        activations on an engine loaded without the steering extension. Grids never need it:
        vectors are read inside vLLM and adapters trained on :meth:`training_copy`."""
        if self._hf is None:
            from workbench.backends.base import parse_model
            from workbench.backends.hf import HFModel

            self._hf = HFModel.load(parse_model(self.target), self.target, dtype="float32")
        return self._hf

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:
                pass
        self._hf = None


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class _GenerationConfigHolder:
    """What ``eos_token_ids`` reads from a model: its generation config's end tokens."""

    def __init__(self, directory: str):
        from transformers import GenerationConfig as HFGenerationConfig

        try:
            self.generation_config: HFGenerationConfig | None = HFGenerationConfig.from_pretrained(
                directory
            )
        except (OSError, ValueError):
            self.generation_config = None
