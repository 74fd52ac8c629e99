"""Steering and the concept gate inside vLLM's model runner, per request.

vLLM runs every scheduled token of every request in one flattened forward pass. This module is a
worker extension (vLLM's ``worker_extension_cls``): registered abstainers
(:class:`~workbench.steering.spec.SteerSpec`) live in each worker; a request asks for one
through ``SamplingParams.extra_args`` (flat keys, so that an API request's ``vllm_xargs`` can
carry them too):

``{"workbench_gate": DIGEST, "workbench_tag": TAG}``
    read the gate's layers at the prompt's last token (the pass is never steered) and keep the
    votes under ``TAG`` until :meth:`SteeringWorkerExtension.workbench_votes` collects them.
``{"workbench_steer": DIGEST}`` (optionally ``"workbench_tag": TAG``)
    add the abstainer's vectors: ``separate`` mode at every position (the prompt is steered from
    its first token), ``in_pass`` mode at the prompt's positions only at behaviour layers deeper
    than the deepest gate layer and at every generated position everywhere (CAST's order, as
    the workbench's engine does it).

Before every forward the wrapper maps each token to its request (vLLM's ``query_start_loc``,
the positions it passes, each request's prompt length), so who is steered depends only on the
request, never on which others share the batch, how the scheduler chunks a prompt or which
blocks come from the prefix cache. A steered request is steered at every position of its
prompt, so its key/value blocks may be shared only with requests steered the same way: the
client gives it a ``cache_salt`` naming the abstainer and decision (:func:`cache_salt`).

Specs are checked when built (:class:`~workbench.steering.spec.SteerSpec`: shapes, finite
values, enumerations) and against the model when registered, so nothing a request carries can
raise inside the forward pass. Should a steered request's activations still become non-finite,
its rows are zeroed from that layer on (other requests' key/value blocks and answers stay as
they were) and the failure is kept under its tag for the caller to report.

A step with no workbench request costs one dictionary lookup per request and a no-op call per
layer. The hooks are Python forward hooks: they need the eager model (CPU vLLM runs LoRA-enabled
engines eagerly; on GPU the back end sets ``enforce_eager`` for a steering engine) and vLLM's V1
model runner (``VLLM_USE_V2_MODEL_RUNNER=0``, set by the back end and ``serve --steering``); the
extension refuses to install on anything else rather than steer nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

GATE, TAG, STEER = "workbench_gate", "workbench_tag", "workbench_steer"
#: vLLM's ``worker_extension_cls`` for an engine that steers
EXTENSION = "workbench.backends.vllm_steering.SteeringWorkerExtension"


def gate_args(digest: str, tag: str) -> dict[str, Any]:
    """``extra_args`` of a request that only reads the gate of abstainer ``digest``."""
    return {GATE: digest, TAG: tag}


def steer_args(digest: str, fired: bool, tag: str | None = None) -> dict[str, Any] | None:
    """``extra_args`` of a generation steered by ``digest`` (None when its gate did not fire);
    with ``tag`` a failure of the request (non-finite activations) is kept under it."""
    if not fired:
        return None
    return {STEER: digest, TAG: tag} if tag else {STEER: digest}


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


@dataclass
class _Step:
    """What the current forward pass does: token rows to add to at each layer, and reads."""

    add: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    # site (layer index, or "norm") -> [(tag, loaded, gate position j, token row)]
    reads: dict[Any, list[tuple[str, _Loaded, int, int]]] = field(default_factory=dict)
    # each steered request's token rows and its tag (None: the request asked for no report)
    steered: list[tuple[torch.Tensor, str | None]] = field(default_factory=list)


class SteeringState:
    """The worker's abstainers, the hooks on its model, and the gate votes not yet collected."""

    def __init__(self, runner):
        from workbench.generation.hooks import decoder_blocks

        mode = getattr(runner.compilation_config, "mode", None)
        graphs = getattr(runner.compilation_config, "cudagraph_mode", None)
        if (mode is not None and int(mode) != 0) or (
            graphs is not None and str(getattr(graphs, "name", graphs)) != "NONE"
        ):
            raise RuntimeError(
                "steering inside vLLM needs an eager model (enforce_eager=True): this engine is "
                f"compiled or captured in graphs (compilation mode {mode}, cudagraph mode {graphs})"
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
        self.device = next(self.model.parameters()).device
        self.specs: dict[str, _Loaded] = {}
        # tag -> a gate's votes, or {"failed": why} for a steered request that went non-finite
        self.votes: dict[str, dict[str, Any]] = {}
        self.current: _Step | None = None
        prefix, blocks = decoder_blocks(self.model)
        self.num_layers = len(blocks)
        for i, block in enumerate(blocks):
            block.register_forward_hook(self._layer_hook(i))
        parent = prefix.rsplit(".", 1)[0]
        self.norm = self.model.get_submodule(f"{parent}.norm")
        self.norm.register_forward_hook(self._norm_hook)
        original = runner._model_forward

        def forward(*args, **kwargs):
            self.current = self._plan(kwargs.get("positions"))
            try:
                return original(*args, **kwargs)
            finally:
                self.current = None

        runner._model_forward = forward

    # -- registration ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(hidden width, number of decoder blocks): what a spec must fit."""
        return int(self.runner.model_config.get_hidden_size()), self.num_layers

    def register(self, spec) -> str:
        """Keep ``spec`` (checked by :class:`SteerSpec` when it was built, against this model
        here: a spec that does not fit is refused before any forward pass sees it)."""
        digest = spec.digest()
        if digest in self.specs:
            return digest
        n = self.num_layers
        spec.check_model(*self.shape)
        dtype = next(self.model.parameters()).dtype
        vectors = {
            l % n: (spec.strength * spec.vectors[i].float()).to(self.device, dtype)
            for i, l in enumerate(spec.layers)
        }
        condition = None
        deepest = -1
        if spec.gate is not None:
            condition = spec.gate.condition()
            condition.vectors.vectors = condition.vectors.vectors.to(self.device)
            condition.vectors.means = condition.vectors.means.to(self.device)
            deepest = max(l % n for l in spec.gate.layers)
            if spec.gate.final_norm and n - 1 in [l % n for l in spec.gate.layers]:
                deepest = n  # the final norm runs after the last block
        self.specs[digest] = _Loaded(spec, vectors, condition, deepest)
        return digest

    # -- per forward pass ------------------------------------------------------------------------
    def _plan(self, positions) -> _Step | None:
        runner = self.runner
        batch = runner.input_batch
        n_reqs = batch.num_reqs
        asks = []
        for i, rid in enumerate(batch.req_ids[:n_reqs]):
            state = runner.requests.get(rid)
            params = getattr(state, "sampling_params", None)
            extra = getattr(params, "extra_args", None)
            if extra and (GATE in extra or STEER in extra):
                asks.append((i, state, extra))
        if not asks or positions is None:
            return None
        starts = runner.query_start_loc.np
        pos = positions.detach().to("cpu")
        step = _Step()
        adds: dict[tuple[str, int], list[torch.Tensor]] = {}
        for i, state, ask in asks:
            lo, hi = int(starts[i]), int(starts[i + 1])
            if hi <= lo:
                continue
            p = pos[lo:hi]
            n_prompt = int(state.num_prompt_tokens)
            if GATE in ask:
                loaded = self.specs.get(str(ask[GATE]))
                last = n_prompt - 1
                where = (p == last).nonzero()
                if loaded is None or loaded.condition is None or len(where) == 0:
                    continue
                row = lo + int(where[0, 0])
                gate = loaded.spec.gate
                for j, layer in enumerate(gate.layers):
                    layer %= self.num_layers
                    site = "norm" if gate.final_norm and layer == self.num_layers - 1 else layer
                    step.reads.setdefault(site, []).append((str(ask[TAG]), loaded, j, row))
            else:
                digest = str(ask[STEER])
                loaded = self.specs.get(digest)
                if loaded is None:
                    continue
                rows = torch.arange(lo, hi)
                tag = ask.get(TAG)
                step.steered.append((rows.to(self.device), str(tag) if tag else None))
                generated = rows[p >= n_prompt]
                for layer in loaded.vectors:
                    if loaded.spec.mode == "in_pass" and layer <= loaded.deepest:
                        chosen = generated  # the decision is not known yet in the prompt's pass
                    else:
                        chosen = rows
                    if len(chosen):
                        adds.setdefault((digest, layer), []).append(chosen)
        for (digest, layer), parts in adds.items():
            idx = torch.cat(parts).to(self.device)
            step.add.setdefault(layer, []).append((idx, self.specs[digest].vectors[layer]))
        return step if (step.add or step.reads) else None

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

    def _layer_hook(self, layer: int):
        def hook(module, args, output):
            step = self.current
            if step is None:
                return None
            tuple_out = isinstance(output, tuple)
            if layer in step.reads:
                # vLLM's decoder layers return (block output, residual): their sum is the
                # residual stream the workbench's engine reads at this block
                hidden = (
                    output[0] + output[1]
                    if tuple_out and len(output) > 1 and output[1] is not None
                    else (output[0] if tuple_out else output)
                )
                self._read(layer, hidden.float())
            adds = step.add.get(layer)
            if not adds and not step.steered:
                return None
            h = output[0] if tuple_out else output
            residual = output[1] if tuple_out and len(output) > 1 else None
            if adds:
                h = h.clone()
                for idx, delta in adds:
                    h[idx] += delta
            bad = self._non_finite(layer, h, residual, step)
            if bad is None and not adds:
                return None
            if bad is not None:
                h = h if adds else h.clone()
                h[bad] = 0
                if residual is not None:
                    residual = residual.clone()
                    residual[bad] = 0
            if not tuple_out:
                return h
            return (h, residual, *output[2:]) if len(output) > 1 else (h,)

        return hook

    def _non_finite(self, layer: int, h: torch.Tensor, residual, step: _Step):
        """The token rows of steered requests whose activations are no longer finite (an
        extreme strength in a narrow dtype), or None. The caller zeroes them from this layer
        on, so nothing non-finite reaches the key/value blocks (which other requests reuse
        once freed) or the sampler; each such request's failure is kept under its tag. One
        check per layer for all steered rows together."""
        rows = torch.cat([r for r, _ in step.steered]) if len(step.steered) > 1 else None
        rows = rows if rows is not None else step.steered[0][0] if step.steered else None
        if rows is None:
            return None
        ok = torch.isfinite(h[rows]).all()
        if residual is not None:
            ok = ok & torch.isfinite(residual[rows]).all()
        if bool(ok):
            return None
        bad = []
        for r, tag in step.steered:
            fine = torch.isfinite(h[r]).all() and (
                residual is None or torch.isfinite(residual[r]).all()
            )
            if bool(fine):
                continue
            bad.append(r)
            if tag is not None and "failed" not in self.votes.get(tag, {}):
                self.votes[tag] = {
                    "failed": f"the steered activations became NaN or infinite at layer {layer}"
                }
        return torch.cat(bad)

    def _norm_hook(self, module, args, output):
        step = self.current
        if step is not None and "norm" in step.reads:
            hidden = output[0] if isinstance(output, tuple) else output
            self._read("norm", hidden.float())
        return None


class SteeringWorkerExtension:
    """Methods vLLM mixes into its worker (``worker_extension_cls``), called through
    ``collective_rpc``; the state lives on the worker as ``_workbench_steering``."""

    def _workbench_state(self) -> SteeringState:
        state = getattr(self, "_workbench_steering", None)
        if state is None:
            state = SteeringState(self.model_runner)  # type: ignore[attr-defined]
            self._workbench_steering = state
        return state

    def workbench_register(self, spec_json: str) -> str:
        """Register an abstainer (``SteerSpec.to_json()``); returns its digest."""
        from workbench.steering.spec import SteerSpec

        return self._workbench_state().register(SteerSpec.from_json(spec_json))

    def workbench_shape(self) -> tuple[int, int]:
        """(hidden width, number of decoder blocks) of the model this worker runs."""
        return self._workbench_state().shape

    def workbench_registered(self) -> dict[str, str]:
        """digest -> name of every abstainer registered in this worker."""
        return {d: s.spec.name for d, s in self._workbench_state().specs.items()}

    def workbench_votes(self, tags: list[str]) -> dict[str, dict[str, Any]]:
        """The gate votes recorded under ``tags`` (and forgets them)."""
        votes = self._workbench_state().votes
        return {t: votes.pop(t) for t in tags if t in votes}
