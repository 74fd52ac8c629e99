"""One copy of the weights behind an engine that serves (vLLM), without vLLM: activations are read
by the engine itself when it can (``capture``), artifacts say which engine read them, adapters
train on a copy lent for the training only, and an engine serves adapters only when asked to.
The vLLM side (the same activations as the engine's hooks, a grid that loads no Hugging Face
weights) is in tests/test_vllm_steering.py."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
import torch

from workbench.backends.vllm_steering import Capture, capture_args
from workbench.errors import ConfigError
from workbench.generation.backend import Backend, Capabilities
from workbench.steering import collect_activations

NONE = Capabilities(
    activations=False,
    weights=False,
    adapters=False,
    logprobs=False,
    scoring=False,
    distribution=False,
)


class _Engine(Backend):
    """An engine with no layers in hand: it records what it is asked to read."""

    backend = "fake"
    engine = "a fake engine"
    options_type = dict

    def __init__(self, capture: bool, weights: bool = False):
        self.capabilities = replace(NONE, capture=capture, weights=weights)
        self.name, self.model_id, self.revision, self.dtype_name = "fake:m", "m", "r", "float32"
        self.tokenizer = None
        self.asked: list = []
        self.lent: list[str] = []

    @classmethod
    def load(cls, ref, name, **kwargs):
        raise NotImplementedError

    def generate_prompts(self, prompts, config, **kwargs):
        raise NotImplementedError

    def capture_activations(self, prompts, layers, **kwargs):
        if not self.capabilities.capture:
            return super().capture_activations(prompts, layers, **kwargs)
        self.asked.append((list(prompts), list(layers), kwargs))
        return torch.zeros(len(prompts), len(layers), 4)

    @contextlib.contextmanager
    def training_copy(self):
        self.lent.append("lent")
        try:
            yield _Lent()
        finally:
            self.lent.append("returned")


class _Lent:
    def __init__(self):
        self.model = torch.nn.Linear(2, 2)
        self.tokenizer = "tok"


@pytest.mark.parametrize(
    "cap, n_prompt, rows",
    [
        (Capture((1,), "last"), 9, (8, 9)),
        (Capture((1,), "mean"), 9, (0, 9)),
        (Capture((1,), "mean", tail=3), 9, (6, 9)),
        (Capture((1,), "mean", tail=40), 9, (0, 9)),
        (Capture((1,), "mean", tail=0), 9, (9, 9)),  # nothing pooled: zeros, as the engine
    ],
)
def test_a_capture_pools_the_engines_positions(cap, n_prompt, rows):
    assert cap.positions(n_prompt) == rows
    args = capture_args(cap, "t")
    assert all(isinstance(v, str) for v in args.values())  # flat: an API request carries them
    assert Capture.from_json(args["workbench_capture"]) == cap


def test_collect_activations_asks_an_engine_that_reads_them_itself():
    lm = _Engine(capture=True)
    acts = collect_activations(
        lm, ["q1", "q2"], [3, -1], pooling="mean", tail=[2, 5], system="s", final_norm=True
    )
    assert acts.shape == (2, 2, 4)
    ((prompts, layers, kwargs),) = lm.asked
    assert prompts == ["q1", "q2"] and layers == [3, -1]
    assert kwargs["pooling"] == "mean" and kwargs["tail"] == [2, 5]
    assert kwargs["system"] == "s" and kwargs["final_norm"] and kwargs["chat"]


def test_an_engine_that_cannot_read_activations_says_so_in_one_line():
    with pytest.raises(ConfigError, match=r"needs capture .* fake back end of model 'fake:m'"):
        collect_activations(_Engine(capture=False), ["q"], [1])


def test_artifacts_say_which_engine_read_their_activations():
    from workbench.techniques.steering import activations_from

    assert activations_from(_Engine(capture=True)) == {"activations_from": "fake"}


def test_artifacts_of_the_engine_itself_keep_their_old_key(tiny):
    """Vectors read through hooks carry no field: their artifacts' hashes are unchanged."""
    from workbench.techniques.steering import activations_from

    assert activations_from(tiny) == {}


def test_adapters_train_on_a_copy_lent_for_the_training_only():
    from workbench.techniques.finetune import _training

    lm = _Engine(capture=True, weights=True)
    with _training(lm) as (model, tokenizer):
        assert lm.lent == ["lent"] and tokenizer == "tok"
        assert next(model.parameters()).dtype == torch.float32
    assert lm.lent == ["lent", "returned"]


@pytest.mark.parametrize(
    "given, needs, expected",
    [
        (None, frozenset(), None),
        (None, frozenset({"steering"}), {"steering": True}),
        (None, frozenset({"weights"}), {"adapters": True}),
        ({"max_model_len": 512}, frozenset({"weights", "steering"}), None),
        ({"adapters": False}, frozenset({"weights"}), {"adapters": False}),
    ],
)
def test_a_vllm_engine_serves_adapters_only_for_a_technique_that_trains_them(
    given, needs, expected
):
    from workbench.backends.vllm_engine import VLLMModel

    got = VLLMModel.options_for(given, needs)
    if expected is None and given and needs:
        expected = {**given, "steering": True, "adapters": True}
    assert got == (expected if expected is not None else given)


def test_the_fit_settings_are_the_steering_techniques_with_the_same_defaults():
    """What a served fit reads (workbench.steering.fit.FitSettings) is the steering technique's
    parameters of the same names, defaults included: one meaning, two layers."""
    from workbench.steering.fit import FitSettings
    from workbench.techniques.steering import SteeringParams

    technique = {name: f.default for name, f in SteeringParams.model_fields.items()}
    for name, f in FitSettings.model_fields.items():
        assert name in technique and technique[name] == f.default, name
