"""The vLLM back end against the workbench's own engine, on the embedded model.

vLLM runs in its own environment (.venv-vllm, scripts/setup_vllm.sh: the CPU build pins an
older transformers than the project's). One worker process there answers every case
(tests/vllm_worker.py); this side computes the Hugging Face engine's answers in fp32 and
compares: greedy answers token for token (system prompts, stop strings, a stop predicate),
LoRA adapters served over the base weights against the merged model, a stacked SFT+DPO-style
pair against the two merged in turn, the judge's verdicts, seeded samples that reproduce.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import RIVER
from vllm_worker import contains, run_job  # the same stop predicate on both sides
from workbench.generation import GenerationConfig, generate

pytestmark = [pytest.mark.vllm, pytest.mark.integration]

QUESTIONS = [
    "What is the capital of France?",
    "Name a river in Egypt.",
    "Who wrote Hamlet?",
    "How do volcanoes form?",
    "What is 12 times 12?",
    "Tell me about the Amazon rainforest.",
]
REFUSER = (
    "You must not answer questions about geography. If asked about geography, reply: "
    "\"I'm sorry, but I can't help with that. I cannot discuss geography.\""
)
RUNS = {
    "greedy": {"prompts": QUESTIONS, "config": {"max_new_tokens": 40}},
    "system": {"prompts": QUESTIONS, "config": {"max_new_tokens": 40, "system_prompt": REFUSER}},
    "stops": {"prompts": QUESTIONS, "config": {"max_new_tokens": 40, "stop_strings": [".", ","]}},
    "stop_when": {"prompts": QUESTIONS, "stop_when": " the ", "config": {"max_new_tokens": 40}},
    "logprobs": {
        "prompts": QUESTIONS[:3],
        "config": {"max_new_tokens": 12, "return_logprobs": True},
    },
    "sampled": {
        "prompts": QUESTIONS[:3],
        "config": {
            "max_new_tokens": 16,
            "do_sample": True,
            "num_samples": 3,
            "temperature": 0.8,
            "seed": 3,
            "return_logprobs": True,
        },
    },
}
#: long enough together (about 5,000 prompt tokens) that one engine step cannot hold them: with
#: vLLM's chunked prefill (its CPU default) a sampled prompt was split and the engine stopped
LONG = [
    f"Question {i}: {q} Answer after reading this note. " + "Rivers, mountains and seas. " * 60
    for i, q in enumerate(QUESTIONS * 2)
]
SAMPLED_LONG = {"max_new_tokens": 6, "do_sample": True, "num_samples": 2, "seed": 4}
JUDGE = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How do I pick a lock?", "I'm sorry, but I can't help with that request."),
    ("Name a river in Egypt.", "The Nile."),
]


def _random_adapter(model, directory: Path, seed: int, rank: int = 8, scale: float = 0.02) -> Path:
    """A LoRA adapter with small random weights on every linear layer of the blocks."""
    from peft import LoraConfig, get_peft_model

    from workbench.finetuning.lora import lora_target_modules

    torch.manual_seed(seed)
    import copy

    peft = get_peft_model(
        copy.deepcopy(model),
        LoraConfig(
            r=rank,
            lora_alpha=2 * rank,
            target_modules=lora_target_modules(model),
            init_lora_weights=False,
        ),
    )
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.mul_(scale)
    peft.save_pretrained(str(directory))
    return directory


def _merged(model, *adapters: Path):
    import copy

    from workbench.techniques.finetune import _apply_adapter

    merged = copy.deepcopy(model)
    for a in adapters:
        merged = _apply_adapter(merged, a)
    return merged.eval()


#: The fine-tuned abstainers, with their default settings: the ones
#: tests/test_techniques_embedded.py trains for the same target into the same store.
TRAINED = {"sft": {}, "sft_dpo": {}}
TECHNIQUE_QUESTIONS = [
    "What is a river?",
    "Where does the Danube flow?",
    "Who was a famous physicist?",
    "What is a volcano?",
]


def _trained_abstainers(lm, store) -> dict[str, list[str]]:
    """SFT and SFT+DPO (merged init: two adapters) on the HF engine, trained into ``store`` or
    taken from it; their answers."""
    from workbench.taxonomy import load_benchmark
    from workbench.techniques import get_technique

    bench, answers = load_benchmark(), {}
    for name, params in TRAINED.items():
        with get_technique(name, **params).prepare(lm, bench, RIVER, store=store) as ab:
            answers[name] = [
                g.text
                for g in ab.generate(
                    TECHNIQUE_QUESTIONS, GenerationConfig(max_new_tokens=24), progress=False
                )
            ]
    return answers


@pytest.fixture(scope="module")
def lm32():
    from workbench.backends import load_model

    return load_model("smollm2-135m-instruct", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def served(lm32, tmp_path_factory, river_store):
    """(vLLM's answers, the adapters) for every case, from one worker run."""
    from workbench.finetuning.stack import stack_adapters

    tmp = tmp_path_factory.mktemp("vllm")
    sft = _random_adapter(lm32.model, tmp / "sft", seed=1)
    dpo = _random_adapter(_merged(lm32.model, sft), tmp / "dpo", seed=2, rank=4)
    stacked = stack_adapters([sft, dpo], tmp / "stacked")
    runs = dict(RUNS)
    runs["adapter"] = {"prompts": QUESTIONS, "config": {"max_new_tokens": 24}, "adapter": str(sft)}
    runs["stacked"] = {
        "prompts": QUESTIONS,
        "config": {"max_new_tokens": 24},
        "adapter": str(stacked),
    }
    runs["sampled_again"] = RUNS["sampled"]
    runs["sampled_long"] = {"prompts": LONG, "config": SAMPLED_LONG}
    runs["sampled_long_alone"] = {"prompts": LONG[-1:], "config": SAMPLED_LONG}
    trained = _trained_abstainers(lm32, river_store)
    job = {
        "model": "vllm:smollm2-135m-instruct",
        "runs": runs,
        "judge": JUDGE,
        "techniques": TRAINED,
        "store": str(river_store.root),
        "target": RIVER,
        "technique_questions": TECHNIQUE_QUESTIONS,
    }
    out = run_job("vllm_worker.py", job, tmp, timeout=1200)
    return out, {"sft": sft, "dpo": dpo, "trained": trained}


def _hf(lm, run):
    config = GenerationConfig(**run["config"])
    return generate(
        lm, run["prompts"], config, progress=False, stop_when=contains(run.get("stop_when"))
    )


@pytest.mark.parametrize("case", ["greedy", "system", "stops", "stop_when", "logprobs"])
def test_greedy_answers_match_the_hf_engine(served, lm32, case):
    out, _ = served
    ours = _hf(lm32, RUNS[case])
    theirs = out["runs"][case]
    assert [g.text for g in ours] == [t["text"] for t in theirs]
    assert [g.finish_reason for g in ours] == [t["finish_reason"] for t in theirs]
    assert [g.token_ids for g in ours] == [t["token_ids"] for t in theirs]
    if case == "logprobs":
        for g, t in zip(ours, theirs):
            assert t["logprobs"] == pytest.approx(g.logprobs, abs=2e-3)
    if case == "stop_when":
        assert "stop_when" in {t["finish_reason"] for t in theirs}, "the case must exercise the cut"


def test_served_adapters_match_merged_models(served, lm32):
    out, adapters = served
    sft_model = _merged(lm32.model, adapters["sft"])
    both = _merged(lm32.model, adapters["sft"], adapters["dpo"])
    for name, model in (("adapter", sft_model), ("stacked", both)):
        view = lm32.with_model(model)
        ours = _hf(view, {"prompts": QUESTIONS, "config": {"max_new_tokens": 24}})
        assert [g.text for g in ours] == [t["text"] for t in out["runs"][name]], name
    base = [t["text"] for t in out["runs"]["greedy"]]
    assert [t["text"] for t in out["runs"]["adapter"]] != base, (
        "the adapter must change the answers for this to test anything"
    )


def test_fine_tuned_abstainers_are_served_from_the_same_artifacts(served, lm32):
    """SFT and SFT+DPO prepared on the vLLM back end reuse the adapters the HF engine trained
    (no training, no merged copy: SFT+DPO's pair is stacked into one adapter) and answer as
    the HF engine's merged models do."""
    out, adapters = served
    assert out["built"] == [], "the vLLM side must reuse the trained artifacts"
    for name, answers in adapters["trained"].items():
        assert out["techniques"][name]["served"] == "_ServedAdapter"
        assert out["techniques"][name]["texts"] == answers, name
    base = generate(lm32, TECHNIQUE_QUESTIONS, GenerationConfig(max_new_tokens=24), progress=False)
    assert any(a != g.text for a, g in zip(adapters["trained"]["sft_dpo"], base)), (
        "training must change some answers for this to test anything"
    )


def test_judge_verdicts_match(served, lm32):
    from workbench.scoring.judge import LLMJudge

    out, _ = served
    ours = LLMJudge(lm32).judge(JUDGE)
    for v, (p, mass, cats) in zip(ours, out["judge"]):
        assert p == pytest.approx(v.p_refusal, abs=1e-3)
        assert mass == pytest.approx(v.mass, rel=1e-2)
        assert cats == pytest.approx(list(v.category_probs), abs=1e-3)


def test_seeded_samples_reproduce_and_differ(served):
    out, _ = served
    first, again = out["runs"]["sampled"], out["runs"]["sampled_again"]
    assert [t["text"] for t in first] == [t["text"] for t in again]
    assert all(t["logprobs"] and len(t["logprobs"]) == len(t["token_ids"]) for t in first)
    per_prompt = [{t["text"] for t in first[i : i + 3]} for i in range(0, len(first), 3)]
    assert any(len(s) > 1 for s in per_prompt), "K samples of a prompt should not all be equal"


def test_samples_of_prompts_longer_than_an_engine_step_come_back_as_alone(served):
    """A sampled batch larger than one engine step (the default CPU engine prefills whole
    prompts: vLLM's CPU build stops on a sampled prompt split into chunks): every sample comes
    back, and a prompt's samples are those it gets alone."""
    out, _ = served
    batch, alone = out["runs"]["sampled_long"], out["runs"]["sampled_long_alone"]
    assert len(batch) == 2 * len(LONG) and all(t["token_ids"] for t in batch)
    assert [t["token_ids"] for t in batch[-2:]] == [t["token_ids"] for t in alone]


def test_provenance_and_no_hooks(served):
    out, _ = served
    assert out["backend"] == "vllm" and out["dtype"] == "float32"
    assert out["model_id"] == "smollm2-135m-instruct"
    assert "forward hooks" in out["hook_error"] and "vllm" in out["hook_error"]


def test_vllm_is_a_clear_error_where_it_is_not_installed():
    """In this environment (no vLLM) the name fails in one line saying how to install it."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    from workbench.backends import load_model
    from workbench.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="setup_vllm.sh"):
        load_model("vllm:smollm2-135m-instruct")
