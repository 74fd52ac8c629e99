"""``serve MODEL [--steering]``: vLLM's OpenAI-compatible server on a model
(:func:`workbench.backends.serve.start_vllm_server`), for the HTTP back end and other clients."""

from __future__ import annotations

import argparse


def _serve(args) -> int:
    import os
    import signal
    from pathlib import Path

    from workbench.backends.serve import start_vllm_server, stop_server
    from workbench.errors import ConfigError
    from workbench.models.loading import resolve_source

    # before vLLM starts (half a minute or more), not in its traceback
    if args.port is not None and not 0 < args.port < 65536:
        raise ConfigError(f"--port must be between 1 and 65535, got {args.port}")
    if args.log_file:  # before vLLM starts; an existing log is added to, never emptied
        from workbench.paths import check_writable_file

        check_writable_file(args.log_file, "the --log-file")
    if args.registry and Path(args.registry).exists() and not Path(args.registry).is_dir():
        raise ConfigError(
            f"--registry must be a folder (of registered abstainers): {args.registry}"
        )
    # an empty key (``--api-key "$UNSET"``) would leave the server open, saying nothing
    for given, where in (
        (args.api_key, "--api-key"),
        (os.environ.get("VLLM_API_KEY"), "VLLM_API_KEY"),
    ):
        if given is not None and not given.strip():
            raise ConfigError(f"{where} is empty: give the key, or leave it out for an open server")
    key = args.api_key or os.environ.get("VLLM_API_KEY")
    proc, url = start_vllm_server(
        args.model,
        args.name,
        dtype=args.dtype,
        port=args.port,
        steering=args.steering,
        registry=args.registry,
        log=args.log_file or "stderr",
        api_key=key,
    )

    def stop(signum, frame):  # SIGTERM or Ctrl-C: out of the wait below, to its `finally`
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    src_dir = resolve_source(args.model).load_from
    print(
        f"serving: load_model('openai:{args.name}@{url}', options={{'tokenizer': '{src_dir}'}})"
        + (" (API key required: Authorization: Bearer KEY)" if key else ""),
        flush=True,
    )
    if args.steering:
        print(
            f"steering: POST {url}/abstainers registers an abstainer; a request asks for one "
            "with extra_body={'steering': {'abstainer': NAME}}",
            flush=True,
        )
    if args.log_file:
        print(f"log: {args.log_file}", flush=True)
    try:
        return proc.wait()
    finally:  # the whole server goes (vLLM's process group), and the port is freed
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        stop_server(proc)


def add_commands(sub: argparse._SubParsersAction) -> None:
    ap = sub.add_parser(
        "serve", help="start vLLM's OpenAI-compatible server on a model (optionally steering)"
    )
    ap.add_argument("model", help="registered name, directory or hub id")
    ap.add_argument("--name", default="model", help="the served model's name (openai:<name>@<url>)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument(
        "--steering", action="store_true", help="conditional steering per request (eager model)"
    )
    ap.add_argument("--registry", help="where registered abstainers are kept (with --steering)")
    ap.add_argument(
        "--api-key",
        help="every /v1 route (registering abstainers included) needs it; better: set "
        "VLLM_API_KEY, which other users of the machine cannot read from the process list",
    )
    ap.add_argument("--log-file", help="vLLM's log goes here (default: stderr)")
    ap.set_defaults(fn=_serve)
