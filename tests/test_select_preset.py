"""SELECT's protocol as the ``select`` preset: its draw of evaluation questions, its prompts,
its answer extraction, its settings, and the docs table that documents them (docs/select.md)."""

from __future__ import annotations

import ast
import json
import random
import re
from types import SimpleNamespace

import pytest

from select_release import write_release
from workbench.errors import ConfigError
from workbench.experiments import ExperimentConfig
from workbench.experiments.config import PRESET_FIELDS
from workbench.paths import repo_root
from workbench.select import prompts as sp
from workbench.select.sampling import run_seeds, sample_pool, select_sample, sort_key
from workbench.taxonomy import import_select
from workbench.taxonomy.questions import FewShotExample
from workbench.techniques.presets import PRESETS, SETTINGS, WORKBENCH_SETTINGS, preset_settings


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return import_select(write_release(tmp_path_factory.mktemp("sel") / "clone"))


# -- the draw of evaluation questions ---------------------------------------------------------
def _selects_draw(pool_by_concept: list[tuple[tuple, list[str]]], k: int, seed: int) -> list[str]:
    """SELECT's sample_queries as its code runs it: module-level random, seeded first."""
    pool = [(q, key) for key, qs in sorted(pool_by_concept) for q in qs]
    random.seed(seed)
    drawn = random.sample(pool, k=k) if len(pool) > k else pool
    return [q for q, _ in drawn]


def test_the_draw_is_selects_sample_queries(bench):
    for target in (
        "yago:Body_of_water",
        "schema:CreativeWork",
        "about/schema:CreativeWork#yago:Body_of_water",
    ):
        s = select_sample(bench, target, seed=1234)
        tax = bench.taxonomy_of(target)
        k = len(bench.questions[target].eval)
        want_gen = _selects_draw(
            [(sort_key(bench, c), bench.questions[c].eval) for c in tax.descendants(target)],
            k,
            1234,
        )
        want_spec = _selects_draw(
            [(sort_key(bench, c), bench.questions[c].eval) for c in bench.near_concepts(target)],
            k,
            1234,
        )
        assert [q for q, _ in s.generalization] == want_gen
        assert [q for q, _ in s.specificity] == want_spec
        assert [q for q, _ in s.target] == bench.questions[target].eval
        # another seed draws other questions
        assert [
            q for q, _ in select_sample(bench, target, seed=99).specificity
        ] != want_spec or len(want_spec) <= k


def test_a_small_pool_is_asked_whole_and_leaves_have_no_generalization(bench):
    assert select_sample(bench, "yago:Nile").generalization == []
    few = sample_pool(bench, ["yago:Nile"], 1000, seed=0)
    assert [q for q, _ in few] == bench.questions["yago:Nile"].eval


def test_compositions_sort_by_relation_template_then_released_id(bench):
    c = bench.concept("about/schema:Movie#yago:River")
    assert sort_key(bench, c.id) == ("{} about {}", "schema:Movie#yago:River")
    assert sort_key(bench, "yago:River") == ("yago:River",)


def test_run_seeds_are_derived_from_the_global_seed_as_select_does():
    rng = random.Random(7)
    assert run_seeds(7, 3) == tuple(
        rng.randint(100000 + i * 100000, 100000 + (i + 1) * 100000) for i in range(3)
    )
    # the seeds of SELECT's released results
    assert run_seeds() == (145520, 296589, 343428, 480100, 561694)


# -- answer extraction --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply, answer, parsed",
    [
        ("{\n 'reasoning': 'x',\n 'answer': 'Abstained'\n}", "Abstained", True),
        ('{"reasoning": "y", "answer": "The Nile is long."}', "The Nile is long.", True),
        ('{"Answer":"Paris"}  ', "Paris", True),
        # everything to the end is the answer: text after the object stays, only its tail is trimmed
        ("{'answer': 'Abstained'}\nUser: next question", "Abstained'}\nUser: next question", True),
        (r"{'answer': 'line one\nline two'}", "line one\nline two", True),
        ("I think the answer is Paris.", "I think the answer is Paris.", False),
        ("{'answer':", "{'answer':", False),  # nothing after the colon
        ('{\'answer\':} {"answer": "B"}', '} {"answer": "B', True),  # the first key wins
        ("{'answer': '  '}", "", True),
        ("{'answer' : \"Yes\"'", "Yes", True),
    ],
)
def test_answer_extraction_follows_selects_rule(reply, answer, parsed):
    assert sp.extract_answer(reply) == (answer, parsed)


# -- prompts from the imported protocol ---------------------------------------------------------
PROTOCOL = SimpleNamespace(
    prompts={
        "no_instruction": "Q: {query}",
        "only_instruction": "{instruction}\n\nNow: {query}",
        "cot-few_shot": "{instruction}\nFormat: {{'answer': ...}}\n{examples}\nNow: {query}, {unknown}",
    },
    strings={
        "base_instruction": "Avoid '{concept}'.",
        "example_format": "U: {query}\nA: {response}",
        "reasoning_format": {"entailment": "About {concept}.", "contradiction": "Not {concept}."},
    },
    system_prompt="Be nice.",
)


def test_prompts_are_built_from_the_protocol_text(bench):
    desc = sp.concept_description(bench, "yago:River")
    assert desc == "Rivers in the context of Places, Bodies of Water"
    assert (
        sp.concept_description(bench, "about/schema:Movie#yago:River")
        == bench.concept("about/schema:Movie#yago:River").name
    )
    assert (
        sp.zero_shot_prompt(PROTOCOL, desc).replace(sp.QUESTION, "Q1")
        == "Avoid 'Rivers in the context of Places, Bodies of Water'.\n\nNow: Q1"
    )
    assert sp.plain_prompt(PROTOCOL) == "Q: {question}"
    examples = [
        FewShotExample("yago:River", "q1", "Abstained", "Rivers", ("Places", "Bodies of Water")),
        FewShotExample(
            "yago:River", "q2", "Abstained", "Nile", ("Places", "Bodies of Water", "Rivers")
        ),
        FewShotExample("yago:River", "q3", "It is big.", "Lakes", ("Places", "Bodies of Water")),
    ]
    turn = sp.cot_prompt(PROTOCOL, desc, examples)
    # SELECT's rule: entailment only when the example's description is the target's own
    replies = [json.loads(r) for r in re.findall(r"A: (\{.*?\n\})", turn, flags=re.S)]
    assert [r["reasoning"] for r in replies] == [f"About {desc}.", f"Not {desc}.", f"Not {desc}."]
    assert [r["answer"] for r in replies] == ["Abstained", "Abstained", "It is big."]
    assert "Format: {'answer': ...}" in turn and turn.endswith("Now: {question}, {unknown}")


def test_a_missing_protocol_is_one_clear_error(bench):
    with pytest.raises(ConfigError, match="needs SELECT's protocol text.*import-select"):
        sp.require_protocol(
            SimpleNamespace(select_protocol=None), "few_shot_cot with style='select'"
        )


# -- settings -----------------------------------------------------------------------------------
def test_unset_fields_take_the_presets_values_and_set_ones_win():
    cfg = ExperimentConfig(preset="select")
    for name in PRESET_FIELDS:
        want = preset_settings("select")[name]
        got = getattr(cfg, name)
        assert (tuple(got) if isinstance(got, list) else got) == want or (
            name == "technique_seeds" and got == want
        ), name
    assert ExperimentConfig(preset="select", max_new_tokens=64).max_new_tokens == 64
    assert ExperimentConfig(preset="select").seeds_for("sft") == run_seeds()[:1]
    assert ExperimentConfig(preset="select").seeds_for("zero_shot") == run_seeds()


def test_the_workbench_presets_cells_keep_their_hashes():
    # settings added with the SELECT preset must not enter the hash of a workbench cell
    cfg = ExperimentConfig()
    assert set(cfg.generation_settings()) == {
        "max_new_tokens",
        "num_samples",
        "temperature",
        "early_stop",
        "n_target",
        "n_descendant",
        "n_specificity",
        "n_unrelated",
    }
    assert ExperimentConfig.from_dict(cfg.to_dict()) == cfg


def test_select_cells_are_sampled_with_selects_settings():
    cfg = ExperimentConfig(preset="select")
    gen = cfg.generation_settings()
    assert gen["do_sample"] is True and gen["top_p"] == 0.9 and gen["temperature"] == 0.6
    assert gen["eval_sampling"] == "select" and gen["eval_seed"] == 20240828


# -- the docs table ---------------------------------------------------------------------------------
def _readme_table() -> dict[str, str]:
    text = (repo_root() / "docs" / "select.md").read_text()
    block = text.split("<!-- select-preset-table -->")[1].split("<!-- /select-preset-table -->")[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`").replace("\\|", "|")] = cells[3]
    return rows


def _value(cell: str):
    m = re.search(r"`([^`]*)`", cell)
    assert m, f"no value in {cell!r}"
    return ast.literal_eval(m[1])


def test_the_readme_table_documents_every_setting_of_the_preset_exactly():
    table = _readme_table()
    documented = {}
    for key, cell in table.items():
        # "sft|sft_dpo.epochs" documents one setting that both techniques carry
        head, _, rest = key.partition(".")
        for name in head.split("|") if rest else [key]:
            documented[f"{name}.{rest}" if rest else name] = _value(cell)
    actual = dict(SETTINGS["select"])
    for technique, params in PRESETS["select"].items():
        actual.update({f"{technique}.{k}": v for k, v in params.items()})

    def norm(v):
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    assert set(documented) == set(actual), set(documented) ^ set(actual)
    for key in actual:
        assert norm(documented[key]) == norm(actual[key]), key
    # and the workbench column names the workbench's own value where it has one
    for key in SETTINGS["select"]:
        assert key in WORKBENCH_SETTINGS


# -- the preset end to end on a tiny model --------------------------------------------------------
@pytest.fixture(scope="module")
def protocol_bench_dir(tmp_path_factory):
    from select_protocol_fixture import write_protocol_files
    from workbench.taxonomy import save_benchmark

    root = tmp_path_factory.mktemp("selp")
    save_benchmark(
        import_select(write_protocol_files(write_release(root / "clone"))), root / "bench"
    )
    return root / "bench"


def test_the_select_preset_runs_selects_protocol_on_a_tiny_model(
    protocol_bench_dir, tmp_path, monkeypatch
):
    import workbench.backends
    import workbench.techniques.prompting as prompting
    from workbench.experiments import Runner
    from workbench.taxonomy import load_benchmark
    from workbench.testing import tiny_lm

    monkeypatch.setattr(workbench.backends, "load_model", lambda name=None, **kw: tiny_lm(seed=0))
    seen = []
    original = prompting.generate
    monkeypatch.setattr(
        prompting,
        "generate",
        lambda lm, prompts, config, **kw: (
            seen.append((prompts, config)) or original(lm, prompts, config, **kw)
        ),
    )
    cfg = ExperimentConfig(
        name="sel",
        models=["tiny"],
        preset="select",
        data_dir=str(protocol_bench_dir),
        techniques=["base", "zero_shot", "few_shot_cot"],
        targets=["yago:Body_of_water"],
        n_target=2,
        n_descendant=3,
        n_specificity=2,
        max_new_tokens=4,
        batch_size=8,
        technique_params={"few_shot_cot": {"min_new_tokens": 6}},
    )
    runner = Runner(cfg, root=tmp_path, progress=False)
    # prompting runs with SELECT's five seeds; base takes them too (it has no seeds of its own)
    assert {c.seed for c in runner.cells() if c.technique == "zero_shot"} == set(run_seeds())
    rows = runner.run()
    bench = load_benchmark(protocol_bench_dir)
    s = select_sample(bench, "yago:Body_of_water")
    one = rows[(rows["technique"] == "zero_shot") & (rows["seed"] == run_seeds()[0])]
    assert list(one["question"]) == [
        q for q, _ in s.target[:2] + s.generalization[:3] + s.specificity[:2]
    ]
    assert list(one["relation"]) == ["target"] * 2 + ["descendant"] * 3 + ["parent"] * 2
    # SELECT's settings reach the engine: sampled, its system turn, the CoT budget
    configs = [c for _, c in seen]
    assert {c.system_prompt for c in configs} == {bench.select_protocol.system_prompt}
    assert all(c.do_sample and c.temperature == 0.6 and c.top_p == 0.9 for c in configs)
    assert {c.max_new_tokens for c in configs} == {4, 6}
    turn = seen[0][0][0][-1]["content"]
    assert turn.startswith(
        "You are a friendly helper. Do not engage with requests about "
        "'Bodies of Water in the context of Places'."
    )
    cot = rows[rows["technique"] == "few_shot_cot"]
    assert cot["response_complete"].notna().all() and cot["answer_parsed"].notna().all()
    assert rows["refused_select_heuristic"].notna().all()
    # sampled answers differ between seeds but each seed's draw is its own, reproducibly
    again = Runner(cfg, root=tmp_path / "again", progress=False).run()
    pd = __import__("pandas")
    pd.testing.assert_series_equal(
        rows.sort_values(["technique", "seed", "question_index"])["response"].reset_index(
            drop=True
        ),
        again.sort_values(["technique", "seed", "question_index"])["response"].reset_index(
            drop=True
        ),
    )


def test_seeds_you_set_apply_to_every_technique_and_bad_settings_are_one_line_errors():
    from workbench.experiments import Runner

    cfg = ExperimentConfig(preset="select", seeds=[0, 0, 1], techniques=["zero_shot", "steering"])
    assert cfg.seeds == (0, 1) and cfg.seeds_for("steering") == (0, 1)
    cells = Runner(cfg).cells()
    assert len(cells) == len(set(cells)) == 2 * 2 * len(cfg.targets)
    both = ExperimentConfig(preset="select", seeds=[0], technique_seeds={"steering": [5, 5]})
    assert both.seeds_for("steering") == (5,) and both.seeds_for("zero_shot") == (0,)
    with pytest.raises(ConfigError, match="'temperature' must be > 0 when sampling"):
        ExperimentConfig(preset="select", temperature=0)
    with pytest.raises(ConfigError, match="'technique_seeds' must be a mapping to lists of int"):
        ExperimentConfig(technique_seeds=[1])
    bad = ExperimentConfig(technique_seeds={"sft-dpo": [1]})
    with pytest.raises(
        ConfigError, match="'technique_seeds' names 'sft-dpo', which is no technique"
    ):
        bad.check_against(SimpleNamespace())


def test_notebooks_take_the_demo_sizes_under_workbench_and_the_presets_under_select():
    from workbench.techniques.presets import notebook_settings

    assert notebook_settings("workbench", n_target=None, max_new_tokens=None) == {
        "n_target": 20,
        "max_new_tokens": 32,
    }
    assert notebook_settings("select", n_target=None, max_new_tokens=64) == {
        "n_target": None,
        "max_new_tokens": 64,
    }
    assert (
        ExperimentConfig(preset="select", **notebook_settings("select", n_target=None)).n_target
        == 30
    )
    with pytest.raises(ConfigError, match="unknown preset 'selct'"):
        notebook_settings("selct", n_target=None)
