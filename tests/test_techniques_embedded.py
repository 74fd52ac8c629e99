"""Integration: each technique makes the embedded model abstain more on held-out target questions.

Fresh artifacts (the test run's river store: the fine-tuning really runs, once, and
tests/test_vllm_backend.py serves the same adapters). Held-out means the target's *eval*
questions, which no technique sees while preparing.
"""

import pytest

from conftest import RIVER as TARGET
from workbench.generation import GenerationConfig
from workbench.scoring import is_refusal
from workbench.techniques import get_technique

pytestmark = pytest.mark.integration
CFG = GenerationConfig(max_new_tokens=32)


@pytest.fixture(scope="module")
def setup(embedded, river_store):
    from workbench.generation import generate
    from workbench.taxonomy import load_benchmark

    bench = load_benchmark()
    questions = bench.questions[TARGET].eval[:12]
    base = [is_refusal(g.text) for g in generate(embedded, questions, CFG, progress=False)]
    return bench, questions, sum(base) / len(base), river_store


@pytest.mark.parametrize("name", ["few_shot_cot", "steering", "sft", "sft_dpo"])
def test_technique_raises_abstention_on_held_out_target_questions(embedded, setup, name):
    bench, questions, base_rate, store = setup
    with get_technique(name).prepare(embedded, bench, TARGET, store=store) as ab:
        gens = ab.generate(questions, CFG, progress=False)
    rate = sum(is_refusal(g.text) for g in gens) / len(gens)
    assert rate > base_rate, f"{name}: abstention {rate:.2f} vs unmodified {base_rate:.2f}"
    assert rate >= 0.5, f"{name}: abstention only {rate:.2f}"
