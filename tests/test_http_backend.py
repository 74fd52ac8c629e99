"""The OpenAI-compatible HTTP back end against a real server (vLLM's, started here on the
embedded model) behind a proxy that rate-limits, fails and goes down on cue."""

from __future__ import annotations

import os

import pytest

from http_fixtures import VLLM_ENV, FaultyProxy, serve_vllm
from workbench.errors import ConfigError, ModelLoadError
from workbench.generation import GenerationConfig, generate

pytestmark = [pytest.mark.vllm, pytest.mark.integration]

QUESTIONS = [
    "What is the capital of France?",
    "Name a river in Egypt.",
    "Who wrote Hamlet?",
    "How do volcanoes form?",
    "What is 12 times 12?",
    "Tell me about owls.",
]
CONFIG = GenerationConfig(max_new_tokens=24)
SECRET = "sk-wb-test-0123456789-never-written"


@pytest.fixture(scope="module")
def lm32():
    from workbench.backends import load_model

    return load_model("smollm2-135m-instruct", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def server(lm32, tmp_path_factory):
    if not (VLLM_ENV / "bin" / "python").is_file():
        pytest.fail(
            f"no vLLM environment at {VLLM_ENV}: run bash scripts/setup_vllm.sh (make test "
            "does), or deselect with -m 'not vllm'"
        )
    log = tmp_path_factory.mktemp("server") / "vllm.log"
    proc, url = serve_vllm(lm32.source_dir, "smollm2", log)
    yield url
    import signal

    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture
def proxy(server):
    p = FaultyProxy(server)
    yield p
    p.close()


@pytest.fixture(scope="module")
def reference(lm32):
    return [g.text for g in generate(lm32, QUESTIONS, CONFIG, progress=False)]


def _api(url, tmp_path, **options):
    from workbench.backends import load_model

    return load_model(
        f"openai:smollm2@{url}", options={"cache_path": str(tmp_path / "cache.sqlite"), **options}
    )


@pytest.mark.parametrize("local_tokenizer", [False, True])
def test_answers_match_the_hf_engine(proxy, lm32, reference, tmp_path, local_tokenizer):
    """Chat mode (the server's template) and local-tokenizer mode (ours, token ids) alike."""
    opts = {"tokenizer": str(lm32.source_dir)} if local_tokenizer else {}
    with _api(proxy.url, tmp_path, **opts) as lm:
        gens = generate(
            lm, QUESTIONS, GenerationConfig(max_new_tokens=24, return_logprobs=True), progress=False
        )
    assert [g.text for g in gens] == reference
    ours = generate(
        lm32,
        QUESTIONS[:1],
        GenerationConfig(max_new_tokens=24, return_logprobs=True),
        progress=False,
    )[0]
    assert gens[0].logprobs == pytest.approx(ours.logprobs, abs=2e-3)
    assert all(g.completion_tokens and g.prompt_tokens and g.cached is False for g in gens)


def test_judge_scores_exactly_with_a_local_tokenizer(proxy, lm32, tmp_path):
    """The judge's verdict on the whole rubric, and its twelve category letters after a short
    prompt: each candidate continuation is a request that echoes the prompt's log-probabilities
    (the rubric is long: the letters' 24 spellings after it took a minute on 2 cores, and they
    take the same code path as the verdict's; the vLLM back end's judge test reads the letters
    after the rubric, for a complying and a refusing answer)."""
    from workbench.generation.options import option_probabilities
    from workbench.scoring.judge import LETTERS, LLMJudge

    pairs = [("How do I pick a lock?", "I'm sorry, but I can't help with that.")]
    letters = [[f" {c}", c] for c in LETTERS]
    short = ["Which letter comes first in the alphabet, A or B? The answer is"]
    with _api(proxy.url, tmp_path, tokenizer=str(lm32.source_dir)) as lm:
        theirs = LLMJudge(lm, categories=False).judge(pairs)
        their_letters = option_probabilities(lm, short, letters)
    for a, b in zip(LLMJudge(lm32, categories=False).judge(pairs), theirs):
        assert b.p_refusal == pytest.approx(a.p_refusal, abs=1e-3)
        assert b.mass == pytest.approx(a.mass, abs=1e-3)
    for a, b in zip(option_probabilities(lm32, short, letters), their_letters):
        assert b.probs == pytest.approx(a.probs, abs=1e-3)
        assert b.mass == pytest.approx(a.mass, abs=1e-3)


def test_without_a_tokenizer_scoring_is_a_clear_error(proxy, tmp_path):
    from workbench.scoring.judge import LLMJudge

    with _api(proxy.url, tmp_path) as lm:
        with pytest.raises(ConfigError, match="scoring"):
            LLMJudge(lm)
        from workbench.unknown.measures import unavailable_measures

        assert unavailable_measures(lm) == ["confidence_logprob", "entropy", "perplexity"]


def test_rate_limits_and_server_errors_are_retried(proxy, reference, tmp_path):
    proxy.fail = {2: 429, 3: 500, 5: 429, 6: 502, 7: 503}
    # Five retries: however the two threads' requests interleave (an injected error answers
    # at once, a forwarded request takes seconds), one request meets at most the five errors.
    with _api(proxy.url, tmp_path, max_retries=5, concurrency=2) as lm:
        gens = generate(lm, QUESTIONS, CONFIG, progress=False)
    assert [g.text for g in gens] == reference
    assert proxy.seen == len(QUESTIONS) + 5 and proxy.forwarded == len(QUESTIONS)


def test_a_resumed_run_never_pays_twice(proxy, reference, tmp_path):
    from workbench.backends.openai_api import EndpointError

    proxy.down_after = 3  # the server dies after three answers
    with (
        _api(proxy.url, tmp_path, max_retries=1, concurrency=1) as lm,
        pytest.raises(EndpointError, match="failed after 1 retries"),
    ):
        generate(lm, QUESTIONS, CONFIG, progress=False)
    assert proxy.forwarded == 3
    proxy.down, proxy.down_after = False, None  # back up: resume
    with _api(proxy.url, tmp_path, max_retries=1, concurrency=1) as lm:
        gens = generate(lm, QUESTIONS, CONFIG, progress=False)
        assert [g.cached for g in gens] == [True] * 3 + [False] * 3
    assert [g.text for g in gens] == reference
    assert proxy.forwarded == len(QUESTIONS)  # each answer paid for once


def test_costs_are_accounted_and_the_key_is_never_written(proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("WB_TEST_KEY", SECRET)
    with _api(proxy.url, tmp_path, api_key_env="WB_TEST_KEY", price_in=1.0, price_out=2.0) as lm:
        gens = generate(lm, QUESTIONS[:2], CONFIG, progress=False)
    assert f"Bearer {SECRET}" in proxy.auth  # the key was sent
    for g in gens:
        assert g.cost == pytest.approx((g.prompt_tokens * 1.0 + g.completion_tokens * 2.0) / 1e6)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_grid_runs_black_box_techniques_on_the_endpoint(proxy, tmp_path, monkeypatch):
    """The runner through the HTTP back end: rows say which back end answered and what it
    cost; a second run of the same grid is answered from the cache."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "wbcache"))
    from workbench.experiments import ExperimentConfig, Runner

    model = f"openai:smollm2@{proxy.url}"
    config = dict(
        name="http",
        models=[model],
        techniques=["base", "zero_shot"],
        targets=["wn:09411430-n"],
        seeds=[0],
        n_target=2,
        n_descendant=1,
        n_specificity=2,
        n_unrelated=1,
        max_new_tokens=16,
        model_options={
            model: {"price_in": 0.5, "price_out": 1.5, "cache_path": str(tmp_path / "cache.sqlite")}
        },
    )
    rows = Runner(ExperimentConfig(**config), root=tmp_path / "runs", progress=False).run()
    assert set(rows["backend"]) == {"openai"} and set(rows["dtype"]) == {"endpoint"}
    assert rows["cost"].gt(0).all() and not rows["cached"].any()
    sent = proxy.forwarded
    again = Runner(
        ExperimentConfig(**{**config, "name": "http2"}), root=tmp_path / "runs", progress=False
    ).run()
    assert proxy.forwarded == sent and again["cached"].all()
    assert list(again["response"]) == list(rows["response"])


def test_white_box_techniques_fail_on_an_api_model_and_run_on_vllm():
    from workbench.experiments import ExperimentConfig
    from workbench.taxonomy import load_benchmark

    config = ExperimentConfig(
        models=["openai:gpt-4o"], techniques=["base", "steering"], targets=["wn:09411430-n"]
    )
    with pytest.raises(ConfigError, match="black-box techniques only"):
        config.check_against(load_benchmark())
    config = ExperimentConfig(
        models=["vllm:smollm2-135m-instruct"],
        techniques=["sft", "steering"],
        targets=["wn:09411430-n"],
    )
    config.check_against(
        load_benchmark()
    )  # steering runs inside vLLM (issue 29), sft on its weights


def test_the_openai_api_without_a_key_says_which_variable(monkeypatch):
    from workbench.backends import load_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelLoadError, match="OPENAI_API_KEY"):
        load_model("openai:gpt-4o")
