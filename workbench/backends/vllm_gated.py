"""Conditional steering with the gate read in the answer's own prefill (vLLM, in process).

A steered generation needs its gate's decision before its prompt is steered. Reading the gate
in a pass of its own costs a second prefill of every prompt's uncached tail. Here every gated
request starts as the unsteered answer it would be if its gate stayed shut, and reads its gate
in that prefill (``workbench_gate`` on the answer request itself). After each engine step the
decisions recorded so far are collected; the requests of a prompt whose gate fired are aborted
(their first token was sampled unsteered) and sent again, steered. A prompt whose gate stays
shut costs nothing beyond its answer; one that fires costs what the separate pass cost it.
An ``in_pass`` abstainer (CAST's order) costs nothing more either way: its request is steered
in its own pass once its gate fires (``then``; :mod:`~workbench.backends.vllm_steering`), and
is sent again only where the prompt was split over several steps and some of its positions
needed steering before the decision was read.
With vLLM's engine core in this process (``VLLMOptions.in_process``, a steering engine's
default) they start again at the very next step; an engine core in a process of its own has
run a few steps further by the time the decisions are collected. The steering server does the
same per request (:class:`~workbench.backends.steer_server.SteeringMiddleware`): it holds an
answer back until its gate's decision is in, and sends a fired one again steered.

The answers equal the two-pass way's token for token: an unfired answer is that same unsteered
request, a fired one the same steered request, and the decision is read at the same prompt
token with no steering in its pass.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PrefillGate:
    """A generation's gates: per prompt the digest of the abstainer whose gate its answer
    reads (None: the prompt runs as given) and ``steer(i)``, the ``extra_args`` and cache salt
    of prompt ``i``'s steered answer once its gate fired. :func:`run` fills ``records``
    (prompt index -> the gate's record: votes, similarities, fired)."""

    digests: list[str | None]
    steer: Callable[[int], tuple[dict[str, Any] | None, str | None]]
    records: dict[int, dict] = field(default_factory=dict)
    #: prompts whose answer is steered in its own pass once the gate fires (``in_pass``
    #: abstainers), with the cache salt that answer needs (None: its prompt is never steered)
    then: dict[int, str | None] = field(default_factory=dict)


def run(
    llm,
    requests: list[dict],
    params: list,
    prompt_of: list[int],
    gate: PrefillGate,
    *,
    lora=None,
    progress: bool = False,
) -> list:
    """Run ``requests`` (request ``r`` answers prompt ``prompt_of[r]``) on ``llm``, vLLM's
    ``LLM``, each gated one decided in its own prefill; returns one final ``RequestOutput`` per
    request, in order."""
    from vllm.sampling_params import RequestOutputKind

    from workbench.backends.vllm_steering import gate_args
    from workbench.progress import tqdm

    engine = llm.llm_engine
    run_id = uuid.uuid4().hex[:12]
    owner: dict[str, int] = {}  # external request id -> the request index it answers
    live: dict[int, str] = {}  # request index -> its running (unsteered, gated) request id

    def add(r: int, request: dict, p, suffix: str) -> str:
        p.output_kind = RequestOutputKind.FINAL_ONLY
        rid = f"wb-{run_id}-{r}{suffix}"
        engine.add_request(rid, request, p, lora_request=lora)
        owner[rid] = r
        return rid

    tags: list[str | None] = []
    for r, (request, p) in enumerate(zip(requests, params)):
        i = prompt_of[r]
        digest = gate.digests[i]
        tag = None if digest is None else f"gate-{uuid.uuid4().hex}"
        tags.append(tag)
        if digest is not None and tag is not None:
            p = p.clone()
            p.extra_args = gate_args(digest, tag, then_steer=i in gate.then)
            if gate.then.get(i):
                request = {**request, "cache_salt": gate.then[i]}
        rid = add(r, request, p, "")
        if digest is not None:
            live[r] = rid
    pending = {t: r for r, t in enumerate(tags) if t is not None}
    in_pass: dict[int, str] = {}  # request index -> the tag it was steered under in its pass
    stale: list[str] = []  # tags of aborted requests whose reads may still be recorded
    outs: list = [None] * len(requests)
    bar = tqdm(total=len(requests), desc="generating", disable=not progress, leave=False)
    try:
        while engine.has_unfinished_requests():
            for out in engine.step():
                who = owner.get(out.request_id)
                if who is not None and out.finished:
                    outs[who] = out
                    bar.update(1)
            if not pending:
                continue
            got = llm.collective_rpc("workbench_votes", args=(list(pending),))[0]
            for tag, record in got.items():
                r = pending.pop(tag)
                if record.pop("steered", False):
                    in_pass[r] = tag  # steered in its own pass: nothing to send again
                gate.records.setdefault(prompt_of[r], record)
            for r in [r for r in live if prompt_of[r] in gate.records]:
                i = prompt_of[r]
                if i in gate.then and tags[r] in pending:  # its own read (and pass) to come
                    continue
                rid = live.pop(r)
                if not gate.records[i].get("fired") or r in in_pass:
                    continue
                if outs[r] is None:
                    engine.abort_request([rid])
                    tag = tags[r]
                    if tag in pending:  # aborted before its read was collected
                        del pending[tag]
                        stale.append(tag)
                else:  # finished on its first token, unsteered: answered again below
                    outs[r] = None
                    bar.update(-1)
                del owner[rid]
                extra, salt = gate.steer(i)
                p = params[r].clone()
                p.extra_args = extra
                add(r, {**requests[r], "cache_salt": salt} if salt else requests[r], p, "-steered")
    finally:
        bar.close()
        if engine.has_unfinished_requests():  # interrupted: leave the engine idle
            engine.abort_request(list(owner))
    if stale:  # forget what the aborted requests read
        llm.collective_rpc("workbench_votes", args=(stale,))
    if in_pass:  # a request steered in its own pass that went non-finite later: its record
        failed = llm.collective_rpc("workbench_votes", args=(list(in_pass.values()),))[0]
        for r, tag in in_pass.items():
            if "failed" in failed.get(tag, {}):
                gate.records[prompt_of[r]]["failed"] = failed[tag]["failed"]
    missing = [prompt_of[r] for r in pending.values()]
    if missing:
        raise RuntimeError(f"vLLM's gate recorded no decision for prompt {missing[0]}")
    return outs
