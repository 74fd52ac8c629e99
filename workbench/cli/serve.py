"""``serve MODEL [--steering]``: vLLM's OpenAI-compatible server on a model
(:func:`workbench.backends.serve.start_vllm_server`), for the HTTP back end and other clients."""

from __future__ import annotations

import argparse


def _serve(args) -> int:
    from workbench.backends.serve import start_vllm_server
    from workbench.models.loading import resolve_source

    proc, url = start_vllm_server(
        args.model,
        args.name,
        dtype=args.dtype,
        port=args.port,
        steering=args.steering,
        registry=args.registry,
    )
    src_dir = resolve_source(args.model).load_from
    print(
        f"serving: load_model('openai:{args.name}@{url}', options={{'tokenizer': '{src_dir}'}})",
        flush=True,
    )
    if args.steering:
        print(
            f"steering: POST {url}/abstainers registers an abstainer; a request asks for one "
            "with extra_body={'steering': {'abstainer': NAME}}",
            flush=True,
        )
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return 0


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
    ap.set_defaults(fn=_serve)
