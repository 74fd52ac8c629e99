"""Editing protocols: the workbench's and taxi's (derekpowell/taxi), setting by setting.

A preset fixes how choices are scored, how query slots are filled, how subjects are spelled and
every editor's parameters. ``taxi`` is taxi's code: ``benchmark.py`` runs EasyEdit with
``hparams/FT/llama-7b.yaml`` and ``hparams/ROME/llama-7b.yaml`` on Llama-2-7B (32 decoder
blocks) and scores with ``easyeditor/custom/custom.py``. Layers are given as taxi's block of 32
and mapped to the model's depth by relative position (:func:`relative_layer`). The table in docs/taxi.md
"taxi's protocol, setting by setting" lists each setting with its file and line;
``tests/test_taxi_preset.py`` fails when this module drifts from it, and
:func:`check_against_clone` compares the numbers with the user's clone.

taxi's wording (the in-context prefix, the rewrite prompt, ROME's KL prompt) is never shipped:
:func:`editors_for` takes it from :func:`workbench.editing.taxi.read_protocol` on the user's
clone, and falls back to the workbench's wording (recorded as such) where the clone has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.editing.editors import FT, IKE, ROME, Editor, NoEdit
from workbench.errors import ConfigError
from workbench.registry import Registry

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

#: Decoder blocks of the model taxi edited (Llama-2-7B).
TAXI_DEPTH = 32
#: The workbench's own wording, used where a clone does not provide taxi's.
WORKBENCH_IKE = "Imagine that a {s} is a kind of {c}. "
WORKBENCH_REWRITE = "A {s} is a kind of"
WORKBENCH_KL = "{s} is a"

EDITING_PRESETS: Registry[dict[str, Any]] = Registry(
    "editing preset",
    {
        "workbench": {
            "normalization": "token",
            "slots": "in_place",
            "subjects": "normalised",
            "ike": {"template": WORKBENCH_IKE},
            "ft": {"layer": 4, "steps": 25, "lr": 5e-4, "max_change": 5e-3},
            "rome": {"layer": 4},
        },
        "taxi": {
            # custom.py evaluate(): normalization=None, i.e. the summed log-probability of the choice
            "normalization": "none",
            # custom.py evaluate(): every slot emptied, the choice appended to the sentence
            "slots": "append",
            # custom.py edit_and_evaluate(): the edit and its queries use `subj` as released
            "subjects": "as_released",
            "ike": {"template": "taxi"},
            # hparams/FT/llama-7b.yaml + ft_main.py
            "ft": {
                "layer_of_32": 21,
                "steps": 25,
                "lr": 5e-4,
                "weight_decay": 0.0,
                "max_change": None,
                "loss": "last_position",
                "stop_loss": 1e-2,
                "templates": "taxi",
            },
            # hparams/ROME/llama-7b.yaml + rome_main.py / compute_u.py / compute_v.py
            "rome": {
                "layer_of_32": 5,
                "recipe": "easyedit",
                "steps": 25,
                "final_step": False,
                "lr": 0.5,
                "weight_decay": 1e-3,
                "clamp": 4.0,
                "kl_factor": 0.0625,
                "kl_prompt": "taxi",
                "stop_loss": 5e-2,
                "context_lengths": ((5, 10), (10, 10)),
                "damping": 0.0,
                "corpus": "model_samples",
                "n_samples": 300,
                "sample_tokens": 64,
                "templates": "taxi",
            },
        },
    },
)


def preset(name: str) -> dict[str, Any]:
    return EDITING_PRESETS[name]


def run_settings(name: str, normalization: str = "", subjects: str = "") -> dict[str, str]:
    """The scoring settings of a run under preset ``name``: ``normalization``, ``slots`` and
    ``subjects``, each the preset's unless given (an empty string: the preset's)."""
    from workbench.editing.scoring import SCORE_NORMALIZATIONS
    from workbench.editing.taxi import SUBJECT_SPELLINGS

    p = preset(name)
    out = {
        "normalization": normalization or p["normalization"],
        "slots": p["slots"],
        "subjects": subjects or p["subjects"],
    }
    if out["normalization"] not in SCORE_NORMALIZATIONS:
        raise ConfigError(
            f"normalization must be one of {SCORE_NORMALIZATIONS}, got {out['normalization']!r}"
        )
    if out["subjects"] not in SUBJECT_SPELLINGS:
        raise ConfigError(f"subjects must be one of {SUBJECT_SPELLINGS}, got {out['subjects']!r}")
    return out


def relative_layer(layer: int, n_layers: int, depth: int = TAXI_DEPTH) -> int:
    """Block ``layer`` of a ``depth``-block model at the same relative position in a model of
    ``n_layers`` blocks (first to first, last to last): round(layer * (n - 1) / (depth - 1))."""
    if not 0 <= layer < depth:
        raise ConfigError(f"layer {layer} is outside 0..{depth - 1}")
    return round(layer * (n_layers - 1) / (depth - 1))


def _depth(lm: Backend) -> int:
    return int(lm.model.config.num_hidden_layers)


def editor_params(
    name: str, editor: str, lm: Backend | None = None, protocol=None, layer: int | None = None
) -> tuple[dict, dict]:
    """``(kwargs, notes)`` for ``editor`` under preset ``name``: the editor's keyword arguments
    (layers mapped to ``lm``'s depth, ``"taxi"`` wording resolved from ``protocol``) and where
    each resolved value came from. ``layer`` overrides the preset's layer."""
    params = dict(preset(name).get(editor, {}))
    notes: dict[str, str] = {}
    if "layer_of_32" in params:
        of = params.pop("layer_of_32")
        if lm is not None:
            params["layer"] = relative_layer(of, _depth(lm))
            notes["layer"] = (
                f"taxi's block {of} of {TAXI_DEPTH} -> {params['layer']} of {_depth(lm)}"
            )
        else:
            params["layer"] = of
    if layer is not None and "layer" in params:
        params["layer"] = layer
        notes["layer"] = f"set to {layer} (the preset's is overridden)"
    wording = {
        "template": ("ike_template", WORKBENCH_IKE),
        "templates": ("rewrite_prompt", WORKBENCH_REWRITE),
        "kl_prompt": ("kl_prompt", WORKBENCH_KL),
    }
    for key, (attr, ours) in wording.items():
        if params.get(key) == "taxi":
            text = getattr(protocol, attr, None) if protocol is not None else None
            notes[key] = "taxi's clone" if text else "workbench wording (no taxi clone text)"
            text = text or ours
            params[key] = (text,) if key == "templates" else text
    return params, notes


def editors_for(
    name: str, editors: list[str], lm: Backend, protocol=None, layer: int | None = None
) -> tuple[list[Editor], dict[str, dict]]:
    """The editors named in ``editors`` under preset ``name`` for ``lm``, and per editor its
    resolved settings with their sources (for the run's record)."""
    classes = {"none": NoEdit, "ike": IKE, "ft": FT, "rome": ROME}
    out: list[Editor] = []
    record: dict[str, dict] = {}
    for e in editors:
        if e not in classes:
            raise ConfigError(f"unknown editor {e!r}; known: {', '.join(classes)}")
        if e == "none":
            out.append(NoEdit())
            record[e] = {}
            continue
        params, notes = editor_params(name, e, lm, protocol, layer)
        out.append(classes[e](**params))
        record[e] = {
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
            "sources": notes,
        }
    return out, record


#: taxi's YAML keys and the preset parameter each one sets (``None``: taxi's value has no
#: counterpart here, see the table in docs/taxi.md). Values are compared after :func:`_yaml_value`.
YAML_KEYS = {
    "ft": {
        "layers": "layer_of_32",
        "num_steps": "steps",
        "lr": "lr",
        "weight_decay": "weight_decay",
        "norm_constraint": "max_change",
    },
    "rome": {
        "layers": "layer_of_32",
        "v_num_grad_steps": "steps",
        "v_lr": "lr",
        "v_weight_decay": "weight_decay",
        "clamp_norm_factor": "clamp",
        "kl_factor": "kl_factor",
        "context_template_length_params": "context_lengths",
    },
}


def _yaml_value(key: str, value: Any) -> Any:
    if key == "layers":
        return int(value[0]) if isinstance(value, list) and len(value) == 1 else value
    if key == "norm_constraint" and value is False:
        return None
    if key == "context_template_length_params":
        return tuple(tuple(int(x) for x in pair) for pair in value)
    if isinstance(value, str):
        try:
            return float(value)  # EasyEdit reads "5e-4" as a float; YAML leaves it a string
        except ValueError:
            return value
    return value


def check_against_clone(hparams: dict[str, dict], name: str = "taxi") -> list[str]:
    """Differences between the clone's FT / ROME settings (:func:`~workbench.editing.taxi.read_hparams`)
    and preset ``name``; empty when they agree. ROME's ``mom2_adjustment`` must be on."""
    out = []
    for editor, keys in YAML_KEYS.items():
        if editor not in hparams:
            continue
        ours = preset(name)[editor]
        for key, param in keys.items():
            if key not in hparams[editor]:
                out.append(f"{editor}: the clone's settings lack {key!r}")
                continue
            theirs = _yaml_value(key, hparams[editor][key])
            mine = ours.get(param)
            same = (
                abs(float(theirs) - float(mine)) < 1e-12
                if isinstance(theirs, (int, float))
                and isinstance(mine, (int, float))
                and not isinstance(theirs, bool)
                else theirs == mine
            )
            if not same:
                out.append(
                    f"{editor}: {key} is {theirs!r} in the clone, {mine!r} in the {name} preset"
                )
    if "rome" in hparams and hparams["rome"].get("mom2_adjustment") is not True:
        out.append(
            f"rome: mom2_adjustment is {hparams['rome'].get('mom2_adjustment')!r} in the clone"
        )
    return out
