"""Models: ``models`` (the registered ones) and ``generate`` (answer questions, a quick check)."""

from __future__ import annotations

import argparse


def _models(args) -> None:
    from workbench.models import MODELS

    for spec in MODELS.values():
        print(f"{spec.name:28s} {spec.description}  [{spec.distribution}=={spec.version}]")
    print("Any Hugging Face model id or local model directory works too.")


def _generate(args) -> None:
    from workbench.backends import check_model, check_new_tokens, load_model
    from workbench.errors import ConfigError
    from workbench.generation import GenerationConfig, generate
    from workbench.models.loading import default_model_name

    blank = next((i for i, q in enumerate(args.question, 1) if not q.strip()), None)
    if blank is not None:
        raise ConfigError(f"question {blank} is blank")
    if args.max_new_tokens < 1:  # before the model, whose load takes seconds to minutes
        raise ConfigError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    model = args.model or default_model_name()
    check_model(model)  # a name that cannot load, before the load's seconds to minutes
    check_new_tokens(model, args.max_new_tokens, "--max-new-tokens")
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, system_prompt=args.system)
    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    for q, g in zip(args.question, generate(lm, args.question, cfg, progress=False)):
        print(f"Q: {q}\nA: {g.text}\n")


def add_commands(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("models", help="list the registered models").set_defaults(fn=_models)
    gen = sub.add_parser("generate", help="answer questions with a model (a quick check)")
    gen.add_argument("question", nargs="+")
    gen.add_argument("--model", default=None)
    gen.add_argument("--device", default="auto")
    gen.add_argument("--dtype", default="auto")
    gen.add_argument("--system", default=None)
    gen.add_argument("--max-new-tokens", type=int, default=64)
    gen.set_defaults(fn=_generate)
