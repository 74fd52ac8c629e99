"""One LoRA adapter equal to several applied in turn, for engines that serve a single adapter.

SFT+DPO trains its DPO adapter on the SFT-merged weights, so the model is
``W + s1·B1·A1 + s2·B2·A2``. That sum is itself a LoRA of rank ``r1 + r2``: stack the A
matrices and place each scaled B side by side, ``[s1·B1, s2·B2] @ [A1; A2]``. vLLM then serves
the pair over the base weights with no merged copy, and the product is the same update (up to
floating-point rounding). Modules one adapter lacks get zero blocks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from workbench.errors import ConfigError
from workbench.paths import atomic_directory

_WEIGHTS = "adapter_model.safetensors"


def _scale(cfg: dict) -> float:
    r, alpha = int(cfg["r"]), float(cfg.get("lora_alpha", cfg["r"]))
    return alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r


def _check(cfg: dict, directory: Path) -> None:
    for key in ("rank_pattern", "alpha_pattern"):
        if cfg.get(key):
            raise ConfigError(
                f"adapter {directory} sets {key}; stacking needs one rank per adapter"
            )
    if cfg.get("use_dora") or cfg.get("modules_to_save"):
        raise ConfigError(
            f"adapter {directory} uses DoRA or modules_to_save, which a stacked LoRA cannot express"
        )


def stack_adapters(directories: Sequence[str | Path], out: str | Path) -> Path:
    """Write (once) and return ``out``: a LoRA adapter equal to ``directories`` applied in order."""
    import torch
    from safetensors.torch import load_file, save_file

    out = Path(out)
    if (out / "adapter_config.json").is_file():
        return out
    cfgs, tensors = [], []
    for d in map(Path, directories):
        cfg = json.loads((d / "adapter_config.json").read_text())
        _check(cfg, d)
        cfgs.append(cfg)
        tensors.append(load_file(str(d / _WEIGHTS)))
    modules = sorted({k.rsplit(".lora_", 1)[0] for t in tensors for k in t if ".lora_A." in k})
    stacked: dict[str, torch.Tensor] = {}
    for m in modules:
        a_parts, b_parts = [], []
        shape_a = shape_b = None
        for t in tensors:
            if f"{m}.lora_A.weight" in t:
                shape_a, shape_b = (
                    t[f"{m}.lora_A.weight"].shape[1],
                    t[f"{m}.lora_B.weight"].shape[0],
                )
        for cfg, t in zip(cfgs, tensors):
            a, b = t.get(f"{m}.lora_A.weight"), t.get(f"{m}.lora_B.weight")
            r = int(cfg["r"])
            if a is None:
                # some adapter has module m (it is listed from their keys), which set the shapes
                assert shape_a is not None and shape_b is not None
                a, b = torch.zeros(r, shape_a), torch.zeros(shape_b, r)
            assert b is not None  # LoRA saves lora_B beside every lora_A
            a_parts.append(a.float())
            b_parts.append(b.float() * _scale(cfg))
        stacked[f"{m}.lora_A.weight"] = torch.cat(a_parts, 0).contiguous()
        stacked[f"{m}.lora_B.weight"] = torch.cat(b_parts, 1).contiguous()
    rank = sum(int(c["r"]) for c in cfgs)
    targets = sorted({t for c in cfgs for t in (c.get("target_modules") or [])})
    config = {
        **cfgs[0],
        "r": rank,
        "lora_alpha": rank,
        "use_rslora": False,
        "lora_dropout": 0.0,
        "target_modules": targets,
    }
    with atomic_directory(out) as tmp:
        save_file(stacked, str(tmp / _WEIGHTS))
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2))
        (tmp / "stacked_from.json").write_text(
            json.dumps([str(Path(d).resolve()) for d in directories])
        )
    return out
