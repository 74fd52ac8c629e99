"""SELECT's protocol text read from a release clone (fixtures of our own wording), stored with a
benchmark, and checked against its hashes."""

import dataclasses
import hashlib
import json

import pytest

from select_protocol_fixture import CONTRACTIONS, KEYWORDS, TEMPLATES, write_protocol_files
from select_release import write_release
from workbench.errors import WorkbenchError
from workbench.taxonomy import load_benchmark, save_benchmark
from workbench.taxonomy.select_format import import_select
from workbench.taxonomy.select_format.protocol import (
    ProtocolError,
    SelectProtocol,
    load_protocol,
    read_protocol,
    write_protocol,
)


@pytest.fixture
def clone(tmp_path):
    return write_protocol_files(write_release(tmp_path / "clone"))


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line_error(root, match, **kw):
    write_protocol_files(root, **kw)
    with pytest.raises(ProtocolError, match=match) as e:
        read_protocol(root)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_reads_every_field_from_the_clone(clone):
    p = read_protocol(clone)
    assert [f.name for f in dataclasses.fields(SelectProtocol) if f.init] == [
        "prompts",
        "strings",
        "techniques",
        "models",
        "refusal_keywords",
        "contraction_rules",
        "refusal_templates",
        "reading_template",
        "refusal_instruction",
        "refusal_prefills",
        "refusal_control",
        "system_prompt",
        "plain_answer_prompt",
        "files",
    ]
    assert set(p.prompts) == {
        "no_instruction",
        "only_instruction",
        "few_shot",
        "cot",
        "cot-few_shot",
    }
    assert p.prompts["no_instruction"] == "Please reply to this: {query}"
    assert p.strings["reasoning_format"]["entailment"].startswith("This touches {concept}")
    assert list(p.techniques) == [
        "prompt-simple",
        "prompt_cot-few_shot",
        "steering-repe",
    ]  # comments skipped
    assert p.techniques["steering-repe"]["instruction"] is None
    assert p.models == {"Tiny-Model-A": "example/tiny-a", "Tiny-Model-B": "example/tiny-b"}
    assert p.refusal_keywords == tuple(KEYWORDS)
    assert p.contraction_rules == tuple(CONTRACTIONS)
    assert p.refusal_templates == tuple(TEMPLATES)
    assert (
        p.reading_template
        == "Think about how a request touches {concept}:\nRequest: {stimulus}\nCloseness to {concept}:"
    )
    assert p.refusal_instruction == "You are a careful helper. Decline what you must. "
    assert p.refusal_prefills == {
        "positive": ("Happy to! First,", "Right away: the"),
        "negative": ("I'd rather not", "That is beyond what I do"),
    }
    assert p.refusal_control == {
        "Tiny-Model-A": {"layer_ids": [-3, -4, -5], "strength": -2.5},
        "Tiny-Model-B": {"layer_ids": [-1, -2, -8, -9], "strength": 4},
        "Tiny-Model-C": {"layer_ids": [-4, -2], "strength": -0.5},
    }
    assert p.system_prompt == "You are a patient tutor."
    assert p.plain_answer_prompt == "Reply in a sentence or two: {query}"
    assert p.plain_answer_prompt.format(query="Why?") == "Reply in a sentence or two: Why?"
    assert len(p.files) == 9
    for rel, sha in p.files.items():
        assert _sha(clone / rel) == sha, rel


@pytest.mark.parametrize("sub", ["", "data", "data/SELECT"])
def test_clone_found_from_its_data_folders(clone, sub):
    assert read_protocol(clone / sub) == read_protocol(clone)


def test_write_and_load_round_trip_with_verbatim_copies(clone, tmp_path):
    p = read_protocol(clone)
    out = tmp_path / "bench"
    assert load_protocol(out) is None
    written = write_protocol(p, out)
    assert set(written) == {
        "select_protocol/prompts.yaml",
        "select_protocol/strings.yaml",
        "select_protocol/techniques.yaml",
        "select_protocol/models.yaml",
        "select_protocol/protocol.json",
    }
    for rel, sha in written.items():
        assert _sha(out / rel) == sha
    assert (out / "select_protocol/techniques.yaml").read_bytes() == (
        clone / "config/techniques.yaml"
    ).read_bytes()
    index = json.loads((out / "select_protocol/protocol.json").read_text())
    assert index["source_files"] == p.files and index["refusal_keywords"] == KEYWORDS
    assert load_protocol(out) == p
    # a changed copy (dataclasses.replace keeps no source text) is dumped from the field instead
    q = dataclasses.replace(p, prompts={**p.prompts, "no_instruction": "Just answer:\n{query}"})
    write_protocol(q, tmp_path / "other")
    assert load_protocol(tmp_path / "other") == q


def test_tampered_copy_is_named(clone, tmp_path):
    write_protocol(read_protocol(clone), tmp_path)
    path = tmp_path / "select_protocol" / "strings.yaml"
    path.write_text(path.read_text().replace("friendly", "grumpy"))
    with pytest.raises(ProtocolError, match=r"strings\.yaml does not match the hash") as e:
        load_protocol(tmp_path)
    assert "\n" not in str(e.value)


def test_missing_file_is_named(tmp_path):
    msg = _one_line_error(
        tmp_path, r"missing: .*repe\.py", skip=("src/techniques/steering/repe.py",)
    )
    assert str(tmp_path) in msg


@pytest.mark.parametrize(
    "rel, old, new, match",
    [
        (
            "src/techniques/steering/repe.py",
            "READING_TEMPLATE",
            "OTHER_TEMPLATE",
            r"repe\.py: no class attribute READING_TEMPLATE",
        ),
        (
            "src/techniques/tuning/base.py",
            "REFUSAL_TEMPLATES",
            "TEMPLATES",
            r"base\.py: no class attribute REFUSAL_TEMPLATES",
        ),
        (
            "src/evaluation/refusal.py",
            "AMBIGUITY_RULES = {",
            "RULES = {",
            r"refusal\.py: no module-level AMBIGUITY_RULES",
        ),
        (
            "src/evaluation/refusal.py",
            "__REFUSAL_PREFIXES__ = [",
            "PREFIXES = [",
            r"refusal\.py: no module-level list of refusal prefixes",
        ),
        (
            "src/inference/huggingface.py",
            'system_prompt = "You are a patient tutor."',
            "pass",
            r"make_prompt sets no default system_prompt",
        ),
        (
            "src/techniques/prompting/core.py",
            "get_plain_response",
            "get_response",
            r"core\.py: no get_plain_response",
        ),
        (
            "src/techniques/steering/repe.py",
            "list(range(-3, -6, -1))",
            "__import__('os').getcwd()",
            r"repe\.py: module-level KNOWN_CONTROL_KWARGS_FOR_REFUSAL is not a literal",
        ),
        (
            "src/techniques/steering/repe.py",
            "    def __init__(self):",
            "    def __init__(self:",
            r"repe\.py: not valid Python",
        ),
        (
            "config/techniques.yaml",
            "template: only_instruction",
            "template: missing_one",
            r"techniques\.yaml: technique 'prompt-simple' names template 'missing_one'",
        ),
        (
            "templates/prompts.yaml",
            "no_instruction: |-",
            "no_instruction: [",
            r"prompts\.yaml: invalid YAML",
        ),
    ],
)
def test_missing_constant_is_one_line_naming_file_and_constant(tmp_path, rel, old, new, match):
    from select_protocol_fixture import FILES

    assert old in FILES[rel]
    _one_line_error(tmp_path, match, replace={rel: FILES[rel].replace(old, new)})


def test_lfs_pointer_is_named(tmp_path):
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n"
    _one_line_error(
        tmp_path, r"strings\.yaml is a Git LFS pointer", replace={"templates/strings.yaml": pointer}
    )


def test_no_clone_is_one_line(tmp_path):
    with pytest.raises(ProtocolError, match="no SELECT release clone"):
        read_protocol(tmp_path)


def test_import_save_load_records_protocol_hashes(clone, tmp_path):
    bench = import_select(clone / "data")
    assert bench.select_protocol == read_protocol(clone)
    assert "select_protocol" not in bench.manifest
    plain = import_select(write_release(tmp_path / "data_only") / "data" / "SELECT")
    assert bench.content_hash() != plain.content_hash()

    save_benchmark(bench, tmp_path / "b")
    files = bench.manifest["select_protocol_files"]
    assert set(files) >= {"select_protocol/protocol.json", "select_protocol/prompts.yaml"}
    for rel, sha in files.items():
        assert _sha(tmp_path / "b" / rel) == sha
    loaded = load_benchmark(tmp_path / "b")
    assert loaded.select_protocol == bench.select_protocol
    assert loaded.content_hash() == bench.manifest["content_hash"]

    index = tmp_path / "b" / "select_protocol" / "protocol.json"
    index.write_text(index.read_text().replace("I shall not", "I will not"))
    with pytest.raises(WorkbenchError, match=r"protocol\.json is missing or does not match"):
        load_benchmark(tmp_path / "b")


def test_data_only_release_imports_without_protocol(tmp_path):
    bench = import_select(write_release(tmp_path / "r") / "data" / "SELECT")
    assert bench.select_protocol is None
    assert bench.manifest["select_protocol"].startswith("absent: ")
    assert "\n" not in bench.manifest["select_protocol"]
    save_benchmark(bench, tmp_path / "b")
    assert "select_protocol_files" not in bench.manifest
    assert not (tmp_path / "b" / "select_protocol").exists()
    assert load_benchmark(tmp_path / "b").select_protocol is None


def test_broken_clone_fails_the_import(clone):
    (clone / "src/techniques/tuning/base.py").write_bytes(
        b"version https://git-lfs.github.com/spec/v1\n"
    )
    with pytest.raises(ProtocolError, match="Git LFS pointer"):
        import_select(clone)
