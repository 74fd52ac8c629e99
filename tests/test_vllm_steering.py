"""Conditional steering inside vLLM against the workbench's engine, on the embedded model (fp32).

One worker run in .venv-vllm (tests/vllm_steering_worker.py) answers a mixed batch: four
abstainers (different concepts' vectors, gate layers, behaviour layers, strengths, both modes,
one without a gate, one reading the last layer after the final norm) and unsteered prompts,
each gated abstainer firing on one of its prompts and not on the others; in process with prefix
caching and chunked prefill on (64-token steps under a long shared system prompt) and off, and
through ``serve --steering`` (concurrent requests, an unknown abstainer, a restart). This side
answers every prompt alone on the engine and compares token for token; the gate's decisions
and votes must equal the engine's. The verify slice's steering cell, run as a grid on
``vllm:``, must reproduce the engine's recorded answers (data/reference/verify.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vllm_worker import run_job
from workbench.generation import GenerationConfig, generate
from workbench.steering.conditional import steerer_of

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"

pytestmark = [pytest.mark.vllm, pytest.mark.integration]

#: long enough (about 200 tokens) that the rendered prompts share whole prefix-cache blocks
SYSTEM = " ".join(
    [
        "You are a careful assistant for a museum of natural history and world geography.",
        "Answer visitors' questions in one or two plain sentences, without lists or headings.",
        "If a question is unclear, answer the most likely reading of it and say which.",
        "Prefer well-established facts; when numbers are involved give round figures.",
    ]
    * 3
)
#: (abstainer, question): each gated abstainer's first question is the one its gate fires on
PLAN = [
    ("rivers", "Name a river in Egypt."),
    ("rivers", "What is 12 times 12?"),
    ("rivers", "Who wrote Hamlet?"),
    ("volcanoes", "How do volcanoes form?"),
    ("volcanoes", "What is the capital of France?"),
    ("volcanoes", "Tell me about the Amazon rainforest."),
    ("always", "What is the tallest mountain on Earth?"),
    ("always", "How many legs does a spider have?"),
    ("norm", "Which ocean is the largest?"),
    ("norm", "Who painted the Mona Lisa?"),
    ("norm", "What gas do plants take in?"),
    ("deep", "What is the deepest lake in the world?"),
    ("deep", "Who discovered penicillin?"),
    (None, "Why is the sky blue?"),
    (None, "What is the boiling point of water?"),
]
#: name -> (gate layers or None, aggregate, behaviour layers, strength, mode, final norm)
ABSTAINERS = {
    "rivers": ((10, 20, 29), "majority", (14, 16), 0.6, "separate", False),
    "volcanoes": ((12, 20), "all", (14, 16), 0.8, "in_pass", False),
    "always": (None, "all", (12,), 0.5, "separate", False),
    "norm": ((15, 29), "all", (16, 18), 0.6, "separate", True),
    # CAST's order with behaviour layers deeper than the gate: a fired prompt's own pass is
    # steered at 14 and 18 once the gate has read 8 and 11
    "deep": ((8, 11), "any", (14, 18), 0.8, "in_pass", False),
}
SETTINGS = {
    # compiled (DYNAMO_TRACE_ONCE + inductor, as vLLM compiles on CPU): the steering adds are
    # traced into the model; the gate's reads run in eager steps
    "compiled_cache_and_chunks": {
        "compiled": True,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 64,
    },
    # the buffers' host side a copy of its own, filled, copied in and cleared as on a GPU
    "eager_host_copy_cache_and_chunks": {
        "host_copy": True,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 64,
    },
    "eager_neither": {"enable_prefix_caching": False, "enable_chunked_prefill": False},
}
CONFIG = {"max_new_tokens": 24, "system_prompt": SYSTEM}
#: rows of the plan sampled (two samples each) with the gate read in the answer's prefill:
#: each abstainer's first prompt (the gated ones fire there), one unfired, one unsteered
_NAMES = [a for a, _ in PLAN]
SAMPLED_ROWS = sorted({_NAMES.index(a) for a in _NAMES} | {_NAMES.index("rivers") + 1})
#: SELECT's preset's shape (made-up wording): the gate reads the question in a reading template
#: with no system turn, the answer is to the question wrapped in a plain template
SELECT_LIKE = {
    "spec": "norm",
    "questions": [q for a, q in PLAN if a == "norm"] + ["Why is the sky blue?"],
    "reading": "Consider how much the following request is about oceans and art: {question}",
    "wrap": "Answer the following question. {question}",
    "system": "You are a helpful assistant.",
}


#: activations read inside vLLM, against the engine's hooks: last token, mean, a tail, after
#: the final norm, and a long system prompt (several 64-token chunks; prefix cache on)
CAPTURE = {
    "prompts": [q for _, q in PLAN[:5]],
    "cases": {
        "last": {"layers": [0, 10, 29]},
        "mean": {"layers": [5, 15], "pooling": "mean"},
        "tail": {"layers": [3, 20], "pooling": "mean", "tail": [1, 3, 5, 7, 400]},
        "final norm": {"layers": [15, -1], "final_norm": True},
        "system, chunked": {"layers": [12, 29], "pooling": "mean", "system": SYSTEM},
        "plain text": {"layers": [7], "chat": False},
    },
}


_RIVERS = [
    "Name a river in Egypt.",
    "How long is the Danube?",
    "Which river flows through Paris?",
    "Where does the Amazon river begin?",
    "What is the longest river in Asia?",
    "Which river runs through London?",
]
_OTHERS = [
    "What is 12 times 12?",
    "Who wrote Hamlet?",
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Who painted the Mona Lisa?",
    "What gas do plants take in?",
]
#: an abstainer fitted from question lists alone, in process on vLLM and through the server
FIT = {
    "related": [q for i, q in enumerate(_RIVERS) if i % 3 != 2],
    "unrelated": [q for i, q in enumerate(_OTHERS) if i % 3 != 2],
    "validation": {
        "related": [q for i, q in enumerate(_RIVERS) if i % 3 == 2] + [_RIVERS[0]],
        "unrelated": [q for i, q in enumerate(_OTHERS) if i % 3 == 2] + [_OTHERS[0]],
    },
    "refusal_questions": _RIVERS[:3] + _OTHERS[:3],
}


@pytest.fixture(scope="module")
def lm32():
    from workbench.backends import load_model

    return load_model(MODEL, device="cpu", dtype="float32")


def _specs(lm) -> dict:
    """The four abstainers, from the model's own activations: each gate's direction points at
    its first question, thresholds halfway between that question and the next closest."""
    from workbench.steering import collect_activations, fit_refusal_vector
    from workbench.steering.spec import GateSpec, SteerSpec

    refusal = fit_refusal_vector(lm, [q for _, q in PLAN[:6]], list(range(lm.num_layers)))
    specs = {}
    for name, (gate_layers, aggregate, layers, strength, mode, final_norm) in ABSTAINERS.items():
        gate = None
        if gate_layers is not None:
            mine = [q for a, q in PLAN if a == name]
            acts = collect_activations(
                lm, mine, list(gate_layers), system=SYSTEM, final_norm=final_norm
            )
            means = acts.mean(0)
            vectors = torch.nn.functional.normalize(acts[0] - means, dim=-1)
            sims = torch.nn.functional.cosine_similarity(acts - means, vectors[None], dim=-1)
            thresholds = tuple(float((s[0] + s[1:].max()) / 2) for s in sims.T)
            assert all(float(s[0]) > float(s[1:].max()) for s in sims.T)
            gate = GateSpec(gate_layers, vectors, means, thresholds, aggregate, False, final_norm)
        specs[name] = SteerSpec(name, layers, refusal[list(layers)], strength, gate, mode)
    return specs


def _engine_alone(lm, spec, question: str):
    """The engine's answer to one question alone, its decision and its votes."""
    from workbench.steering import collect_activations

    config = GenerationConfig(**CONFIG)
    if spec is None:
        return generate(lm, [question], config, progress=False)[0], None, None
    steerer = steerer_of(spec)
    if spec.gate is not None and spec.gate.final_norm:  # SELECT's read: a pass of its own
        cond = steerer.condition
        acts = collect_activations(lm, [question], cond.layers, system=SYSTEM, final_norm=True)
        votes = cond.votes(acts)[0]
        decisions = cond.decide(acts)
        gen = steerer.generate(lm, [question], config, decisions=decisions, progress=False)[0]
        return gen, bool(decisions[0]), [bool(v) for v in votes]
    gen = steerer.generate(lm, [question], config, mode=spec.mode, progress=False)[0]
    if spec.gate is None:
        return gen, True, None
    return gen, bool(steerer.last_decisions[0]), [bool(v) for v in steerer.last_votes[0]]


@pytest.fixture(scope="module")
def specs(lm32):
    return _specs(lm32)


@pytest.fixture(scope="module")
def run(lm32, specs, tmp_path_factory):
    job = {
        "model": f"vllm:{MODEL}",
        "specs": {n: s.to_dict() for n, s in specs.items()},
        "prompts": [q for _, q in PLAN],
        "assign": [a for a, _ in PLAN],
        "config": CONFIG,
        "engine_settings": SETTINGS,
        # the gate read in the answer's prefill and the verify slice where users run them: a
        # compiled engine with the prefix cache and chunked prefill on (its cached blocks also
        # make them quick); the rest on the last setting
        "on_engine": {"slice": "compiled_cache_and_chunks"},
        "server": True,
        "slice": True,
        "select_like": SELECT_LIKE,
        # the engine each case of the gate read in the answer's prefill runs on (samples need
        # whole-prompt prefills on CPU: vLLM's CPU build cannot sample after chunks)
        "gate_in_prefill": {"one token": "compiled_cache_and_chunks", "samples": "eager_neither"},
        # the samples on each abstainer's first prompt (fired), the next (not) and an unsteered
        "gate_in_prefill_rows": {"samples": SAMPLED_ROWS},
        "capture": CAPTURE,
        "fit": FIT,
    }
    tmp = tmp_path_factory.mktemp("vllm-steering")
    out = run_job("vllm_steering_worker.py", job, tmp, timeout=1800)
    engine = [_engine_alone(lm32, specs[a] if a else None, q) for a, q in PLAN]
    return out, engine


def test_the_plan_exercises_fired_and_unfired_rows(run):
    """Not vacuous: every gated abstainer fires on its first question and on no other."""
    _, engine = run
    for name, (gate_layers, *_rest) in ABSTAINERS.items():
        fired = [f for (a, _), (_, f, _) in zip(PLAN, engine) if a == name]
        assert fired == (
            [True] + [False] * (len(fired) - 1) if gate_layers else [True] * len(fired)
        )
    steered = [g.text for (a, _), (g, f, _) in zip(PLAN, engine) if a and f]
    gated = sum(1 for a in ABSTAINERS.values() if a[0] is not None)
    assert len(steered) == gated + 2  # one per gated abstainer, two for the one without a gate


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_mixed_batch_answers_equal_the_engine_alone(run, setting):
    out, engine = run
    got = out[setting]
    mismatched = [
        q for (_, q), ids, (g, _, _) in zip(PLAN, got["token_ids"], engine) if ids != g.token_ids
    ]
    assert not mismatched, f"{setting}: answers differ from the engine's for {mismatched}"


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_gate_decisions_and_votes_equal_the_engine(run, setting):
    out, engine = run
    for (a, q), rec, (_, fired, votes) in zip(PLAN, out[setting]["records"], engine):
        if a is None:
            assert rec == {"fired": False}, q
            continue
        assert rec["fired"] == fired, q
        if votes is not None:
            assert rec["votes"] == votes, q


@pytest.mark.parametrize("case", ["one token", "samples"])
def test_gate_read_in_the_answers_prefill_equals_a_separate_gate_pass(run, case):
    """The default way reads each gate in its answer's own prefill and runs no gate pass;
    a fired answer that ended on its first token and every sample are answered steered all
    the same: token for token as with a separate gate pass first."""
    got = run[0]["gate_in_prefill"][case]
    prefill, separate = got["prefill"], got["pass"]
    assert prefill["gate_passes"] == 0 and separate["gate_passes"] == 1
    assert prefill["fired"] == separate["fired"] and any(prefill["fired"])
    assert prefill["token_ids"] == separate["token_ids"]


def test_in_pass_abstainers_are_steered_in_the_pass_that_reads_their_gate(run):
    """A fired ``separate`` abstainer's answer is sent again steered; an ``in_pass`` one's is
    steered in the very pass that read its gate (its answer equals the engine's: above), also
    where the behaviour layers are deeper than the gate, and sent again only where chunked
    prefill split a prompt whose positions needed steering before the gate had read it."""
    out, engine = run
    fired = {i for i, (a, _) in enumerate(PLAN) if a and ABSTAINERS[a][0] and engine[i][1]}
    mode = {i: ABSTAINERS[PLAN[i][0]][4] for i in fired}
    deeper = {i for i in fired if min(ABSTAINERS[PLAN[i][0]][2]) > max(ABSTAINERS[PLAN[i][0]][0])}
    separate = sorted(i for i in fired if mode[i] == "separate")
    assert separate and any(mode[i] == "in_pass" and i in deeper for i in fired)
    assert any(mode[i] == "in_pass" and i not in deeper for i in fired)
    # every prompt whole in one pass: no in_pass answer is sent again
    assert out["eager_neither"]["restarted"] == separate
    # 64-token chunks split every prompt: only the deeper in_pass ones join the separate ones
    assert out["compiled_cache_and_chunks"]["restarted"] == sorted(
        [*separate, *(i for i in fired if mode[i] == "in_pass" and i in deeper)]
    )


def test_prefix_cache_chunks_and_compilation_were_in_play(run):
    """The 'on' setting really took prompt blocks from the cache and ran compiled, with the
    steering state built before vLLM compiled the model; the 'off' one did neither."""
    out, _ = run
    on, off = out["compiled_cache_and_chunks"], out["eager_neither"]
    assert on["cached_tokens"] > 0 and off["cached_tokens"] == 0
    assert on["status"]["compiled"] and not off["status"]["compiled"]
    assert (
        on["status"]["compilation_mode"] != "NONE" and off["status"]["compilation_mode"] == "NONE"
    )
    # compiled on CPU through torch's compile cache, which a later start reuses (vLLM's CPU
    # build cannot load back its own ahead-of-time artifacts)
    assert on["aot_compile"] == "0"
    # a CPU engine with chunked prefill on refuses to sample, in one line, before any request
    # (vLLM's CPU build would stop the engine): the others prefill whole prompts
    assert on["sampling"].startswith("ConfigError: ") and "\n" not in on["sampling"]
    assert "enable_chunked_prefill=False" in on["sampling"]
    # the host-copy setting filled a buffer of its own and copied it in, as a GPU engine does
    copy = out["eager_host_copy_cache_and_chunks"]
    assert copy["status"]["host_copy"] and not on["status"]["host_copy"]
    assert copy["cached_tokens"] > 0


def test_server_answers_concurrent_mixed_requests_as_the_engine(run):
    out, engine = run
    server = out["server"]
    assert all(status == 200 for status, _ in server["registered"]), server["registered"]
    for (a, q), (status, body), (g, fired, votes) in zip(PLAN, server["answers"], engine):
        assert status == 200, (q, body)
        assert body["choices"][0]["message"]["content"].strip() == g.text, q
        if a is not None:
            assert body["steering"]["abstainer"] == a and body["steering"]["fired"] == fired, q
            if votes is not None:
                assert body["steering"]["votes"] == votes, q
        else:
            assert "steering" not in body


def test_server_unknown_abstainer_is_one_line_and_spares_the_others(run):
    out, _ = run
    status, body = out["server"]["unknown"]
    assert status == 400
    message = body["error"]["message"]
    assert "\n" not in message and "no-such-abstainer" in message and "rivers" in message
    assert all(s == 200 for s, _ in out["server"]["answers"])  # sent in the same burst


def test_server_restart_keeps_registered_abstainers(run):
    """The server started on a registry an earlier one saved lists and answers its
    abstainers by name."""
    out, engine = run
    listed = {a["name"] for a in out["server"]["after_restart"]["abstainers"]}
    assert listed == set(ABSTAINERS)
    i, (status, body) = out["server"]["restart_answer"]
    assert status == 200
    assert body["choices"][0]["message"]["content"].strip() == engine[i][0].text


def test_grid_on_vllm_reproduces_the_recorded_engine_answers_with_one_copy(run):
    """The verify slice (base, zero-shot, few-shot CoT, steering) as a grid on ``vllm:``: the
    engine's recorded answers, with the steering cell's vectors, means and thresholds read
    inside vLLM: no Hugging Face weights were loaded."""
    out, _ = run
    reference = json.loads((ROOT / "data" / "reference" / "verify.json").read_text())
    key = ("technique", "question_index", "sample")
    ref = {tuple(r[k] for k in key): r["response"] for r in reference["rows"]}
    got = out["slice"]
    rows = got["rows"]
    assert rows and all(r["backend"] == "vllm" for r in rows)
    assert {tuple(r[k] for k in key): r["response"] for r in rows} == ref
    steered = [r for r in rows if r["technique"] == "steering"]
    assert all(r["gate_votes"] is not None for r in steered)
    assert {r["gate_fired"] for r in steered} == {True, False}
    assert got["hf_loads"] == [] and not got["hf_copy"]


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_activations_read_inside_vllm_equal_the_engines(run, lm32, setting):
    """collect_activations on ``vllm:`` (read in vLLM's forward pass) against the engine's
    hooks: every pooling, a tail longer than the prompt, the final norm, a chunked system
    prompt, plain text; a second read with the prompts' blocks cached is the same."""
    from workbench.steering import collect_activations

    got = run[0]["capture"][setting]
    for name, kwargs in CAPTURE["cases"].items():
        engine = collect_activations(lm32, CAPTURE["prompts"], **kwargs)
        vllm = torch.tensor(got[name]["acts"])
        assert vllm.shape == engine.shape, name
        err = (vllm - engine).norm(dim=-1) / engine.norm(dim=-1)
        assert float(err.max()) < 1e-4, (name, float(err.max()))
        assert got[name]["again_equal"], name


def test_select_preset_shape_reads_its_own_prompt_and_answers_as_the_engine(run, specs, lm32):
    """SELECT's preset on vLLM (SelectSteeringAbstainer's path): the gate reads the reading
    template without a system turn, after the final norm; the answer is to the wrapped
    question under the preset's system prompt; as the engine does it."""
    from workbench.steering import collect_activations

    out, _ = run
    case = SELECT_LIKE
    spec = specs[case["spec"]]
    steerer = steerer_of(spec)
    cond = steerer.condition
    reading = [case["reading"].format(question=q) for q in case["questions"]]
    acts = collect_activations(lm32, reading, cond.layers, system=None, final_norm=True)
    decisions = cond.decide(acts)
    config = GenerationConfig(**{**CONFIG, "system_prompt": case["system"]})
    wrapped = [case["wrap"].format(question=q) for q in case["questions"]]
    engine = steerer.generate(lm32, wrapped, config, decisions=decisions, progress=False)
    got = out["select_like"]
    assert [r["fired"] for r in got["records"]] == decisions.tolist()
    assert [r["votes"] for r in got["records"]] == cond.votes(acts).tolist()
    assert got["token_ids"] == [g.token_ids for g in engine]


def test_vectors_means_and_thresholds_fit_from_vllm_equal_the_engines(run, lm32):
    """The same abstainer fitted from the same question lists on the engine (hooks), on vLLM in
    process and through the server (``POST /v1/abstainers/fit``): the same gate layers,
    vectors and means to cosine 0.99999, thresholds to 1e-5, the refusal vector likewise."""
    from workbench.steering.fit import fit_from_questions
    from workbench.steering.spec import SteerSpec

    engine = fit_from_questions(
        lm32,
        "fitted",
        FIT["related"],
        FIT["unrelated"],
        FIT["validation"]["related"],
        FIT["validation"]["unrelated"],
        FIT["refusal_questions"],
    )
    server = run[0]["server"]["shared"]["fit"]
    assert server["status"] == 200, server["answer"]
    assert server["answer"]["gate"]["layers"] == list(engine.gate.layers)
    for got in (SteerSpec.from_dict(run[0]["fit_in_process"]), SteerSpec.from_dict(server["spec"])):
        assert got.layers == engine.layers and got.gate.layers == engine.gate.layers
        for a, b in (
            (got.vectors, engine.vectors),
            (got.gate.vectors, engine.gate.vectors),
            (got.gate.means, engine.gate.means),
        ):
            cos = torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)
            assert float(cos.min()) >= 0.99999, float(cos.min())
        diffs = [abs(x - y) for x, y in zip(got.gate.thresholds, engine.gate.thresholds)]
        assert max(diffs) <= 1e-5, diffs
    status, answer = server["steered"]
    assert status == 200 and answer["steering"]["abstainer"] == "fitted-on-server"
    status, bad = server["unknown_field"]
    assert status == 400 and "unknown field(s) colour" in bad["error"]["message"]


# -- a server many people share: python -m workbench serve --steering, a key, hostile clients ---

#: what each hostile request gets (tests/vllm_steering_worker.py sends them)
HOSTILE_STATUS = {
    "nan vector": (400, "NaN or infinite"),
    "inf gate means": (400, "gate's means hold NaN or infinite"),
    "nan strength": (400, "strength nan is not finite"),
    "gate of the wrong width (inline)": (400, "gate's vectors have width 100"),
    "gate of the wrong width (registered)": (400, "gate's means have width 100"),
    "aggregate typo": (400, "aggregate must be one of"),
    "overwrite rivers": (409, "replace=true"),
    "register without the key": (401, "API key"),
    "unknown abstainer": (400, "unknown abstainer"),
    "strength past fp32": (422, "NaN or infinite at layer"),
}


def test_shared_server_answers_hostile_requests_alone_and_spares_the_others(run):
    """Every hostile request of the table is refused at the door (or fails alone); the other
    clients' plain and steered answers, in the same burst and in the rounds after it, equal
    the clean round's token for token."""
    out, _ = run
    shared = out["server"]["shared"]
    got = shared["hostile"]
    for case, (status, words) in HOSTILE_STATUS.items():
        s, body = got[case]
        message = body["error"]["message"] if isinstance(body.get("error"), dict) else str(body)
        assert s == status and words in message and "\n" not in message, (case, s, body)
    s, body = got["strength 1e6"]
    assert s == 200 and "is extreme" in body["steering"]["warnings"][0]
    s, body = got["strength past fp32, streamed"]
    assert s == 200 and "NaN or infinite" in body["error"]["message"]
    assert 400 <= got["broken JSON"][0] < 500
    clean = shared["clean"]
    assert all(isinstance(ids, list) and ids and isinstance(ids[0], int) for ids in clean)
    assert shared["during"] == clean
    assert shared["after"] == [clean]
    assert "hostile" not in shared["listed"] and "rivers" in shared["listed"]


def test_shared_server_needs_its_key_logs_where_told_and_deletes_on_request(run):
    out, _ = run
    shared = out["server"]["shared"]
    assert shared["health"] == 200
    assert shared["no_key"][0] == 401  # GET /v1/abstainers without the key
    assert shared["banner"][0].startswith("serving:") and "API key" in shared["banner"][0]
    log = shared["log"]
    assert "skipping" in log and "corrupt.json" in log  # the corrupt registry file, once
    assert log.count("corrupt.json") == 1 and "Application startup complete" in log
    status, (named_status, named) = shared["delete"]
    assert status == 200 and named_status == 400 and "'temporary'" in named["error"]["message"]
    assert "temporary" not in shared["listed"]


def test_shared_server_lists_its_abstainer_routes_in_vllms_openapi_document(run):
    """The abstainer routes are FastAPI routes on vLLM's own app: its /openapi.json lists
    them beside vLLM's, with vLLM's error shape."""
    status, paths, completions, error = run[0]["server"]["shared"]["openapi"]
    assert status == 200 and completions
    assert paths == {
        "/v1/abstainers": ["get", "post"],
        "/v1/abstainers/fit": ["post"],
        "/v1/abstainers/{name}": ["delete", "get"],
    }
    assert error == ["code", "message", "param", "type"]


def test_shared_server_stops_whole_on_sigterm(run):
    shared = run[0]["server"]["shared"]
    assert shared["sigterm_rc"] == 0
    assert shared["left_in_group"] == [] and shared["port_free"]


def test_shared_server_under_a_small_load(run):
    """Two client processes, three rounds of 24 requests (plain, steered, streamed; one in six
    malformed or hostile): every valid answer equals its clean run's, every bad one is a 4xx,
    the server is up at the end and its memory does not grow across rounds."""
    shared = run[0]["server"]["shared"]
    load = shared["load"]
    assert load["requests"] == 72 and load["errors"] == []
    assert load["mismatched"] == [] and load["bad_not_4xx"] == []
    assert shared["health_after"] == 200
    rss = load["rss"]
    assert len(rss) == 3 and rss[-1] <= rss[0] * 1.05 + 32 * 2**20, rss
    assert load["latency"]["steered"]["n"] > 0 and load["latency"]["unsteered"]["n"] > 0
