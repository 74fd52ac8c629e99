"""Experiments and notebooks: ``demo``, ``grid``, ``run``, ``params``, ``reproduce``,
``refusal-eval``, ``verify`` and ``tables``."""

from __future__ import annotations

import argparse

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


def _demo(args) -> None:
    from workbench.cli.demo import run_demo

    # the demo's figures are the README's: exported to figures/; its numbers are compared with
    # the recorded ones that the README's table is filled from
    print(run_demo().text())


def _grid(args) -> None:
    import importlib

    from workbench.backends import check_model, check_new_tokens
    from workbench.errors import ConfigError, Interrupted, WorkbenchError
    from workbench.experiments import ExperimentConfig, Runner

    # the modules the Ray workers import, imported here first: what they register (a
    # technique of your own) is known to the config, and a module that does not import is
    # one line here, not a failure in each worker
    for module in args.imports:
        try:
            importlib.import_module(module)
        except Exception as e:  # ImportError, a SyntaxError in it, whatever its code raises
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ConfigError(
                f"--imports names {module!r}, which this python cannot import ({first})"
            ) from None
    config = ExperimentConfig.from_yaml(args.config)
    for i, model in enumerate(config.models):  # before any run folder is made
        try:
            check_model(model)
        except WorkbenchError as e:
            raise ConfigError(f"config field 'models[{i}]': {e}") from None
        assert config.max_new_tokens is not None  # the preset gave it
        check_new_tokens(model, config.max_new_tokens, "config field 'max_new_tokens'")
    ray_only = [
        f"--{name.replace('_', '-')}"
        for name in ("address", "workers", "cpus_per_worker", "gpus_per_worker", "store")
        if getattr(args, name) is not None
    ]
    if ray_only and args.executor != "ray":  # they were ignored: the grid ran here, on Ray's
        raise ConfigError(f"{', '.join(ray_only)} need --executor ray (the grid runs here without)")
    workers = 2 if args.workers is None else args.workers
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if args.time_budget is not None and not args.time_budget > 0:
        raise ConfigError(f"--time-budget must be above 0 minutes, got {args.time_budget:g}")
    options = {}
    if args.executor == "ray":
        resources = {"CPU": 1.0 if args.cpus_per_worker is None else args.cpus_per_worker}
        if args.gpus_per_worker:
            resources["GPU"] = args.gpus_per_worker
        options = {
            "address": args.address,
            "workers": workers,
            "resources_per_worker": resources,
            "store": args.store,
            "imports": tuple(args.imports),
        }
    budget = args.time_budget * 60 if args.time_budget is not None else None
    if args.executor == "ray":  # before the run folder: a dead address once hung for minutes
        from workbench.experiments.executors import RayExecutor

        RayExecutor(address=args.address).check_address()
    runner = Runner(config, root=args.root, executor=args.executor, time_budget=budget, **options)
    try:
        table = runner.run()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the cells written so far stay
        done = len(list((runner.run_dir / "cells").glob("*.jsonl")))
        raise Interrupted(
            f"interrupted: {done} of {len(runner.cells())} cells are kept in {runner.run_dir}; "
            f"the same command (grid {args.config}) goes on from there"
        ) from None
    print(f"{len(table)} rows in {runner.run_dir / 'results.parquet'}")


def _run(args) -> None:
    from workbench.notebooks import parse_parameter, run_notebook

    params = dict(parse_parameter(p) for p in args.parameter)
    out = run_notebook(args.notebook, params, run_dir=args.run_dir, log_output=args.log_output)
    print(f"executed notebook: {out}")


def _params(args) -> None:
    from workbench.notebooks import notebook_parameters, parameter_choices

    for p in notebook_parameters(args.notebook).values():
        choices = parameter_choices(p.name)
        extra = f"; one of: {', '.join(map(str, choices))}" if choices else ""
        print(
            f"{p.name} = {p.default!r}  ({p.inferred_type}{extra}){'  # ' + p.help if p.help else ''}"
        )


def _reproduce(args) -> None:
    from workbench.notebooks import notebook_parameters, run_notebook

    for name in ALL_NOTEBOOKS:  # reproducing the README: figures exported to figures/
        print(f"== {name}", flush=True)
        export = {"export_figures": True} if "export_figures" in notebook_parameters(name) else {}
        print(f"executed notebook: {run_notebook(name, export)}")


def _refusal_eval(args) -> None:
    from workbench.refusal.suite import run_config_file

    run_config_file(args.config, name=args.name, limit=args.limit, progress=not args.quiet)


def _verify(args) -> int:
    from workbench.experiments.verify import REFERENCE, verify, verify_on_other_kernels

    if args.record:  # where the new reference goes, before the slice's minutes of work
        from workbench.paths import check_writable_file, project_path

        check_writable_file(args.reference or project_path(str(REFERENCE)), "the --reference file")
    if args.kernels == "other":
        return verify_on_other_kernels(
            (["--reference", args.reference] if args.reference else [])
            + (["--record"] if args.record else [])
        )
    return verify(args.reference, write=args.record)


def _tables(args) -> int:
    from workbench.tables.measured import fill_pages, shown, stale

    if args.check:
        bad = stale()
        for line in bad:
            print(f"stale: {line}")
        print(f"{len(bad)} measured table(s) differ from their records" if bad else "up to date")
        return 1 if bad else 0
    for page in fill_pages():
        print(f"filled {shown(page)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("demo", help="run the main experiment on the embedded model").set_defaults(
        fn=_demo
    )
    grid = sub.add_parser("grid", help="run an experiment grid from a YAML config")
    grid.add_argument("config", help="YAML file of ExperimentConfig fields")
    grid.add_argument("--executor", choices=("local", "ray"), default="local")
    grid.add_argument(
        "--address",
        default=None,
        help="Ray cluster (auto, ray://host:10001); default: start a local one",
    )
    grid.add_argument("--workers", type=int, default=None, help="Ray actors (default 2)")
    grid.add_argument("--cpus-per-worker", type=float, default=None, help="default 1")
    grid.add_argument("--gpus-per-worker", type=float, default=None, help="default 0")
    grid.add_argument("--store", default=None, help="artifact directory shared by the workers")
    grid.add_argument(
        "--imports",
        nargs="*",
        default=[],
        help="modules imported here and by each worker (your own registered techniques)",
    )
    grid.add_argument("--root", default=None, help="runs directory (default runs/)")
    grid.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="MINUTES",
        help="stop after the cell that ends past this many minutes (finished cells kept)",
    )
    grid.set_defaults(fn=_grid)
    run = sub.add_parser("run", help="run one notebook headless (parameters checked first)")
    run.add_argument("notebook")
    run.add_argument("-p", "--parameter", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--run-dir", default=None)
    run.add_argument(
        "--log-output", action="store_true", help="stream the cells' output (progress) here"
    )
    run.set_defaults(fn=_run)
    params = sub.add_parser("params", help="list a notebook's parameters and defaults")
    params.add_argument("notebook")
    params.set_defaults(fn=_params)
    sub.add_parser("reproduce", help="run every notebook, in order").set_defaults(fn=_reproduce)
    ref = sub.add_parser(
        "refusal-eval", help="run (or resume) the refusal suite from a YAML config"
    )
    ref.add_argument(
        "config", help="YAML file of SuiteConfig fields (e.g. configs/refusal_eval.yaml)"
    )
    ref.add_argument("--name", default=None, help="run name (default: the config's)")
    ref.add_argument("--limit", type=int, default=None, help="at most N prompts per dataset")
    ref.add_argument("--quiet", action="store_true", help="no progress lines")
    ref.set_defaults(fn=_refusal_eval)
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
    ver.set_defaults(fn=_verify)
    tab = sub.add_parser(
        "tables", help="fill the README's and the docs' tables of measured numbers from records"
    )
    tab.add_argument(
        "--check", action="store_true", help="only say which tables differ (exit 1 if any)"
    )
    tab.set_defaults(fn=_tables)
