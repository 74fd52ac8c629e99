"""Steering and the concept gate inside vLLM's model runner, per request.

vLLM runs every scheduled token of every request in one flattened forward pass. This module is a
worker extension (vLLM's ``worker_extension_cls``): registered abstainers
(:class:`~workbench.steering.spec.SteerSpec`) live in each worker; a request asks for one
through ``SamplingParams.extra_args`` (flat keys, so that an API request's ``vllm_xargs`` can
carry them too):

``{"workbench_gate": DIGEST, "workbench_tag": TAG}``
    read the gate's layers at the prompt's last token (the pass is never steered) and keep the
    votes under ``TAG`` until :meth:`SteeringWorkerExtension.workbench_votes` collects them.
    With ``"workbench_then_steer": "1"`` (an ``in_pass`` abstainer: CAST's order) a request
    whose gate fires is steered from there on in the same request: the prompt's positions at
    the behaviour layers deeper than the deepest gate layer in the very pass that read the
    gate, every generated position at every behaviour layer. The record then says
    ``"steered": true``. A prompt whose positions are steered (a behaviour layer deeper than
    the gate) can be steered in its own pass only when the whole prompt is computed in that
    pass; a prompt split over several steps (chunked prefill) is not, and the caller sends it
    again steered (:func:`steers_prompt`).
``{"workbench_capture": CAPTURE, "workbench_tag": TAG}``
    read the residual stream at chosen layers, pooled over chosen prompt positions
    (:func:`capture_args`: the last prompt token, or the mean of every prompt token or of the
    last ``tail``), and keep it under ``TAG`` until
    :meth:`SteeringWorkerExtension.workbench_captured` collects it: what concept and refusal
    vectors, centring means and gate thresholds are fitted from, with no second copy of the
    weights. Sums gather across the steps of a chunked prompt; the caller gives each capture a
    prefix-cache salt of its own, so that every prompt position is computed.
``{"workbench_steer": DIGEST}`` (optionally ``"workbench_tag": TAG``)
    add the abstainer's vectors: ``separate`` mode at every position (the prompt is steered from
    its first token), ``in_pass`` mode at the prompt's positions only at behaviour layers deeper
    than the deepest gate layer and at every generated position everywhere (CAST's order, as
    the workbench's engine does it).

Before every forward the wrapper maps each token to its request (vLLM's ``query_start_loc``,
each request's computed-token count and prompt length: host data, no copy from the device),
so who is steered depends only on the
request, never on which others share the batch, how the scheduler chunks a prompt or which
blocks come from the prefix cache. A steered request is steered at every position of its
prompt, so its key/value blocks may be shared only with requests steered the same way: the
client gives it a ``cache_salt`` naming the abstainer and decision (:func:`cache_salt`).

Specs are checked when built (:class:`~workbench.steering.spec.SteerSpec`: shapes, finite
values, enumerations) and against the model when registered, so nothing a request carries can
raise inside the forward pass. Should a steered request's activations still become non-finite,
its rows are zeroed from that layer on (other requests' key/value blocks and answers stay as
they were) and the failure is kept under its tag for the caller to report.

The adds are tensor operations on persistent buffers (:class:`SteeringState`), installed when
vLLM loads the model (:func:`install_at_load`), so they are traced into a compiled model and its
CUDA graphs; the gate's reads and captures run in eager steps (``skip_compiled``). On an eager
engine a step with no workbench request costs one dictionary lookup per request and a no-op call
per layer. The extension needs vLLM's V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``, set by
the back end and ``serve --steering``) and refuses to install on anything else rather than steer
nothing.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from workbench.errors import ConfigError

GATE, TAG, STEER = "workbench_gate", "workbench_tag", "workbench_steer"
THEN = "workbench_then_steer"
CAPTURE = "workbench_capture"
#: vLLM's ``worker_extension_cls`` for an engine that steers
EXTENSION = "workbench.backends.vllm_steering.SteeringWorkerExtension"


def gate_args(digest: str, tag: str, then_steer: bool = False) -> dict[str, Any]:
    """``extra_args`` of a request that reads the gate of abstainer ``digest``; with
    ``then_steer`` (an ``in_pass`` abstainer) it is steered in its own pass once the gate
    fires (the record says ``"steered": true`` where it was)."""
    return {GATE: digest, TAG: tag, THEN: "1"} if then_steer else {GATE: digest, TAG: tag}


def steers_prompt(spec, n_layers: int) -> bool:
    """Whether a fired ``in_pass`` request of ``spec`` is steered at some of its prompt's
    positions (a behaviour layer deeper than the deepest gate layer): such a request's
    key/value blocks depend on its own decision, so it must not share them with another
    prompt's (the caller gives it a cache salt of its own)."""
    if spec.gate is None:
        return True
    return max(l % n_layers for l in spec.layers) > _deepest(spec, n_layers)


def _deepest(spec, n: int) -> int:
    """The deepest layer ``spec``'s gate reads (``n`` for the final norm; -1 without a gate)."""
    if spec.gate is None:
        return -1
    layers = [l % n for l in spec.gate.layers]
    return n if spec.gate.final_norm and n - 1 in layers else max(layers)


def steer_args(digest: str, fired: bool, tag: str | None = None) -> dict[str, Any] | None:
    """``extra_args`` of a generation steered by ``digest`` (None when its gate did not fire);
    with ``tag`` a failure of the request (non-finite activations) is kept under it."""
    if not fired:
        return None
    return {STEER: digest, TAG: tag} if tag else {STEER: digest}


@dataclass(frozen=True)
class Capture:
    """What a capture request reads: ``layers`` (negative ones count from the end), pooled at
    the prompt's ``last`` token or as the ``mean`` of its tokens (only the last ``tail`` of them
    when given); ``final_norm`` reads the last block after the model's final norm."""

    layers: tuple[int, ...]
    pooling: str = "last"
    tail: int | None = None
    final_norm: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "layers": list(self.layers),
                "pooling": self.pooling,
                "tail": self.tail,
                "final_norm": self.final_norm,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Capture:
        """The capture ``text`` describes, or ValueError / KeyError / TypeError where it is
        not one (a request's own field: the worker skips such a request, never the step)."""
        d = json.loads(text)
        layers = tuple(int(l) for l in d["layers"])
        tail = d["tail"]
        if not layers or d["pooling"] not in ("last", "mean"):
            raise ValueError(f"not a capture: {text[:80]}")
        if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 0):
            raise ValueError(f"capture tail {tail!r}: a count of tokens")
        return cls(layers, d["pooling"], tail, bool(d["final_norm"]))

    def positions(self, n_prompt: int) -> tuple[int, int]:
        """The prompt positions pooled: ``[first, n_prompt)``."""
        if self.pooling == "last":
            return n_prompt - 1, n_prompt
        first = 0 if self.tail is None else max(0, n_prompt - int(self.tail))
        return first, n_prompt


def captures_for(n: int, layers, pooling: str, tail, final_norm: bool) -> list[Capture]:
    """The :class:`Capture` of each of ``n`` prompts (``tail[i]`` per prompt, or None)."""
    layers = tuple(int(l) for l in layers)
    return [
        Capture(layers, pooling, None if tail is None else int(tail[i]), final_norm)
        for i in range(n)
    ]


def captured_tensors(
    got: dict[str, tuple[list[int], bytes]], tags: list[str]
) -> list[torch.Tensor | None]:
    """Each tag's activations from :meth:`SteeringWorkerExtension.workbench_captured`'s answer
    (a tensor, layers x hidden), or None for a tag it has no record of."""
    out: list[torch.Tensor | None] = []
    for t in tags:
        if t not in got:
            out.append(None)
            continue
        shape, data = got[t]
        out.append(torch.frombuffer(bytearray(data), dtype=torch.float32).view(*shape))
    return out


def capture_args(capture: Capture, tag: str) -> dict[str, Any]:
    """``extra_args`` of a one-token request that only reads activations (flat string values:
    an API request's ``vllm_xargs`` can carry them)."""
    return {CAPTURE: capture.to_json(), TAG: tag}


def cache_salt(digest: str, fired: bool) -> str | None:
    """The prefix-cache salt of a request steered by ``digest``: steered key/value blocks are
    shared only among requests steered the same way; unsteered ones share with everyone."""
    return f"workbench-steer:{digest}" if fired else None


@dataclass
class _Loaded:
    """A registered spec, on the model's device."""

    spec: Any
    vectors: dict[int, torch.Tensor]  # behaviour layer -> strength * vector
    condition: Any  # workbench.steering.concept.Condition or None
    deepest: int  # deepest gate layer (-1 without a gate)
    #: behaviour layers steered at every row of a steered request, and those steered from its
    #: first generated row on (an ``in_pass`` abstainer's layers up to its deepest gate layer:
    #: its decision is not known in the prompt's pass there)
    everywhere: np.ndarray = field(init=False)
    generated: np.ndarray = field(init=False)

    def __post_init__(self):
        late = self.spec.mode == "in_pass"
        layers = sorted(self.vectors)
        self.generated = np.array([l for l in layers if late and l <= self.deepest], dtype=int)
        self.everywhere = np.array([l for l in layers if not late or l > self.deepest], dtype=int)


@dataclass
class _Step:
    """What the current forward pass does beyond the buffers' adds: reads (eager only) and the
    steered requests whose failures are reported."""

    # site (layer index, or "norm") -> [(tag, loaded, gate position j, token row)]
    reads: dict[Any, list[tuple[str, _Loaded, int, int]]] = field(default_factory=dict)
    # each steered request's token rows [lo, hi) and its tag (None: asked for no report)
    steered: list[tuple[int, int, str | None]] = field(default_factory=list)
    # site -> [(tag, layer position j, number of layers, token rows pooled)]
    captures: dict[Any, list[tuple[str, int, int, torch.Tensor]]] = field(default_factory=dict)
    # gate tag -> (request id, digest, deeper behaviour layers, rows [lo, hi)) of a request
    # steered in this very pass should its gate fire
    then: dict[str, tuple[str, str, list[int], int, int]] = field(default_factory=dict)
    #: bank slots this pass steers with (never given to another abstainer during it)
    busy: set[int] = field(default_factory=set)
    #: token rows whose buffers were filled (zeroed again after the pass)
    rows: int = 0


#: abstainers whose vectors sit in the bank at once unless the engine schedules more requests
#: per step (``max_num_seqs``): a step can then steer each with its own; the others wait in host
#: memory and are swapped in on use
BANK_SLOTS = 256


def _event(device: torch.device):
    """A CUDA event recorded on ``device``'s current stream (None on CPU, where a copy is
    done when it returns)."""
    if device.type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record()
    return event


def _host_side(t: torch.Tensor) -> torch.Tensor:
    """Where the host fills a device buffer before a step: the buffer itself on CPU, a pinned
    twin on a GPU (copied without blocking)."""
    if t.device.type == "cpu":
        return t
    twin = torch.zeros_like(t, device="cpu")
    return twin.pin_memory() if torch.cuda.is_available() else twin


class SteeringState:
    """The worker's abstainers, the hooks on its model, and what requests left to collect.

    The steering adds are tensor operations on persistent buffers: a bank of vectors per layer
    (``bank[layer, slot]``: strength x vector, slot 0 all zeros) and a per-layer, per-token slot
    index filled before each step; every decoder block adds ``bank[layer][index[:n, layer]]``
    to its output and zeroes the rows of steered requests that became non-finite (recording
    the first such layer per token). These operations are traced into vLLM's compiled graph
    (and CUDA graphs: the buffers never move), so a steering engine stays compiled; the
    hooks are installed when vLLM loads the model, before it compiles it
    (:func:`install_at_load`). The gate's reads and captures are Python (they record values
    for the host), so a step that holds one runs eagerly (``skip_compiled``); steps of
    generation, steered or not, run compiled. On an eager engine a step with no workbench
    request skips the hooks entirely.
    """

    def __init__(self, runner, *, at_load: bool = False):
        from workbench.generation.hooks import decoder_blocks

        mode = getattr(runner.compilation_config, "mode", None)
        graphs = getattr(runner.compilation_config, "cudagraph_mode", None)
        self.compiled = (mode is not None and int(mode) != 0) or (
            graphs is not None and str(getattr(graphs, "name", graphs)) != "NONE"
        )
        if self.compiled and not at_load:
            raise RuntimeError(
                "steering inside vLLM must install its hooks before vLLM compiles the model: "
                f"this engine is compiled (compilation mode {mode}, cudagraph mode {graphs}) and "
                "its runner was loaded without workbench.backends.vllm_steering imported"
            )
        missing = [
            a
            for a in ("_model_forward", "input_batch", "query_start_loc", "requests")
            if not hasattr(runner, a)
        ]
        if missing:
            raise RuntimeError(
                f"steering inside vLLM needs vLLM's V1 model runner ({type(runner).__name__} "
                f"lacks {', '.join(missing)}): set VLLM_USE_V2_MODEL_RUNNER=0"
            )
        self.runner = runner
        self.model = runner.get_model()
        param = next(self.model.parameters())
        # the activations' dtype: the model config's (a quantized model's first weights may
        # be integers), else its first floating-point weights'
        dtype = getattr(runner.model_config, "dtype", None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            floats = (q.dtype for q in self.model.parameters() if q.is_floating_point())
            dtype = next(floats, param.dtype)
        self.device, self.dtype = param.device, dtype
        self.specs: dict[str, _Loaded] = {}
        # tag -> a gate's votes, or {"failed": why} for a steered request that went non-finite
        self.votes: dict[str, dict[str, Any]] = {}
        # tag -> (sums: layers x hidden, token counts per layer) of a capture request
        self.captured: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._captures: dict[str, Capture] = {}  # a capture's JSON -> its parsed form
        # tag -> the prompt positions its record has counted: a request preempted and computed
        # again counts each position once
        self._counted: dict[str, set[int]] = {}
        # request id -> digest of the abstainer it is steered by once its gate fired in its
        # own pass (``THEN``), or None where there is nothing more to do for it (its gate
        # stayed shut, or was read for a pass of its caller's own)
        self.decided: dict[str, str | None] = {}
        self.current: _Step | None = None
        prefix, blocks = decoder_blocks(self.model)
        self.num_layers = n_layers = len(blocks)
        width = int(runner.model_config.get_hidden_size())
        tokens = int(
            getattr(runner, "max_num_tokens", 0) or runner.scheduler_config.max_num_batched_tokens
        )
        dev = self.device
        seqs = int(getattr(runner.scheduler_config, "max_num_seqs", 0) or 0)
        self.n_slots = max(BANK_SLOTS, seqs)
        self.bank = torch.zeros(n_layers, self.n_slots + 1, width, dtype=self.dtype, device=dev)
        # tokens x layers: a step's rows ``[:n]`` are one contiguous block, which a GPU copies
        # in from pinned memory without staging
        self.index = torch.zeros(tokens, n_layers, dtype=torch.long, device=dev)
        self.guard = torch.zeros(tokens, dtype=torch.bool, device=dev)  # steered requests' rows
        self.failed = torch.zeros(tokens, dtype=torch.int32, device=dev)  # first bad layer + 1
        # the host's side of index and guard (the same tensors on CPU: no copy at all)
        self._index, self._guard = _host_side(self.index), _host_side(self.guard)
        # numpy views of the host side, filled per request with one slice assignment each
        # (a torch slice assignment costs several microseconds: per layer and request it
        # would cost a GPU step a noticeable share of its time)
        self._index_np, self._guard_np = self._index.numpy(), self._guard.numpy()
        # on a GPU: the host rows filled for the last step (cleared, once its copy to the
        # device is done, before the next fill) and the event that says it is
        self._host_rows, self._copied = 0, None
        # each steered step's failure record, read by the host one step later or when votes
        # are collected (no wait for the device right after the forward): its copy (pinned on
        # a GPU), the event that says the copy is done, and the step's steered requests
        self._failed_host = torch.zeros_like(self.failed, device="cpu")
        if self.device.type == "cuda":
            self._failed_host = self._failed_host.pin_memory()
        self._pending: tuple[Any, list[tuple[int, int, str | None]], int] | None = None
        self.slots: OrderedDict[str, int] = OrderedDict()  # digest -> its bank slot
        for i, block in enumerate(blocks):
            block.register_forward_hook(self._layer_hook(i))
        parent = prefix.rsplit(".", 1)[0]
        self.norm = self.model.get_submodule(f"{parent}.norm")
        self.norm.register_forward_hook(self._norm_hook)
        original = runner._model_forward

        def forward(*args, **kwargs):
            step = self.current = self._plan()
            try:
                if step is not None and self.compiled and (step.reads or step.captures):
                    from vllm.config import CUDAGraphMode
                    from vllm.forward_context import get_forward_context

                    context = get_forward_context()
                    context.skip_compiled = True  # reads are Python: eager
                    # and no full CUDA graph replays the step without them (one is picked for
                    # a step where every request asks for one token: a prompt whose blocks
                    # but its last are in the prefix cache reads its gate in such a step)
                    context.cudagraph_runtime_mode = CUDAGraphMode.NONE
                return original(*args, **kwargs)
            finally:
                self.current = None
                if step is not None and step.rows:
                    self._after(step)

        runner._model_forward = forward

    # -- registration ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(hidden width, number of decoder blocks): what a spec must fit."""
        return int(self.runner.model_config.get_hidden_size()), self.num_layers

    def register(self, spec) -> str:
        """Keep ``spec`` (checked by :class:`SteerSpec` when it was built, against this model
        here: a spec that does not fit is refused before any forward pass sees it). Its
        vectors go into the bank when a step first steers with it."""
        digest = spec.digest()
        if digest in self.specs:
            return digest
        n = self.num_layers
        spec.check_model(*self.shape)
        vectors = {
            l % n: (spec.strength * spec.vectors[i].float()).to(self.device, self.dtype)
            for i, l in enumerate(spec.layers)
        }
        condition = None
        if spec.gate is not None:
            condition = spec.gate.condition()
            condition.vectors.vectors = condition.vectors.vectors.to(self.device)
            condition.vectors.means = condition.vectors.means.to(self.device)
        self.specs[digest] = _Loaded(spec, vectors, condition, _deepest(spec, n))
        return digest

    def _slot(self, digest: str, busy: set[int]) -> int:
        """The bank slot holding ``digest``'s vectors, written there if it is not (in place of
        the least recently used abstainer that this step does not steer with)."""
        slot = self.slots.get(digest)
        if slot is not None:
            self.slots.move_to_end(digest)
            return slot
        if len(self.slots) < self.n_slots:
            slot = len(self.slots) + 1
        else:
            old = next(d for d, s in self.slots.items() if s not in busy)
            slot = self.slots.pop(old)
        self.slots[digest] = slot
        self.bank[:, slot].zero_()
        for layer, vector in self.specs[digest].vectors.items():
            self.bank[layer, slot].copy_(vector)
        return slot

    # -- per forward pass ------------------------------------------------------------------------
    def _plan(self) -> _Step | None:
        """This step's reads, and its adds written into the buffers, from each request's own
        place in the batch (vLLM's query_start_loc and computed-token counts, both on the
        host: no copy from the device)."""
        runner = self.runner
        batch = runner.input_batch
        n_reqs = batch.num_reqs
        asks = []
        if self.decided:  # forget the requests that have left the engine
            for rid in [r for r in self.decided if r not in runner.requests]:
                del self.decided[rid]
        for i, rid in enumerate(batch.req_ids[:n_reqs]):
            state = runner.requests.get(rid)
            params = getattr(state, "sampling_params", None)
            extra = getattr(params, "extra_args", None)
            if extra and (GATE in extra or STEER in extra or CAPTURE in extra):
                if rid in self.decided:  # its gate fired (or not) in an earlier step
                    digest = self.decided[rid]
                    if digest is None:
                        continue
                    extra = {STEER: digest, TAG: extra.get(TAG)}
                asks.append((i, rid, state, extra))
        if not asks:
            return None
        self._host_free()
        step = _Step()
        try:
            self._fill(step, asks)
        except BaseException:  # (nothing a request carries should raise here) no row is left
            self._clear_host(step.rows)  # filled for a later step's tokens to be steered by
            raise
        if step.rows and self._index is not self.index:
            self.index[: step.rows].copy_(self._index[: step.rows], non_blocking=True)
            self.guard[: step.rows].copy_(self._guard[: step.rows], non_blocking=True)
            self._host_rows, self._copied = step.rows, _event(self.device)
        return step if (step.rows or step.reads or step.captures) else None

    def _fill(self, step: _Step, asks: list) -> None:
        """Plan each asking request of this step into ``step``: its reads and captures, and a
        steered request's slots and guard written into the buffers' host side (``step.rows``
        covers every row written)."""
        runner = self.runner
        starts = runner.query_start_loc.np
        computed = runner.input_batch.num_computed_tokens_cpu
        busy = step.busy
        for i, rid, state, ask in asks:
            lo, hi = int(starts[i]), int(starts[i + 1])
            if hi <= lo:
                continue
            first = int(computed[i])  # the position of row lo (rows lo..hi follow it)
            n_prompt = int(state.num_prompt_tokens)
            if CAPTURE in ask:
                try:
                    self._plan_capture(step, ask, first + torch.arange(hi - lo), lo, n_prompt)
                except (KeyError, TypeError, ValueError, ConfigError):  # malformed: skip it,
                    continue  # never the step (its caller finds no activations)
            elif GATE in ask:
                if TAG not in ask:  # a gate read for no one to collect: the answer runs as is
                    continue
                loaded = self.specs.get(str(ask[GATE]))
                last = n_prompt - 1
                if (
                    loaded is None
                    or loaded.condition is None
                    or not first <= last < first + hi - lo
                ):
                    continue
                row = lo + last - first
                gate = loaded.spec.gate
                gate_tag = str(ask[TAG])
                for j, layer in enumerate(gate.layers):
                    layer %= self.num_layers
                    site = "norm" if gate.final_norm and layer == self.num_layers - 1 else layer
                    step.reads.setdefault(site, []).append((gate_tag, loaded, j, row))
                deeper = [l for l in loaded.vectors if l > loaded.deepest]
                if THEN in ask and (first == 0 or not deeper):
                    # steered in this pass once the gate fires: the prompt's rows at the deeper
                    # behaviour layers (every one of its rows is in this pass when it has any);
                    # its vectors take a bank slot only then
                    step.then[gate_tag] = (rid, str(ask[GATE]), deeper, lo, hi)
                    step.rows = max(step.rows, hi)
                else:  # read once: its caller steers a pass of its own if it fires, and a
                    self.decided[rid] = None  # preempted request computed again reads nothing
            else:
                digest = str(ask[STEER])
                loaded = self.specs.get(digest)
                if loaded is None:
                    continue
                slot = self._slot(digest, busy)
                busy.add(slot)
                tag = ask.get(TAG)
                step.steered.append((lo, hi, str(tag) if tag else None))
                step.rows = max(step.rows, hi)  # before the fill: cleared should it fail
                first_generated = lo + max(0, n_prompt - first)  # rows from here are generated
                if loaded.everywhere.size:
                    self._index_np[lo:hi, loaded.everywhere] = slot
                if loaded.generated.size and first_generated < hi:
                    self._index_np[first_generated:hi, loaded.generated] = slot
                self._guard_np[lo:hi] = True

    def _host_free(self) -> None:
        """On a GPU, clear the host rows the last step filled, once their copy to the device is
        done (clearing them right after the forward could race the copy, which need not have
        run yet). On CPU the host side is the device buffer, cleared after each step."""
        if self._host_rows:
            if self._copied is not None:
                self._copied.synchronize()  # long done: the step ran after it
            self._clear_host(self._host_rows)
            self._host_rows, self._copied = 0, None

    def _clear_host(self, n: int) -> None:
        """Zero the host side's first ``n`` rows (on CPU: the buffers themselves)."""
        self._index_np[:n] = 0
        self._guard_np[:n] = False

    def _after(self, step: _Step) -> None:
        """Clear the buffers' rows after a steered step, and keep its failure record for the
        host to read later (:meth:`check_failed`): reading it now would make the host wait for
        the device after every steered step."""
        n = step.rows
        self.check_failed()  # the step before's: its copy is done or nearly
        # without blocking only where an event then says when it is done (CUDA)
        self._failed_host[:n].copy_(self.failed[:n], non_blocking=self.device.type == "cuda")
        self._pending = (_event(self.device), list(step.steered), n)
        self.failed[:n].zero_()
        if self._index is self.index:
            self._clear_host(n)
        else:  # the host side is cleared before its next fill (_host_free)
            self.index[:n].zero_()
            self.guard[:n].zero_()

    def check_failed(self, tags: Collection[str] | None = None) -> None:
        """Record the steered requests of the last steered step that went non-finite (under
        their tags, beside a gate's record where the same request read it: ``THEN``); called
        before the next steered step's record is kept and before votes are collected. With
        ``tags`` (a collection of votes) only when one of them was steered in that step: the
        record then waits for the device, which a poll for other tags need not do."""
        if self._pending is None:
            return
        done, steered, n = self._pending
        if tags is not None and not any(tag in tags for _, _, tag in steered):
            return
        self._pending = None
        if done is not None:
            done.synchronize()
        failed = self._failed_host[:n]
        if not bool(failed.any()):
            return
        for lo, hi, tag in steered:
            bad = failed[lo:hi]
            if tag is not None and bool(bad.any()) and "failed" not in self.votes.get(tag, {}):
                layer = int(bad[bad > 0].min()) - 1
                self.votes.setdefault(tag, {})["failed"] = (
                    f"the steered activations became NaN or infinite at layer {layer}"
                )

    def _plan_capture(self, step: _Step, ask: dict, p: torch.Tensor, lo: int, n_prompt: int):
        """The rows of this step that a capture request pools, at each layer it reads."""
        text, tag = str(ask[CAPTURE]), str(ask[TAG])
        cap = self._captures.get(text)
        if cap is None:
            from workbench.generation.hooks import check_layers

            cap = Capture.from_json(text)
            check_layers(cap.layers, self.num_layers)  # the clients' check, for a raw request
            if len(self._captures) > 256:  # a server's clients may ask for many shapes
                self._captures.clear()
            self._captures[text] = cap
        first, end = cap.positions(n_prompt)
        counted = self._counted.setdefault(tag, set())
        pos = p.tolist()
        fresh = [k for k, q in enumerate(pos) if first <= q < end and q not in counted]
        if not fresh:
            return
        counted.update(pos[k] for k in fresh)
        rows = torch.tensor(fresh, dtype=torch.long) + lo
        rows = rows.to(self.device)
        n = self.num_layers
        for j, layer in enumerate(cap.layers):
            layer %= n
            site = "norm" if cap.final_norm and layer == n - 1 else layer
            step.captures.setdefault(site, []).append((tag, j, len(cap.layers), rows))

    def _capture(self, site, hidden: torch.Tensor) -> None:
        assert self.current is not None
        for tag, j, n_layers, rows in self.current.captures.get(site, ()):
            if tag not in self.captured:
                width = hidden.shape[-1]
                self.captured[tag] = (
                    torch.zeros(n_layers, width, device=hidden.device),
                    torch.zeros(n_layers, dtype=torch.long),
                )
            sums, counts = self.captured[tag]
            sums[j] += hidden[rows].float().sum(0)
            counts[j] += len(rows)

    def _read(self, site, hidden: torch.Tensor) -> None:
        assert self.current is not None
        for tag, loaded, j, row in self.current.reads.get(site, ()):
            cond = loaded.condition
            sim = cond.vectors.similarity_at(j, hidden[row : row + 1])
            thr = cond.thresholds[j]
            vote = bool((sim >= thr) if cond.inclusive else (sim > thr))
            rec = self.votes.setdefault(
                tag,
                {"votes": [None] * len(cond.layers), "similarities": [None] * len(cond.layers)},
            )
            rec["votes"][j] = vote
            rec["similarities"][j] = float(sim)
            if all(v is not None for v in rec["votes"]):
                rec["fired"] = bool(cond.combine(torch.tensor([rec["votes"]]))[0])
                if tag in self.current.then:
                    self._steer_from_here(tag, rec)

    def _steer_from_here(self, tag: str, rec: dict) -> None:
        """A ``THEN`` request's gate has just decided, inside the pass that read it: a fired
        one's prompt rows are steered at the deeper behaviour layers, which this pass has not
        reached yet, and its later steps as a steered request's."""
        assert self.current is not None
        rid, digest, deeper, lo, hi = self.current.then[tag]
        self.decided[rid] = digest if rec["fired"] else None
        if not rec["fired"]:
            return
        rec["steered"] = True
        # a slot no request of this pass steers with (the layers it writes have not run yet)
        slot = self._slot(digest, self.current.busy)
        self.current.busy.add(slot)
        # the buffers the pass reads (their host side was copied in before the pass; _after
        # zeroes both)
        for layer in deeper:
            self.index[lo:hi, layer] = slot
        self.guard[lo:hi] = True
        self.current.steered.append((lo, hi, tag))

    def _layer_hook(self, layer: int):
        def hook(module, args, output):
            tuple_out = isinstance(output, tuple)
            h = output[0] if tuple_out else output
            residual = output[1] if tuple_out and len(output) > 1 else None
            if not torch.compiler.is_compiling():  # eager: reads, and a skip when idle
                step = self.current
                if step is None:
                    return None
                if layer in step.reads or layer in step.captures:
                    # vLLM's decoder layers return (block output, residual): their sum is the
                    # residual stream the workbench's engine reads at this block
                    hidden = h + residual if residual is not None else h
                    if layer in step.reads:
                        self._read(layer, hidden.float())
                    if layer in step.captures:
                        self._capture(layer, hidden)
                if not step.rows:
                    return None
            h, residual = self._steer(layer, h, residual)
            if not tuple_out:
                return h
            return (h, residual, *output[2:]) if len(output) > 1 else (h,)

        return hook

    def _steer(self, layer: int, h: torch.Tensor, residual: torch.Tensor | None):
        """The block's output with each token's vector added (slot 0, zeros, for tokens that
        are not steered here), and the rows of steered requests that became non-finite (an
        extreme strength in a narrow dtype) zeroed from this layer on, so that nothing
        non-finite reaches the key/value blocks (which other requests reuse once freed) or the
        sampler; the first such layer is kept per token. Tensor operations only: compiled as
        they are written."""
        n = h.shape[0]
        h = h + self.bank[layer].index_select(0, self.index[:n, layer])
        finite = torch.isfinite(h).all(-1)
        if residual is not None:
            finite = finite & torch.isfinite(residual).all(-1)
        bad = self.guard[:n] & ~finite
        h = torch.where(bad[:, None], torch.zeros_like(h), h)
        if residual is not None:
            residual = torch.where(bad[:, None], torch.zeros_like(residual), residual)
        seen = self.failed[:n]
        self.failed[:n] = torch.where(bad & (seen == 0), layer + 1, seen)
        return h, residual

    def _norm_hook(self, module, args, output):
        if torch.compiler.is_compiling():  # reads run in eager steps only
            return None
        step = self.current
        if step is not None and ("norm" in step.reads or "norm" in step.captures):
            hidden = output[0] if isinstance(output, tuple) else output
            if "norm" in step.reads:
                self._read("norm", hidden.float())
            if "norm" in step.captures:
                self._capture("norm", hidden)
        return None


def install_at_load() -> None:
    """Make vLLM's model runners build a steering engine's :class:`SteeringState` right after
    loading the model, before vLLM compiles it (and captures CUDA graphs): the hooks and
    buffers are then part of the compiled model. Only engines whose ``worker_extension_cls``
    is :data:`EXTENSION` get them; calling this again changes nothing."""
    import importlib

    for module, name in (
        ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner"),
        ("vllm.v1.worker.cpu_model_runner", "CPUModelRunner"),
    ):
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception:  # another platform's runner, or no vLLM here
            continue
        original = cls.__dict__.get("load_model")
        if original is None or getattr(original, "_workbench", False):
            continue

        def load_model(self, *args, _original=original, **kwargs):
            out = _original(self, *args, **kwargs)
            if (
                self.vllm_config.parallel_config.worker_extension_cls == EXTENSION
                and getattr(self, "_workbench_steering", None) is None
            ):
                self._workbench_steering = SteeringState(self, at_load=True)
            return out

        load_model._workbench = True  # type: ignore[attr-defined]
        cls.load_model = load_model


class SteeringWorkerExtension:
    """Methods vLLM mixes into its worker (``worker_extension_cls``), called through
    ``collective_rpc``; the state lives on the worker as ``_workbench_steering``."""

    def _workbench_state(self) -> SteeringState:
        runner = self.model_runner  # type: ignore[attr-defined]
        state = getattr(runner, "_workbench_steering", None)
        if state is None:  # an eager engine whose runner was loaded before the module
            state = runner._workbench_steering = SteeringState(runner)
        return state

    def workbench_register(self, spec_json: str) -> str:
        """Register an abstainer (``SteerSpec.to_json()``); returns its digest."""
        from workbench.steering.spec import SteerSpec

        return self._workbench_state().register(SteerSpec.from_json(spec_json))

    def workbench_status(self) -> dict[str, Any]:
        """How this worker steers: ``compiled`` (the adds traced into vLLM's compiled model),
        the engine's compilation mode, and ``host_copy`` (the host fills a copy of the buffers
        that is copied in before each step, as on a GPU; on CPU it fills the buffers)."""
        state = self._workbench_state()
        mode = getattr(state.runner.compilation_config, "mode", None)
        return {
            "compiled": state.compiled,
            "compilation_mode": getattr(mode, "name", str(mode)),
            "host_copy": state._index is not state.index,
        }

    def workbench_shape(self) -> tuple[int, int]:
        """(hidden width, number of decoder blocks) of the model this worker runs."""
        return self._workbench_state().shape

    def workbench_registered(self) -> dict[str, str]:
        """digest -> name of every abstainer registered in this worker."""
        return {d: s.spec.name for d, s in self._workbench_state().specs.items()}

    def workbench_captured(self, tags: list[str]) -> dict[str, tuple[list[int], bytes]]:
        """The pooled activations recorded under ``tags`` (and forgets them): per tag its
        shape and float32 bytes (layers x hidden), which cross process boundaries as they are."""
        state = self._workbench_state()
        captured = state.captured
        out = {}
        for t in tags:
            state._counted.pop(t, None)
            if t in captured:
                sums, counts = captured.pop(t)
                pooled = (sums.cpu() / counts.clamp(min=1)[:, None]).contiguous()
                out[t] = (list(pooled.shape), pooled.numpy().tobytes())
        return out

    def workbench_votes(self, tags: list[str]) -> dict[str, dict[str, Any]]:
        """The gate votes recorded under ``tags`` (and forgets them)."""
        state = self._workbench_state()
        state.check_failed(set(tags))  # the last steered step's failures of these tags
        return {t: state.votes.pop(t) for t in tags if t in state.votes}


# vLLM imports this module (the extension class) in each worker before it loads the model, and
# the back end calls install_at_load before it starts an engine; a process that has not imported
# vLLM (``serve``'s command, which only starts the server) does not pay for its import here
if "vllm" in sys.modules and importlib.util.find_spec("vllm") is not None:
    install_at_load()
