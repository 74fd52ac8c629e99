"""Which dtype a model runs in, and whether its answers reproduce.

Reproducible by default: ``dtype="auto"`` is fp32, where a greedy answer does not depend on the
batch it lands in, on a resume point, on the executor or on the x86 CPU generation (measured on
the embedded model: 64/64 identical answers at batch 1, 16 and 64, with AVX2, SSE4.2 or scalar
kernels; logits within about 5e-5 of each other). bf16 rounds each product to 8 bits of
mantissa, so padding and kernel choice move logits by tenths and flip about half of the greedy
answers: it is the speed-first choice, asked for by name (``dtype="fast"`` picks it where the
hardware computes it natively) and recorded in every row as ``numerics="fast"``.
"""

from __future__ import annotations

from typing import Literal

import torch

from workbench.errors import ModelLoadError

Numerics = Literal["reproducible", "fast"]

#: The dtype names a user may give, besides ``"auto"`` (reproducible) and ``"fast"``.
DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (x86 AVX512-BF16 or AMX, Arm BF16), where bf16
    runs faster than fp32; elsewhere it is emulated and slower (``benchmarks/generation.py``)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            flags = set()
            for line in f:
                if line.lower().startswith(("flags", "features")):
                    flags.update(line.split(":", 1)[1].split())
                    break
        return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    except OSError:
        pass
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return out == "1"
        except (OSError, subprocess.SubprocessError):
            return False
    return False


def fast_dtype(device: torch.device) -> torch.dtype:
    """The fastest dtype here: bf16 on GPUs that support it and on CPUs with native bf16, fp32
    elsewhere (emulated bf16 is slower than fp32)."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return torch.float32


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``/``"auto"``: fp32, the reproducible setting; ``"fast"``: :func:`fast_dtype`;
    a dtype or one of :data:`DTYPES`' names as given."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.float32
    if dtype == "fast":
        return fast_dtype(device)
    if dtype not in DTYPES:
        raise ModelLoadError(
            f"unknown dtype {dtype!r}; use 'auto' (reproducible, fp32), 'fast' (bf16 where "
            f"native) or one of {sorted(DTYPES)}"
        )
    return DTYPES[dtype]


def numerics_of(dtype: torch.dtype | str) -> Numerics:
    """``"reproducible"`` for fp32 (the setting whose answers are batch- and CPU-invariant),
    ``"fast"`` for anything coarser."""
    name = str(dtype).removeprefix("torch.")
    return "reproducible" if name == "float32" else "fast"


def reproducible_kernels(device: torch.device) -> None:
    """On CUDA, keep fp32 matmuls and convolutions in fp32 (no TF32, which rounds inputs to 10
    bits of mantissa and makes fp32 as batch-dependent as bf16). Nothing to do on CPU."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


#: Beside a run's results: which dtypes and numerics its answers used (figures read it).
RUN_FILE = "numerics.json"


def record_run_numerics(run_dir, dtypes, numerics) -> None:
    """Write ``run_dir/numerics.json``: the distinct dtypes and numerics of a run's rows."""
    import json
    from pathlib import Path

    from workbench.paths import write_text_atomic

    body = {
        "dtype": sorted({str(d) for d in dtypes if d is not None and d == d}),
        "numerics": sorted({str(n) for n in numerics if n is not None and n == n}),
    }
    write_text_atomic(Path(run_dir) / RUN_FILE, json.dumps(body, indent=1) + "\n")


def run_numerics_note(run_dir) -> str:
    """A caption line for a run whose answers were not all computed reproducibly ("" when they
    were, or when the run recorded nothing): figures of speed-first runs say so."""
    import json
    from pathlib import Path

    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return ""
    body = json.loads(path.read_text())
    fast = [n for n in body.get("numerics", []) if n != "reproducible"]
    if not fast:
        return ""
    dtypes = [d for d in body.get("dtype", []) if d != "float32"]
    return (
        f"numerics: {', '.join(fast)} ({', '.join(dtypes) or 'see rows'}): answers depend on "
        "batch and CPU"
    )


def other_kernels_env(capability: str | None = None) -> dict[str, str]:
    """Environment variables that make a fresh process use narrower CPU kernels than this
    machine's best (``capability``: torch's name for them; default this CPU's), standing in
    for another machine: AVX2 where AVX-512 is native, SSE4.2 and scalar ATen kernels where
    AVX2 is the best there is. ATen, oneDNN and MKL each read their own variable at start-up."""
    cap = (capability or torch.backends.cpu.get_cpu_capability()).upper()
    if cap.startswith("AVX512"):
        return {
            "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        }
    return {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    }
