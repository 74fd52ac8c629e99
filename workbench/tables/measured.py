"""Tables of measured numbers in the README and the docs, filled in from the runs that measured
them, so a number on a page cannot drift from its run.

A generated table sits in a Markdown page between two markers::

    <!-- measured: demo-techniques -->
    ...
    <!-- /measured -->

Each name is a function of :data:`TABLES` that renders its block from a record the run wrote
(``docs/results/*.json``: ``make demo``, ``benchmarks/generation.py --record``; the verify
reference ``data/reference/verify.json``), with the machine, dtype and versions that measured it.
``python -m workbench tables`` rewrites every block; ``--check`` lists the blocks whose
text is not what their record gives (a test runs it).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.paths import repo_root, write_text_atomic
from workbench.resumable import minutes

#: Records of measuring runs, tracked.
RESULTS_DIR = Path("docs/results")
#: The verify command's reference (also a record: its slice, machine and metrics).
VERIFY_REFERENCE = Path("data/reference/verify.json")
BLOCK = re.compile(
    r"(<!-- measured: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /measured -->)", re.S
)
#: How the README and docs name the techniques in tables.
TECHNIQUE_LABELS = {"base": "base (unmodified)"}


def read_record(path: Path) -> dict[str, Any]:
    """A record (JSON) under the checkout; one line naming the file when it is missing."""
    full = repo_root() / path
    if not full.is_file():
        raise WorkbenchError(f"no record {path}: run the command that measures it (see its page)")
    try:
        return json.loads(full.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise WorkbenchError(
            f"record {path} is damaged ({e}): restore it (git checkout {path}) or run the command "
            "that measures it again"
        ) from None


def write_record(path: Path, record: dict[str, Any]) -> Path:
    full = repo_root() / path
    full.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(full, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return full


def provenance(machine: dict[str, Any], command: str) -> str:
    """One line: the command, the machine, the dtype and numerics, the versions."""
    v = machine.get("versions", {})
    versions = ", ".join(
        f"{k} {v[k]}" for k in ("python", "torch", "transformers", "peft", "trl") if k in v
    )
    extra = f"; {minutes(machine['seconds'])}" if machine.get("seconds") else ""
    return (
        f"*Measured by `{command}` on {machine.get('cpu', '?')} ({machine.get('cores', '?')} "
        f"cores, {machine.get('kernels', '?')} kernels), dtype {machine.get('dtype', '?')} "
        f"({machine.get('numerics', '?')}){extra}; {versions}.*"
    )


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{float(x):.{digits}f}"


def demo_techniques() -> str:
    """The main experiment's techniques table (``make demo``)."""
    rec = read_record(RESULTS_DIR / "demo.json")
    head = (
        "| technique | abstention | generalization | specificity (siblings, ancestors) | far "
        "specificity | harmonic mean (abstention, specificity) |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {TECHNIQUE_LABELS.get(r['technique'], r['technique'])} | {_fmt(r['abstention'])} | "
        f"{_fmt(r['generalization'])} | {_fmt(r['specificity'])} | "
        f"{_fmt(r.get('far_specificity'))} | {_fmt(r['overall'])} |\n"
        for r in rec["techniques"]
    )
    return head + body + "\n" + provenance(rec["machine"], "make demo") + "\n"


def generation_speed() -> str:
    """Every generation path's speed, the reproducible default beside the fastest setting."""
    rec = read_record(RESULTS_DIR / "generation.json")
    head = (
        "| path | dtype | numerics | tokens/s | vs HF batched `generate`, same dtype | same "
        "greedy answers as the engine, same dtype |\n| --- | --- | --- | --- | --- | --- |\n"
    )
    body = ""
    for r in rec["paths"]:
        mark = " (default)" if r.get("default") else ""
        same = "" if r.get("same") is None else f"{r['same']}/{rec['prompts']}"
        body += (
            f"| {r['path']}{mark} | {r['dtype']} | {r['numerics']} | {r['tokens_per_s']:.1f} | "
            f"{r['vs_hf']:.2f} | {same} |\n"
        )
    cost = rec.get("reproducible_cost")
    note = (
        f"\nThe reproducible default against the fastest setting on this machine: "
        f"{cost['default']} at {cost['default_tps']:.1f} tokens/s, {cost['fastest']} at "
        f"{cost['fastest_tps']:.1f}: the default costs **{cost['ratio']:.2f}x** the fastest's "
        "time.\n"
        if cost
        else ""
    )
    machine = {**rec["machine"], "dtype": "per row", "numerics": "per row"}
    return head + body + note + "\n" + provenance(machine, rec["command"]) + "\n"


def verify_slice() -> str:
    """The verify command's reference: what the slice holds and its metrics per cell."""
    rec = read_record(VERIFY_REFERENCE)
    head = (
        "| technique | target | answers | abstention | generalization | specificity | far "
        "specificity |\n| --- | --- | --- | --- | --- | --- | --- |\n"
    )
    counts: dict[tuple, int] = {}
    for r in rec["rows"]:
        counts[(r["technique"], r["target"])] = counts.get((r["technique"], r["target"]), 0) + 1
    body = "".join(
        f"| {m['technique']} | {m['target']} | {counts.get((m['technique'], m['target']), 0)} | "
        f"{_fmt(m['abstention'])} | {_fmt(m['generalization'])} | {_fmt(m['specificity'])} | "
        f"{_fmt(m['far_specificity'])} |\n"
        for m in rec["metrics"]
    )
    machine = {**rec["machine"], "numerics": ", ".join(rec.get("numerics", []))}
    return head + body + "\n" + provenance(machine, "python -m workbench verify --record") + "\n"


def invariance() -> str:
    """Greedy answers across batch sizes and CPU kernels, per dtype."""
    rec = read_record(RESULTS_DIR / "invariance.json")
    n = rec["prompts"]

    def of(x: int | None) -> str:
        return "not run" if x is None else f"{x}/{n}"

    head = (
        "| dtype | numerics | batch 16 vs 64 | batch 1 vs 64 | other CPU kernels vs this CPU's "
        "| largest first-token logit difference, batch 1 vs 64 |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r['dtype']} | {r['numerics']} | {of(r['batch_16'])} | {of(r['batch_1'])} | "
        f"{of(r['other_kernels'])} ({r['other_kernels_name']} against "
        f"{rec['machine'].get('kernels')}) | {r['logit_gap']:.1e} |\n"
        for r in rec["rows"]
    )
    machine = {**rec["machine"], "dtype": "per row", "numerics": "per row"}
    return head + body + "\n" + provenance(machine, rec["command"]) + "\n"


#: Every generated table, by the name its markers give.
def steering_speed() -> str:
    """Conditional steering on each engine: steered and unsteered tokens/s, their ratio, the
    speed against a compiled plain vLLM engine, and how many answers equal the engine's."""
    rec = read_record(RESULTS_DIR / "steering.json")
    n = rec["prompts"]

    def same(r) -> str:
        if r.get("reference"):
            return "the reference"
        return ", ".join(
            "-" if x is None else f"{x}/{n}" for x in (r.get("same_unsteered"), r["same"])
        )

    def num(x, suffix: str = "", digits: int = 1) -> str:
        return "-" if x is None else f"{x:.{digits}f}{suffix}"

    head = (
        "| path | unsteered tokens/s | steered tokens/s | steered / unsteered time per token | "
        "unsteered / steered speed against compiled plain vLLM | same answers as the engine "
        "(unsteered, steered) |\n| --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r['path']} | {num(r['unsteered_tps'])} | {num(r['steered_tps'])} | "
        f"{num(r['ratio'], 'x', 2)} | "
        f"{num(r.get('unsteered_vs_plain'), 'x', 2)} / {num(r.get('steered_vs_plain'), 'x', 2)} | "
        f"{same(r)} |\n"
        for r in rec["paths"]
    )
    note = (
        f"\n{n} prompts, greedy, {rec['max_new_tokens']} new tokens, the "
        f"`{rec['concept']}` abstainer's gate fired on {rec['fired']}; each row is the fastest of "
        f"{rec['repeats']} interleaved unsteered and steered passes on one engine, after a warm-up"
    )
    for group in sorted({tuple(r["group"]) for r in rec["paths"] if r.get("group")}):
        note += (
            f"; {' and '.join(group)} were loaded side by side, their passes alternating (each "
            "round's first engine the other round's last)"
        )
    paired = next((r for r in rec["paths"] if r.get("unsteered_vs_plain_rounds")), None)
    if paired is not None:
        rounds = paired["unsteered_vs_plain_rounds"]
        note += (
            f"; round by round, unsteered requests on the {paired['path'].removeprefix('vLLM ')} "
            f"engine ran at {statistics.median(rounds):.2f}x the plain engine's speed (median of "
            f"{len(rounds)} paired rounds, {min(rounds):.2f}x-{max(rounds):.2f}x)"
        )
    if any(r.get("new_prompts") for r in rec["paths"]):
        note += (
            "; rows with prompts new to the prefix cache put a mark of each pass's own in front "
            "of every question (their answers are to other prompts than the engine's: not "
            "compared)"
        )
    note += ".\n"
    return head + body + note + "\n" + provenance(rec["machine"], rec["command"]) + "\n"


def steered_step_costs(r: dict) -> dict[str, Any] | None:
    """Where a steered pass's time goes beside an unsteered pass of the same engine, from
    their engine steps (``benchmarks/vllm_steering.py``: per pass the count, the first step,
    the second, a decoding step's median and their sum): each a median over the rounds of the
    steered pass's value minus the unsteered pass's of its round. ``gate_s``: the first step's
    extra (where the gates are read: an eager step on a compiled engine); ``restart_s``: the
    second step's (the prompts whose gate fired start again, steered: their uncached tails);
    ``more_s``: the steps more, at a decoding step's time; ``rest_s``: what is left. None for
    a row without steps of both kinds (the server's, the engine's)."""
    steps = r.get("steps") or {}
    un, st = steps.get("unsteered"), steps.get("steered")
    if not un or not st:
        return None
    med = statistics.median
    pairs = list(zip(un, st))
    decode = med(u[3] for u in un)
    extra = med(s[4] - u[4] for u, s in pairs)
    gate = med(s[1] - u[1] for u, s in pairs)
    restart = med(s[2] - u[2] for u, s in pairs)
    more = med(s[0] - u[0] for u, s in pairs) * decode
    return {
        "steps": (med(u[0] for u in un), med(s[0] for s in st)),
        "decode_s": decode,
        "unsteered_s": med(u[4] for u in un),
        "extra_s": extra,
        "gate_s": gate,
        "restart_s": restart,
        "more_s": more,
        "rest_s": extra - gate - restart - more,
    }


def _signed(x: float) -> str:
    return f"{round(x, 2) + 0.0:+.2f} s"  # + 0.0: no "-0.00"


def _steps_pair(costs: dict[str, Any]) -> str:
    return " / ".join(f"{n:g}" for n in costs["steps"])


def step_costs_line(costs: dict[str, Any]) -> str:
    """:func:`steered_step_costs` in one line."""
    share = costs["extra_s"] / costs["unsteered_s"]
    return (
        f"{_steps_pair(costs)} steps unsteered / steered; {_signed(costs['extra_s'])} on a "
        f"{costs['unsteered_s']:.2f} s pass ({share:+.1%}): the gates' step "
        f"{_signed(costs['gate_s'])}, the restarted prompts' step {_signed(costs['restart_s'])}, "
        f"the steps more {_signed(costs['more_s'])}, the rest {_signed(costs['rest_s'])} (a "
        f"decoding step {costs['decode_s']:.3f} s)"
    )


def steering_steps() -> str:
    """A steered pass's extra time on each in-process vLLM engine, step by step."""
    rec = read_record(RESULTS_DIR / "steering.json")
    rows = [(r, c) for r in rec["paths"] if (c := steered_step_costs(r)) is not None]
    head = (
        "| path | engine steps, unsteered / steered | unsteered pass | steered pass's extra | "
        "the gates' step | the restarted prompts' step | the steps more | the rest |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r['path']} | {_steps_pair(c)} | {c['unsteered_s']:.2f} s | "
        f"{_signed(c['extra_s'])} ({c['extra_s'] / c['unsteered_s']:+.1%}) | "
        f"{_signed(c['gate_s'])} | {_signed(c['restart_s'])} | {_signed(c['more_s'])} | "
        f"{_signed(c['rest_s'])} |\n"
        for r, c in rows
    )
    note = (
        f"\nThe run of the steering speed table: each engine step timed around vLLM's "
        f"`LLMEngine.step` (scheduling, the forward pass, sampling); each value the median over "
        f"the {rec['repeats']} rounds of the steered pass's minus the unsteered pass's of the "
        "same round. The gates' step is a pass's first (every prompt's uncached tail), the "
        "restarted prompts' step its second (where the prompts whose gate fired start again, "
        "steered), the steps more are counted at a decoding step's time (median of the "
        "unsteered passes' steps after the second).\n"
    )
    return head + body + note


def one_copy() -> str:
    """Peak memory of a vllm: grid per technique against a plain vLLM engine."""
    rec = read_record(RESULTS_DIR / "one_copy.json")
    head = "| what runs on `vllm:` | peak resident memory | against a plain engine |\n| --- | --- | --- |\n"
    body = "".join(
        f"| {r['case']} | {r['peak_mib']:,} MiB | {r['ratio']:.2f}x |\n" for r in rec["rows"]
    )
    note = (
        "\n`plain`: an engine without the steering extension answering 40 questions; a "
        "technique: the verify slice's grid of that technique; `steering + second copy`: the "
        "steering grid with its vectors read on a Hugging Face copy of the weights, as before "
        f"vLLM read them. vLLM's engine in the measuring process, KV cache "
        f"{rec['machine']['kv_cache_gib']} GiB; each row a process of its own.\n"
    )
    return head + body + note + "\n" + provenance(rec["machine"], rec["command"]) + "\n"


def refusal_probe() -> str:
    """The learned refusal probe against the rule detectors, each model held out in turn."""
    rec = read_record(RESULTS_DIR / "refusal_probe.json")
    names = rec["detectors"]
    humans = any(r.get("annotators") is not None for r in rec["rows"])
    head = (
        "| source | held-out model | answers | "
        + " | ".join(f"{n} κ" for n in names)
        + " | probe precision / recall |"
        + (" annotators κ |" if humans else "")
        + "\n| --- | --- | --- | "
        + " | ".join("---" for _ in names)
        + " | --- |"
        + (" --- |" if humans else "")
        + "\n"
    )

    def cell(r, n):
        best = max((r[m] for m in names if r[m] is not None), default=None)
        v = _fmt(r[n], 3)
        return f"**{v}**" if r[n] is not None and r[n] == best else v

    body = "".join(
        f"| {r['source']} | {r['model']} | {r['n']:,} | "
        + " | ".join(cell(r, n) for n in names)
        + f" | {_fmt(r['probe precision'], 3)} / {_fmt(r['probe recall'], 3)} |"
        + (f" {_fmt(r.get('annotators'), 3)} |" if humans else "")
        + "\n"
        for r in rec["rows"]
    )
    part = rec["partial"]
    s = rec["settings"]
    dev = rec.get("dev_kappa") or {}
    combined = (
        f"`combined` is the phrase detector overruled where the probe is at least "
        f"{rec['overrule']:.3g} sure of the opposite, that value chosen on the dev halves"
        + (f" (κ {_fmt(dev['combined'], 3)} there)" if "combined" in dev else "")
        + ". "
        if "overrule" in rec
        else ""
    )
    any_part = next(iter(part.values()))
    note = (
        "\nEach model's answers predicted by a head trained on the other models' (prompt "
        "variants of one model held out together), scored on the test halves (the rule "
        "detectors were written against the dev halves); `pooled` is every one of them. "
        + combined
        + (
            "`annotators`: the source's two annotators' own labels against each other on the "
            "same answers, before their disagreements were resolved into the labels the "
            "detectors are scored against (how far two people agree). "
            if humans
            else ""
        )
        + f"Partial refusals ({any_part['tp'] + any_part['fn']} labelled, on the sources that "
        "label them): "
        + "; ".join(
            f"{n} precision {_fmt(v['precision'])}, recall {_fmt(v['recall'])}"
            for n, v in part.items()
        )
        + f". Expected calibration error of the probe's P(refused) {_fmt(rec['ece'], 3)} (10 "
        f"bins). Features: {s['model']}, blocks {', '.join(map(str, s['layers']))}, first "
        f"{s['max_tokens']} tokens"
        + (" read after the question in the chat template" if s.get("context") else "")
        + ", mean-pooled"
        + (
            f"; blocks and reading chosen on the dev halves (probe κ {_fmt(dev['probe'], 3)} there)"
            if "probe" in dev
            else ""
        )
        + f"; logistic regression C={s['c']}, balanced classes; at most {s['cap']:,} answers "
        f"per source and model. Scoring 1,000 answers from scratch: "
        f"{rec['seconds_per_1000']:.0f} s on this CPU.\n"
    )
    return head + body + note + "\n" + provenance(rec["machine"], rec["command"]) + "\n"


def probe_reliability() -> str:
    """The reliability diagram's numbers: predicted against observed refusal, per bin."""
    rec = read_record(RESULTS_DIR / "refusal_probe.json")
    head = (
        "| P(refused) | mean predicted | observed refusals | answers |\n| --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r['bin']} | {r['predicted']:.3f} | {r['observed']:.3f} | {r['n']:,} |\n"
        for r in rec["reliability"]
    )
    return head + body


TABLES: dict[str, Callable[[], str]] = {
    "demo-techniques": demo_techniques,
    "generation-speed": generation_speed,
    "verify-slice": verify_slice,
    "invariance": invariance,
    "steering-speed": steering_speed,
    "steering-steps": steering_steps,
    "one-copy": one_copy,
    "refusal-probe": refusal_probe,
    "probe-reliability": probe_reliability,
}


def shown(page: Path) -> str:
    return str(page.relative_to(repo_root())) if page.is_relative_to(repo_root()) else str(page)


def pages() -> list[Path]:
    root = repo_root()
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def fill(text: str, rendered: dict[str, str] | None = None, names: set[str] | None = None) -> str:
    """``text`` with every measured block (or those named in ``names``) replaced by its
    rendering; an unknown name fails."""
    rendered = {} if rendered is None else rendered

    def block(m: re.Match) -> str:
        name = m["name"]
        if name not in TABLES:
            raise WorkbenchError(f"unknown measured table {name!r}; known: {', '.join(TABLES)}")
        if names is not None and name not in names:
            return m.group(0)
        if name not in rendered:
            rendered[name] = TABLES[name]()
        return m.group(1) + rendered[name] + m.group(4)

    return BLOCK.sub(block, text)


OPEN = re.compile(r"<!-- measured: (?P<name>[^ ]*) -->")
CLOSE = "<!-- /measured -->"


def check_markers(text: str, page: Path | str) -> None:
    """Every ``<!-- measured: NAME -->`` has its ``<!-- /measured -->`` before the next block
    opens, and no end marker stands alone; otherwise one line naming the page and line (a block
    that does not close would otherwise swallow the text up to the next block's end)."""
    opened: tuple[int, str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = OPEN.search(line)
        if m:
            if opened is not None:
                raise WorkbenchError(
                    f"{page}:{opened[0]}: the measured table {opened[1]!r} has no {CLOSE} before "
                    f"the next table opens at line {n}; nothing was changed"
                )
            opened = (n, m["name"])
        elif CLOSE in line:
            if opened is None:
                raise WorkbenchError(
                    f"{page}:{n}: {CLOSE} closes no measured table; nothing was changed"
                )
            opened = None
    if opened is not None:
        raise WorkbenchError(
            f"{page}:{opened[0]}: the measured table {opened[1]!r} has no {CLOSE}; nothing was "
            "changed"
        )


def stale(paths: list[Path] | None = None) -> list[str]:
    """``page: table`` for every block whose text is not its record's rendering."""
    out: list[str] = []
    rendered: dict[str, str] = {}
    for page in pages() if paths is None else paths:
        text = page.read_text()
        check_markers(text, shown(page))
        for m in BLOCK.finditer(text):
            if fill(m.group(0), rendered) != m.group(0):
                out.append(f"{shown(page)}: {m['name']}")
    return out


def fill_pages(paths: list[Path] | None = None, names: set[str] | None = None) -> list[Path]:
    """Rewrite every page (default: the README and the docs) whose blocks (or those named in
    ``names``) differ from their records; the pages changed."""
    texts = {page: page.read_text() for page in (pages() if paths is None else paths)}
    for page, text in texts.items():  # every page checked before any is written
        check_markers(text, shown(page))
    changed: list[Path] = []
    rendered: dict[str, str] = {}
    for page, text in texts.items():
        new = fill(text, rendered, names)
        if new != text:
            write_text_atomic(page, new)
            changed.append(page)
    return changed
