"""Start vLLM's OpenAI-compatible server on a model, for the HTTP back end to talk to.

``python -m workbench serve MODEL`` (:mod:`workbench.cli.serve`) or :func:`start_vllm_server` resolves MODEL as
the workbench does (a registered name such as the embedded model, a directory, a hub id) and
runs ``vllm.entrypoints.openai.api_server`` with the vLLM environment's python (``.venv-vllm``
on CPU, this environment's when vLLM is installed here). The model is then
``openai:<name>@<url>``, with ``tokenizer=<directory>`` for exact scoring.

``--steering`` adds conditional steering per request (:mod:`workbench.backends.steer_server`):
the workers carry the steering extension (compiled with the model on GPU; eager on CPU),
abstainers are registered at
``POST /v1/abstainers`` and kept in ``--registry`` (default: the workbench cache, per served
name), so a restarted server still knows them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from workbench.errors import ConfigError, ModelLoadError
from workbench.paths import repo_root


def vllm_python() -> Path:
    """The python that has vLLM: ``$WORKBENCH_VLLM_PYTHON``, this one if it imports vllm, else
    the project's ``.venv-vllm``."""
    env = os.environ.get("WORKBENCH_VLLM_PYTHON")
    if env:
        return Path(env)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    return repo_root() / ".venv-vllm" / "bin" / "python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def given_chunking(extra: list[str]) -> tuple[bool | None, int | None]:
    """The chunked-prefill choice and step budget (``--[no-]enable-chunked-prefill``,
    ``--max-num-batched-tokens N`` or ``=N``; vLLM takes ``_`` for ``-`` too) among a
    server's extra arguments, None where not given."""
    chunked: bool | None = None
    budget: int | None = None
    for i, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        name = name.replace("_", "-")
        if name in ("--enable-chunked-prefill", "--no-enable-chunked-prefill"):
            chunked = name == "--enable-chunked-prefill" and value.lower() not in ("false", "0")
        elif name == "--max-num-batched-tokens":
            value = value if eq else (extra[i + 1] if i + 1 < len(extra) else "")
            try:
                budget = int(value)
            except ValueError:
                raise ConfigError(
                    f"--max-num-batched-tokens takes a whole number of tokens, not {value!r}"
                ) from None
    return chunked, budget


def as_flags(options: dict[str, bool | int]) -> list[str]:
    """Engine options as vLLM's server flags (``enable_x=False`` -> ``--no-enable-x``)."""
    out: list[str] = []
    for key, value in options.items():
        flag = key.replace("_", "-")
        if value is True:
            out.append(f"--{flag}")
        elif value is False:
            out.append(f"--no-{flag}")
        else:
            out += [f"--{flag}", str(value)]
    return out


def start_vllm_server(
    model: str,
    name: str = "model",
    *,
    dtype: str = "auto",
    port: int | None = None,
    max_model_len: int = 2048,
    log: str | os.PathLike | None = None,
    timeout: float = 600,
    extra: list[str] | None = None,
    steering: bool = False,
    registry: str | os.PathLike | None = None,
    api_key: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start the server and wait until it answers; return (process, base URL). The caller stops
    it (:func:`stop_server`: it runs in its own process group).
    ``log``: a file for vLLM's log (added to), ``"stderr"`` for this process's stderr, None to discard it.
    ``steering``: per-request conditional steering, abstainers kept in ``registry``.
    ``api_key``: every /v1 route needs it (``VLLM_API_KEY`` in the server's environment, never
    on its command line, where other users of the machine could read it)."""
    from workbench.models.loading import resolve_device, resolve_source
    from workbench.models.numerics import resolve_dtype

    python = vllm_python()
    if not python.is_file():
        raise ModelLoadError(f"no python with vLLM at {python}: run bash scripts/setup_vllm.sh")
    src = resolve_source(model)
    device = resolve_device("auto")
    on_cpu = device.type == "cpu"
    dtype_name = str(resolve_dtype(dtype, device)).removeprefix("torch.")
    port = port or free_port()
    env = {**os.environ}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    cpu_args: list[str] = []
    if on_cpu:
        from workbench.backends.vllm_engine import CPU_COMPILE_CACHE, cpu_whole_prompts

        env.setdefault(*CPU_COMPILE_CACHE)  # a compiled CPU server's later starts: see there
        # whole prompts per step, by the engine's rule: vLLM's CPU build stops the engine
        # (every client's answers) when a sampled request's prompt is prefilled in chunks
        cpu_args = as_flags(cpu_whole_prompts(max_model_len, *given_chunking(extra or [])))
    if api_key:
        env["VLLM_API_KEY"] = api_key
    steer_args: list[str] = []
    if steering:
        from workbench.backends.steer_server import MIDDLEWARE, REGISTRY_ENV, default_registry
        from workbench.backends.vllm_steering import EXTENSION

        env[REGISTRY_ENV] = str(Path(registry) if registry else default_registry(name))
        env.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")  # the extension reads V1's batch layout
        # the steering adds are compiled with the model; on CPU the server runs eagerly, as
        # the back end's engines do (a compiled start takes 3-5x as long for the same speed)
        steer_args = ["--worker-extension-cls", EXTENSION, "--middleware", MIDDLEWARE]
        if on_cpu and "--compilation-config" not in (extra or []):
            steer_args.append("--enforce-eager")
        if on_cpu and "--block-size" not in (extra or []):
            # CPU vLLM's blocks are 128 tokens: a question's gate pass would then leave no
            # whole block for its unsteered answer to reuse; at 32 (the CPU kernels' multiple)
            # the gate costs about nothing (benchmarks/steering.py)
            steer_args += ["--block-size", "32"]
    # The module, not the ``vllm`` command: the CPU build's command looks up a distribution
    # named "vllm" and fails (it is installed as "vllm-cpu").
    cmd = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(src.load_from),
        "--served-model-name",
        name,
        "--dtype",
        dtype_name,
        "--max-model-len",
        str(max_model_len),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *steer_args,
        *cpu_args,
        *(extra or []),
    ]
    # the server writes to the log for as long as it runs, after this function returns
    if log == "stderr":
        out = sys.stderr
    else:
        out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 (added to, not emptied)
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise ModelLoadError(
                f"the vLLM server exited with status {proc.returncode}"
                + (f"; see {log}" if log else "")
            )
        try:
            with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(2)
    stop_server(proc)
    raise ModelLoadError(f"the vLLM server did not answer within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen, timeout: float = 60) -> int:
    """Stop a server of :func:`start_vllm_server` and every process it started (SIGTERM to its
    process group, SIGKILL after ``timeout`` seconds); its exit status."""
    import signal

    def group_alive() -> bool:
        return bool(group_members(proc.pid))

    if group_alive():
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + timeout
        while time.time() < deadline and (proc.poll() is None or group_alive()):
            time.sleep(0.2)
        if group_alive():  # the engine's processes did not stop in time
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.returncode


def processes() -> list[tuple[int, str, int, int]]:
    """(pid, state, parent pid, process group) of every process, from Linux's ``/proc``
    (empty elsewhere)."""
    out = []
    proc = Path("/proc")
    for d in proc.iterdir() if proc.is_dir() else ():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out.append((int(d.name), fields[0], int(fields[1]), int(fields[2])))
    return out


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies, which a container's init may
    never reap, do not count); on systems without ``/proc``, whether the group answers."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    return [pid for pid, state, _, group in processes() if state != "Z" and group == pgid]
