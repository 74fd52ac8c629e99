"""Command line: ``python -m workbench <command>``.

    demo                      run the main experiment notebook on the embedded model
    grid CONFIG.yaml [...]    run an experiment grid (locally, or on Ray: --executor ray)
    run NOTEBOOK [-p k=v ...]  run one notebook headless (parameters checked first)
    params NOTEBOOK           list a notebook's parameters and defaults
    reproduce                 run every notebook in order
    models                    list the registered models
    generate QUESTION ...     answer questions with a model (a quick check)
    import-select-results RELEASE --benchmark DIR --run NAME
                              SELECT's released results as a run, with SELECT's table
    refusal-eval CONFIG.yaml  the refusal suite (seed 001's datasets, c(x)); resumable
    verify [--kernels other]  rerun a fixed slice of the main experiment and compare every
                              answer with the recorded reference (exit 1 when one differs)

Errors caused by bad input print one line (``error: ...``) and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys

from workbench.errors import run_command

#: Every notebook, in the order ``reproduce`` runs them.
ALL_NOTEBOOKS = [
    "00_build_taxonomy",
    "00_quickstart",
    "01_select_abstention",
    "02_select_compositions",
    "03_refusal_judge",
    "04_unknown_concepts",
    "05_categorical_editing",
    "06_refusal_suite",
    "10_steering_inspector",
    "11_steering_gate",
]


def _cmd_demo(args) -> None:
    from workbench.experiments.demo import run_demo

    # the demo's figures are the README's: exported to figures/; its numbers are compared with
    # the recorded ones that the README's table is filled from
    print(run_demo().text())


def _cmd_grid(args) -> None:
    from workbench.experiments import ExperimentConfig, Runner

    config = ExperimentConfig.from_yaml(args.config)
    options = {}
    if args.executor == "ray":
        resources = {"CPU": args.cpus_per_worker}
        if args.gpus_per_worker:
            resources["GPU"] = args.gpus_per_worker
        options = {
            "address": args.address,
            "workers": args.workers,
            "resources_per_worker": resources,
            "store": args.store,
            "imports": tuple(args.imports),
        }
    runner = Runner(config, root=args.root, executor=args.executor, **options)
    table = runner.run()
    print(f"{len(table)} rows in {runner.run_dir / 'results.parquet'}")


def _cmd_run(args) -> None:
    from workbench.notebooks import parse_parameter, run_notebook

    params = dict(parse_parameter(p) for p in args.parameter)
    out = run_notebook(args.notebook, params, run_dir=args.run_dir, log_output=args.log_output)
    print(f"executed notebook: {out}")


def _cmd_params(args) -> None:
    from workbench.notebooks import notebook_parameters, parameter_choices

    for p in notebook_parameters(args.notebook).values():
        choices = parameter_choices(p.name)
        extra = f"; one of: {', '.join(map(str, choices))}" if choices else ""
        print(
            f"{p.name} = {p.default!r}  ({p.inferred_type}{extra}){'  # ' + p.help if p.help else ''}"
        )


def _cmd_reproduce(args) -> None:
    from workbench.notebooks import notebook_parameters, run_notebook

    for name in ALL_NOTEBOOKS:  # reproducing the README: figures exported to figures/
        print(f"== {name}", flush=True)
        export = {"export_figures": True} if "export_figures" in notebook_parameters(name) else {}
        print(f"executed notebook: {run_notebook(name, export)}")


def _cmd_models(args) -> None:
    from workbench.models import REGISTRY

    for spec in REGISTRY.values():
        print(f"{spec.name:28s} {spec.description}  [{spec.distribution}=={spec.version}]")
    print("Any Hugging Face model id or local model directory works too.")


def _cmd_generate(args) -> None:
    from workbench.backends import load_model
    from workbench.generation import GenerationConfig, generate

    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    cfg = GenerationConfig(max_new_tokens=args.max_new_tokens, system_prompt=args.system)
    for q, g in zip(args.question, generate(lm, args.question, cfg, progress=False)):
        print(f"Q: {q}\nA: {g.text}\n")


def _cmd_import_select_results(args) -> None:
    import pandas as pd

    from workbench.scoring.metrics import select_wide
    from workbench.select.results import (
        TECHNIQUES,
        check_detector,
        detector_functions,
        import_select_results,
        select_results_table,
    )
    from workbench.taxonomy import load_benchmark

    bench = load_benchmark(args.benchmark)
    check_detector(args.detector, list(detector_functions(bench)))  # before the import
    report = import_select_results(
        args.release,
        bench,
        run_name=args.run,
        root=args.root,
        models=args.models or None,
        progress=not args.quiet,
        workers=args.workers,
        allow_partial=args.allow_partial,
    )
    print(report.summary())
    table = select_results_table(report.results_path, args.detector)
    print(f"\nSELECT's aggregation of {args.detector} (mean ± 95% t-interval over concepts):")
    with pd.option_context(
        "display.width", 200, "display.max_columns", None, "display.max_rows", None
    ):
        print(
            select_wide(table, order=list(TECHNIQUES.values())).to_string()
            if len(table)
            else "(no rows)"
        )


def _cmd_refusal_eval(args) -> None:
    from workbench.refusal.suite import run_config_file

    run_config_file(args.config, name=args.name, limit=args.limit, progress=not args.quiet)


def _cmd_verify(args) -> int:
    from workbench.experiments.verify import verify, verify_on_other_kernels

    if args.kernels == "other":
        return verify_on_other_kernels(
            (["--reference", args.reference] if args.reference else [])
            + (["--record"] if args.record else [])
        )
    return verify(args.reference, write=args.record)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="workbench", description="Abstention Workbench")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the main experiment on the embedded model").set_defaults(
        fn=_cmd_demo
    )
    grid = sub.add_parser("grid", help="run an experiment grid from a YAML config")
    grid.add_argument("config", help="YAML file of ExperimentConfig fields")
    grid.add_argument("--executor", choices=("local", "ray"), default="local")
    grid.add_argument(
        "--address",
        default=None,
        help="Ray cluster (auto, ray://host:10001); default: start a local one",
    )
    grid.add_argument("--workers", type=int, default=2, help="Ray actors")
    grid.add_argument("--cpus-per-worker", type=float, default=1.0)
    grid.add_argument("--gpus-per-worker", type=float, default=0.0)
    grid.add_argument("--store", default=None, help="artifact directory shared by the workers")
    grid.add_argument(
        "--imports",
        nargs="*",
        default=[],
        help="modules each worker imports (your own registered techniques)",
    )
    grid.add_argument("--root", default=None, help="runs directory (default runs/)")
    grid.set_defaults(fn=_cmd_grid)
    run = sub.add_parser("run", help="run one notebook headless")
    run.add_argument("notebook")
    run.add_argument("-p", "--parameter", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--run-dir", default=None)
    run.add_argument(
        "--log-output", action="store_true", help="stream the cells' output (progress) here"
    )
    run.set_defaults(fn=_cmd_run)
    params = sub.add_parser("params", help="list a notebook's parameters")
    params.add_argument("notebook")
    params.set_defaults(fn=_cmd_params)
    sub.add_parser("reproduce", help="run every notebook").set_defaults(fn=_cmd_reproduce)
    sub.add_parser("models", help="list registered models").set_defaults(fn=_cmd_models)
    gen = sub.add_parser("generate", help="answer questions with a model")
    gen.add_argument("question", nargs="+")
    gen.add_argument("--model", default=None)
    gen.add_argument("--device", default="auto")
    gen.add_argument("--dtype", default="auto")
    gen.add_argument("--system", default=None)
    gen.add_argument("--max-new-tokens", type=int, default=64)
    gen.set_defaults(fn=_cmd_generate)
    isr = sub.add_parser(
        "import-select-results",
        help="import SELECT's released results as a run and print SELECT's table",
    )
    isr.add_argument("release", help="clone of SELECT's repository (with results/ and config/)")
    isr.add_argument(
        "--benchmark",
        required=True,
        help="the benchmark imported from it (python -m workbench.taxonomy import-select)",
    )
    isr.add_argument("--run", required=True, help="run name: writes runs/<NAME>/results.parquet")
    isr.add_argument(
        "--models", nargs="*", default=[], help="SELECT aliases or model ids (default: all)"
    )
    isr.add_argument("--root", default=None, help="runs directory (default runs/)")
    isr.add_argument("--workers", type=int, default=None, help="processes (default: up to 2)")
    isr.add_argument(
        "--detector",
        default="select_flag_heuristic",
        help="column the table aggregates (default: SELECT's stored heuristic flag)",
    )
    isr.add_argument("--quiet", action="store_true", help="no line per file")
    isr.add_argument(
        "--allow-partial",
        action="store_true",
        help="import what is there when files are absent or unreadable (recorded "
        "in every row's release_load)",
    )
    isr.set_defaults(fn=_cmd_import_select_results)
    ref = sub.add_parser(
        "refusal-eval", help="run (or resume) the refusal suite from a YAML config"
    )
    ref.add_argument(
        "config", help="YAML file of SuiteConfig fields (e.g. configs/refusal_eval.yaml)"
    )
    ref.add_argument("--name", default=None, help="run name (default: the config's)")
    ref.add_argument("--limit", type=int, default=None, help="at most N prompts per dataset")
    ref.add_argument("--quiet", action="store_true", help="no progress lines")
    ref.set_defaults(fn=_cmd_refusal_eval)
    ver = sub.add_parser(
        "verify",
        help="rerun a fixed slice of the main experiment; compare with the recorded answers",
    )
    ver.add_argument(
        "--kernels",
        choices=("native", "other"),
        default="native",
        help="other: in a fresh process on narrower CPU kernels (another machine's stand-in)",
    )
    ver.add_argument("--reference", default=None, help="default data/reference/verify.json")
    ver.add_argument("--record", action="store_true", help="write the reference instead")
    ver.set_defaults(fn=_cmd_verify)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.fn, args)


if __name__ == "__main__":
    sys.exit(main())
