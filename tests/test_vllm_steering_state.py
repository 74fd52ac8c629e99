"""The worker's steering state on a stand-in of vLLM's V1 model runner: which rows of a
flattened batch get which abstainer's vectors at which layers, the gate read in the pass that
steers the rest of its prompt (``in_pass``), the bank's slots reused, a non-finite request
zeroed alone, the buffers cleared after every pass. No vLLM: the runner holds the few fields
the state reads (``tests/test_vllm_steering.py`` runs the same code inside vLLM)."""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from workbench.backends import vllm_steering as vs
from workbench.backends.vllm_steering import CAPTURE, GATE, STEER, TAG, Capture, SteeringState
from workbench.steering.spec import GateSpec, SteerSpec

WIDTH, LAYERS = 8, 4


class Block(torch.nn.Module):
    """A decoder layer as vLLM writes them: (block output, residual) in, the same out."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, h, residual):
        r = h if residual is None else h + residual
        return torch.tanh(self.lin(r)), r


class Tiny(torch.nn.Module):
    """Tokens flattened over requests, one row each; rows never mix (no attention), so each
    request's rows depend on its own steering only."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.model.norm = torch.nn.LayerNorm(WIDTH)

    def forward(self, x, adds=None):
        """``adds[layer]``: what the reference adds to each row's block output there."""
        h, r = x, None
        for i, block in enumerate(self.model.layers):
            h, r = block(h, r)
            if adds is not None and i in adds:
                h = h + adds[i]
        return self.model.norm(h + r)


class Runner:
    """The fields of vLLM's GPU/CPU model runner that the steering state reads."""

    compilation_config = SimpleNamespace(mode=0, cudagraph_mode=None)
    model_config = SimpleNamespace(get_hidden_size=lambda: WIDTH)

    def __init__(self, seqs: int = 8):
        self.model = Tiny()
        self.max_num_tokens = 64
        self.scheduler_config = SimpleNamespace(max_num_batched_tokens=64, max_num_seqs=seqs)
        self.requests: dict[str, SimpleNamespace] = {}
        self.input_batch = SimpleNamespace(
            num_reqs=0, req_ids=[], num_computed_tokens_cpu=np.zeros(0)
        )
        self.query_start_loc = SimpleNamespace(np=np.zeros(1, np.int32))

    def get_model(self):
        return self.model

    def _model_forward(self, x):
        return self.model(x)

    def add(self, rid: str, n_prompt: int, extra: dict | None = None) -> None:
        params = SimpleNamespace(extra_args=extra)
        self.requests[rid] = SimpleNamespace(num_prompt_tokens=n_prompt, sampling_params=params)

    def step(self, scheduled: list[tuple[str, int, int]], x: torch.Tensor) -> torch.Tensor:
        """One forward pass over ``scheduled`` = (request, tokens computed before, tokens now)."""
        self.input_batch.num_reqs = len(scheduled)
        self.input_batch.req_ids = [rid for rid, _, _ in scheduled]
        self.input_batch.num_computed_tokens_cpu = np.array([c for _, c, _ in scheduled])
        self.query_start_loc.np = np.cumsum([0] + [n for _, _, n in scheduled]).astype(np.int32)
        with torch.inference_mode():
            return self._model_forward(x)


def _spec(name, layers, strength=1.0, gate=None, mode="separate", seed=0) -> SteerSpec:
    g = torch.Generator().manual_seed(seed)
    return SteerSpec(
        name, layers, torch.randn(len(layers), WIDTH, generator=g), strength, gate, mode
    )


def _gate(layers, fires: bool) -> GateSpec:
    """A gate whose every vote is yes (cosine >= -2) or no (cosine >= 2)."""
    g = torch.Generator().manual_seed(1)
    n = len(layers)
    t = -2.0 if fires else 2.0
    return GateSpec(
        layers,
        torch.randn(n, WIDTH, generator=g),
        torch.zeros(n, WIDTH),
        (t,) * n,
        "all",
        True,
    )


def _adds(n: int, parts: list[tuple[SteerSpec, int, int, tuple[int, ...] | None]]) -> dict:
    """Reference adds: each (spec, rows lo, hi, layers or None for all of the spec's)."""
    adds: dict[int, torch.Tensor] = {}
    for spec, lo, hi, only in parts:
        for i, layer in enumerate(spec.layers):
            if only is not None and layer not in only:
                continue
            a = adds.setdefault(layer, torch.zeros(n, WIDTH))
            a[lo:hi] += spec.strength * spec.vectors[i]
    return adds


def _idle(state: SteeringState) -> bool:
    return not (state.index.any() or state.guard.any() or state.failed.any())


@pytest.fixture
def runner():
    return Runner()


def test_a_mixed_batch_steers_each_request_by_its_own_place(runner):
    state = SteeringState(runner)
    sep = _spec("sep", (1, 2))
    late = _spec("late", (0, 3), gate=_gate((1,), True), mode="in_pass", seed=2)
    d_sep, d_late = state.register(sep), state.register(late)
    runner.add("plain", 5)
    runner.add("a", 4, {STEER: d_sep})
    runner.add("b", 3, {STEER: d_late, TAG: "b"})
    x = torch.randn(5 + 4 + 4, WIDTH)
    # "plain" and "a" prefill; "b" prefills its last prompt token and one generated token
    # (computed 2 of 3): in_pass steers its prompt at layers deeper than its gate only
    got = runner.step([("plain", 0, 5), ("a", 0, 4), ("b", 2, 2)], x[:11])
    want = runner.model(
        x[:11], _adds(11, [(sep, 5, 9, None), (late, 9, 10, (3,)), (late, 10, 11, None)])
    )
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert _idle(state)
    # the unsteered request as in the same batch with nothing steered (the same batch shape:
    # a matrix product's last bits may depend on how many rows it multiplies)
    assert torch.equal(got[:5], runner.model(x[:11])[:5])


def test_an_in_pass_gate_steers_the_rest_of_its_own_pass_and_its_answer(runner):
    state = SteeringState(runner)
    spec = _spec("cast", (0, 3), gate=_gate((1,), True), mode="in_pass")
    digest = state.register(spec)
    runner.add("q", 6, vs.gate_args(digest, "t", then_steer=True))
    runner.add("other", 2)
    x = torch.randn(8, WIDTH)
    got = runner.step([("q", 0, 6), ("other", 0, 2)], x)
    # the gate (layer 1) fired at the prompt's last token; layer 3, deeper, is steered in the
    # same pass for the prompt's rows; layer 0 ran before the decision
    want = runner.model(x, _adds(8, [(spec, 0, 6, (3,))]))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert state.votes["t"]["fired"] is True and state.votes["t"]["steered"] is True
    assert state.decided == {"q": digest}
    # its generated tokens are steered at every behaviour layer
    y = torch.randn(2, WIDTH)
    got = runner.step([("q", 6, 1), ("other", 2, 1)], y)
    torch.testing.assert_close(got, runner.model(y, _adds(2, [(spec, 0, 1, None)])))
    assert _idle(state)
    del runner.requests["q"]  # finished: its decision is forgotten at the next step
    runner.step([("other", 3, 1)], y[1:])
    assert state.decided == {}


def test_a_shut_gate_leaves_the_request_unsteered_and_later_steps_untouched(runner):
    state = SteeringState(runner)
    spec = _spec("cast", (0, 3), gate=_gate((1,), False), mode="in_pass")
    digest = state.register(spec)
    runner.add("q", 4, vs.gate_args(digest, "t", then_steer=True))
    x = torch.randn(4, WIDTH)
    torch.testing.assert_close(runner.step([("q", 0, 4)], x), runner.model(x), rtol=0, atol=0)
    assert state.votes["t"]["fired"] is False and "steered" not in state.votes["t"]
    assert state.decided == {"q": None}
    assert state._plan() is None  # nothing left to do for it: the step skips the hooks
    assert _idle(state)


def test_a_prompt_begun_in_an_earlier_step_is_not_steered_in_the_gates_pass(runner):
    """Its rows at the deeper layers from the earlier step were computed unsteered: the
    gate is read, and the caller sends it again steered."""
    state = SteeringState(runner)
    spec = _spec("cast", (0, 3), gate=_gate((1,), True), mode="in_pass")
    digest = state.register(spec)
    runner.add("q", 6, vs.gate_args(digest, "t", then_steer=True))
    x = torch.randn(6, WIDTH)
    runner.step([("q", 0, 4)], x[:4])
    assert "t" not in state.votes
    got = runner.step([("q", 4, 2)], x[4:])
    torch.testing.assert_close(got, runner.model(x[4:]), rtol=0, atol=0)
    assert state.votes["t"]["fired"] is True and "steered" not in state.votes["t"]
    assert state.decided == {"q": None}  # read once: nothing more for this request to do


def test_abstainers_beyond_the_banks_slots_are_swapped_in_and_steer_correctly(monkeypatch):
    monkeypatch.setattr(vs, "BANK_SLOTS", 2)
    runner = Runner(seqs=2)
    state = SteeringState(runner)
    specs = [_spec(f"s{i}", (i % LAYERS, (i + 2) % LAYERS), seed=i) for i in range(4)]
    digests = [state.register(s) for s in specs]
    for i, d in enumerate(digests):
        runner.add(f"r{i}", 3, {STEER: d})
    x = torch.randn(6, WIDTH)
    for pair in [(0, 1), (2, 3), (1, 2), (3, 0), (0, 3)]:
        got = runner.step([(f"r{i}", 0, 3) for i in pair], x)
        want = runner.model(
            x, _adds(6, [(specs[i], 3 * j, 3 * j + 3, None) for j, i in enumerate(pair)])
        )
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert len(state.slots) == 2
    assert _idle(state)


def test_a_request_steered_to_infinity_is_zeroed_alone_and_reported(runner):
    state = SteeringState(runner)
    spec = SteerSpec("huge", (0, 1), torch.ones(2, WIDTH), 3e38)
    digest = state.register(spec)
    runner.add("bad", 2, {STEER: digest, TAG: "bad"})
    runner.add("fine", 2)
    runner.add("wild", 1)  # unsteered, non-finite of its own: not the steering's to touch
    x = torch.cat([torch.randn(4, WIDTH), torch.full((1, WIDTH), float("inf"))])
    got = runner.step([("fine", 0, 2), ("bad", 0, 2), ("wild", 0, 1)], x)
    torch.testing.assert_close(got[:2], runner.model(x)[:2], rtol=0, atol=0)
    assert torch.isfinite(got[:4]).all()
    wild = runner.model(x[4:])
    assert not torch.isfinite(wild).all()
    torch.testing.assert_close(got[4:], wild, rtol=0, atol=0, equal_nan=True)
    # the record is read later (the host does not wait for the device after the pass): when
    # the votes are collected or at the next steered step
    assert "bad" not in state.votes
    state.check_failed()
    # 3e38 added after blocks 0 and 1: the residual overflows entering block 2
    assert state.votes["bad"]["failed"].endswith("at layer 2")
    assert _idle(state)


def test_a_failure_is_recorded_at_the_next_steered_step_under_its_own_request(runner):
    """The record kept after a steered step is read before the next one's is kept: the next
    step's rows (other requests in the same places) neither hide it nor take it."""
    state = SteeringState(runner)
    huge = state.register(SteerSpec("huge", (0, 1), torch.ones(2, WIDTH), 3e38))
    sane = state.register(_spec("sane", (1, 2)))
    runner.add("bad", 2, {STEER: huge, TAG: "bad"})
    runner.step([("bad", 0, 2)], torch.randn(2, WIDTH))
    del runner.requests["bad"]
    runner.add("next", 2, {STEER: sane, TAG: "next"})
    got = runner.step([("next", 0, 2)], torch.randn(2, WIDTH))
    assert torch.isfinite(got).all()
    assert state.votes["bad"]["failed"].endswith("at layer 2")
    state.check_failed()
    assert "next" not in state.votes and _idle(state)


def test_a_gate_takes_a_bank_slot_only_when_it_fires(monkeypatch):
    monkeypatch.setattr(vs, "BANK_SLOTS", 2)
    runner = Runner(seqs=2)
    state = SteeringState(runner)
    s0, s1 = _spec("s0", (0, 2), seed=3), _spec("s1", (1, 3), seed=4)
    fires = _spec("fires", (0, 3), gate=_gate((1,), True), mode="in_pass", seed=5)
    shut = _spec("shut", (0, 3), gate=_gate((1,), False), mode="in_pass", seed=6)
    d0, d1, df, ds = (state.register(s) for s in (s0, s1, fires, shut))
    runner.add("r0", 3, {STEER: d0})
    runner.add("r1", 3, {STEER: d1})
    runner.add("f", 3, vs.gate_args(df, "f", then_steer=True))
    runner.add("s", 3, vs.gate_args(ds, "s", then_steer=True))
    x = torch.randn(6, WIDTH)
    runner.step([("r0", 0, 3), ("r1", 0, 3)], x)
    # the bank is full: the gate that fires takes the slot of s1, which this pass does not use
    got = runner.step([("f", 0, 3), ("r0", 0, 3)], x)
    want = runner.model(x, _adds(6, [(fires, 0, 3, (3,)), (s0, 3, 6, None)]))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert set(state.slots) == {d0, df}
    # a shut gate takes none: s1 comes back in place of s0, the fired abstainer stays
    got = runner.step([("s", 0, 3), ("r1", 0, 3)], x)
    torch.testing.assert_close(got, runner.model(x, _adds(6, [(s1, 3, 6, None)])), rtol=0, atol=0)
    assert set(state.slots) == {df, d1}
    assert _idle(state)


def test_a_votes_poll_for_other_tags_leaves_a_failure_for_its_own(runner):
    """Collecting other requests' votes does not read (on a GPU: wait for) the last steered
    step's failure record, and loses nothing: the failed request's own poll gets it."""
    state = SteeringState(runner)
    worker = vs.SteeringWorkerExtension()
    worker.model_runner = SimpleNamespace(_workbench_steering=state)  # type: ignore[attr-defined]
    votes = worker.workbench_votes
    huge = state.register(SteerSpec("huge", (0, 1), torch.ones(2, WIDTH), 3e38))
    runner.add("bad", 2, {STEER: huge, TAG: "bad"})
    runner.step([("bad", 0, 2)], torch.randn(2, WIDTH))
    assert votes(["other"]) == {}
    assert state._pending is not None  # still kept for its own tag
    got = votes(["other", "bad"])
    assert got["bad"]["failed"].endswith("at layer 2") and state._pending is None
    # skipped by a poll, then read by the next steered step: still the failed request's
    runner.add("bad2", 2, {STEER: huge, TAG: "bad2"})
    runner.step([("bad2", 0, 2)], torch.randn(2, WIDTH))
    assert votes(["other"]) == {}
    sane = state.register(_spec("sane", (1, 2)))
    runner.add("next", 2, {STEER: sane, TAG: "next"})
    runner.step([("next", 0, 2)], torch.randn(2, WIDTH))
    got = votes(["next", "bad2"])
    assert set(got) == {"bad2"} and got["bad2"]["failed"].endswith("at layer 2")


def test_a_plan_that_fails_part_way_leaves_no_row_steered(runner, monkeypatch):
    """Should planning raise after a steered request's rows were filled (nothing a request
    carries is meant to make it), the rows are cleared: a later step's tokens in those places
    are not steered by them."""
    state = SteeringState(runner)
    digest = state.register(_spec("s", (0, 2)))
    runner.add("steered", 3, {STEER: digest})
    runner.add("capture", 2, vs.capture_args(vs.Capture((1,)), "c"))

    def broken(*args, **kwargs):
        raise RuntimeError("a capture that cannot be planned")

    monkeypatch.setattr(state, "_plan_capture", broken)
    x = torch.randn(5, WIDTH)
    with pytest.raises(RuntimeError, match="cannot be planned"):
        runner.step([("steered", 0, 3), ("capture", 0, 2)], x)
    assert _idle(state)
    # the next step puts an unsteered request where the steered one was, and steers another
    # after it: only the other's rows get vectors
    spec = _spec("t", (1, 3), seed=2)
    other = state.register(spec)
    runner.add("plain", 3)
    runner.add("next", 2, {STEER: other})
    got = runner.step([("plain", 0, 3), ("next", 0, 2)], x)
    torch.testing.assert_close(got, runner.model(x, _adds(5, [(spec, 3, 5, None)])), rtol=0, atol=0)


@pytest.mark.parametrize(
    "bad",
    [
        {CAPTURE: "x", TAG: "c"},  # not JSON
        {CAPTURE: Capture((1,)).to_json()},  # no tag to keep it under
        {
            CAPTURE: json.dumps({"layers": [1], "pooling": "mean", "tail": "a", "final_norm": 0}),
            TAG: "c",
        },
        {CAPTURE: Capture((40,)).to_json(), TAG: "c"},  # beyond the model's blocks
        {CAPTURE: json.dumps([1, 2]), TAG: "c"},
        {GATE: "DIGEST"},  # a gate's read with no tag to collect it under
    ],
)
def test_a_malformed_request_is_skipped_never_the_step(runner, bad):
    """What a request carries cannot fail a step: the malformed one runs unsteered and
    unread, the requests beside it as they would alone."""
    state = SteeringState(runner)
    sep = _spec("sep", (1, 2))
    gated = _spec("g", (2,), gate=_gate((1,), True))
    d_sep, d_gate = state.register(sep), state.register(gated)
    bad = {k: (d_gate if v == "DIGEST" else v) for k, v in bad.items()}
    runner.add("bad", 4, bad)
    runner.add("a", 3, {STEER: d_sep})
    runner.add("cap", 2, vs.capture_args(Capture((0, 3), "mean"), "ok"))
    x = torch.randn(9, WIDTH)
    got = runner.step([("bad", 0, 4), ("a", 0, 3), ("cap", 0, 2)], x)
    torch.testing.assert_close(got, runner.model(x, _adds(9, [(sep, 4, 7, None)])), rtol=0, atol=0)
    assert set(state.captured) == {"ok"} and state.votes == {}
    assert _idle(state)


def test_a_step_that_reads_runs_without_cuda_graphs(monkeypatch):
    """On a compiled engine a step that reads a gate or captures runs eagerly, and no CUDA
    graph replays it (a full graph runs without the Python that reads: a step where every
    request asks for one token, as a prompt mostly in the prefix cache does); other steps
    keep both."""
    ctx = SimpleNamespace(skip_compiled=False, cudagraph_runtime_mode="FULL")
    fake = {
        "vllm": types.ModuleType("vllm"),
        "vllm.config": types.ModuleType("vllm.config"),
        "vllm.forward_context": types.ModuleType("vllm.forward_context"),
    }
    fake["vllm.config"].CUDAGraphMode = SimpleNamespace(NONE="NONE", FULL="FULL")  # type: ignore[attr-defined]
    fake["vllm.forward_context"].get_forward_context = lambda: ctx  # type: ignore[attr-defined]
    for name, module in fake.items():
        monkeypatch.setitem(sys.modules, name, module)
    runner = Runner()
    runner.compilation_config = SimpleNamespace(mode=3, cudagraph_mode="FULL_AND_PIECEWISE")
    state = SteeringState(runner, at_load=True)
    assert state.compiled
    spec = _spec("g", (2,), gate=_gate((1,), True))
    digest = state.register(spec)
    runner.add("q", 3, vs.gate_args(digest, "t"))
    runner.step([("q", 2, 1)], torch.randn(1, WIDTH))  # its prompt's last token alone
    assert state.votes["t"]["fired"] is True
    assert ctx.skip_compiled is True and ctx.cudagraph_runtime_mode == "NONE"
    ctx.skip_compiled, ctx.cudagraph_runtime_mode = False, "FULL"
    runner.add("s", 2, {STEER: digest})
    runner.step([("s", 2, 1)], torch.randn(1, WIDTH))  # steered, nothing read
    assert ctx.skip_compiled is False and ctx.cudagraph_runtime_mode == "FULL"


def test_a_capture_preempted_and_computed_again_counts_each_position_once(runner):
    """vLLM computes a preempted request again from its first uncached token: the positions
    its record already has are not pooled twice."""
    state = SteeringState(runner)
    cap = Capture((0, 3), "mean")
    runner.add("c", 4, vs.capture_args(cap, "again"))
    runner.add("ref", 4, vs.capture_args(cap, "once"))
    x = torch.randn(4, WIDTH)
    runner.step([("c", 0, 2)], x[:2])  # the first chunk, then preempted
    runner.step([("c", 0, 4)], x)  # computed again from the start
    runner.step([("ref", 0, 4)], x)
    (sums, counts), (ref_sums, ref_counts) = state.captured["again"], state.captured["once"]
    assert counts.tolist() == ref_counts.tolist() == [4, 4]
    torch.testing.assert_close(sums, ref_sums)


def test_a_gate_read_for_its_callers_own_pass_is_read_once(runner):
    """A separate abstainer's gate is read once; preempted and computed again, its request
    records no second set of votes that nobody would collect."""
    state = SteeringState(runner)
    digest = state.register(_spec("g", (2,), gate=_gate((1,), True)))
    runner.add("q", 3, vs.gate_args(digest, "t"))
    x = torch.randn(3, WIDTH)
    runner.step([("q", 0, 3)], x)
    assert state.votes.pop("t")["fired"] is True  # collected
    torch.testing.assert_close(runner.step([("q", 0, 3)], x), runner.model(x), rtol=0, atol=0)
    assert state.votes == {} and _idle(state)
    del runner.requests["q"]
    runner.add("other", 2)
    runner.step([("other", 0, 2)], x[:2])
    assert state.decided == {}  # forgotten once it left
