# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # SELECT: abstention from atomic concepts
#
# Each technique is applied to each target concept; the model then answers held-out questions
# about the target (abstention), its descendants (generalization) and its siblings and
# ancestors (specificity). Results: `runs/<run_name>/results.parquet` (one row per answer) and
# `runs/<run_name>/summary.csv`; figures in `runs/<run_name>/figures/` (copied to `figures/`
# with `export_figures=True`).
#
# `data_dir` picks the benchmark (empty: the shipped WordNet one; or a directory written by
# `python -m workbench taxonomy import-select`), `preset` the technique protocol (`workbench`
# or `select`), `technique_params` overrides per technique (`{"steering": {"strength": 0.8}}`).

# %% tags=["parameters"]
run_name = "demo"  # results go to runs/<run_name>/
models = ["smollm2-135m-instruct"]  # registered names, local paths or hub ids
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]  # base: the unmodified model
targets = ["wn:09411430-n", "wn:10560637-n", "wn:06613686-n"]  # river, scientist, movie (find ids: python -m workbench taxonomy find TEXT)
data_dir = ""  # benchmark directory; empty: the shipped WordNet one (or one written by import-select)
preset = "workbench"  # protocol: workbench defaults, or select (SELECT's code, setting by setting)
seeds = None  # None: the preset's (select: SELECT's five run seeds)
n_target = None  # target questions per cell (None: 20 under the workbench preset, else the preset's)
n_descendant = None  # descendant questions per cell (None: 10 under the workbench preset, else the preset's)
n_specificity = None  # sibling and ancestor questions per cell (None: 10 under the workbench preset, else the preset's)
n_constituent = 0  # for a composition target: questions about its constituents
n_composition = 0  # for an atomic target: questions about compositions it is part of
max_new_tokens = None  # generation budget (None: 32 under the workbench preset, else the preset's)
temperature = None  # sampling temperature (None: the preset's; select: 0.6)
top_p = None  # nucleus sampling mass (None: the preset's; select: 0.9)
do_sample = None  # sample instead of greedy decoding (None: the preset's; select: True)
early_stop = None  # stop an answer once a refusal has settled (None: the preset's; select: False)
technique_params = {}  # per-technique overrides, e.g. {"steering": {"strength": 0.8}}
executor = "local"  # run cells here (local) or on a Ray cluster (ray)
ray_address = ""  # Ray cluster address; empty: start a local one
ray_workers = 2  # Ray actors (each loads the model once)
detector = ""  # refusal column to score; empty: the preset's (select: refused_select_heuristic)
aggregate = ""  # over targets: bootstrap or select (per-seed means, t-interval); empty: the preset's
release_run = ""  # a run written by import-select-results (SELECT's released models) to draw beside this one
probe_knowledge = True  # run the IS-A probes for the generalization-error analysis
n_boot = 1000  # bootstrap resamples for the intervals
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "select_atomic"  # file name prefix of exported figures

# %%
from workbench.experiments import Runner
from workbench.experiments.notebook import notebook_run
from workbench.experiments.report import write_summary
from workbench.paths import run_path
from workbench.scoring.detectors import with_detector
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.select import (
    plot_against_release,
    plot_by_level,
    plot_generalization_errors,
    plot_technique_metrics,
    plot_universality,
)
from workbench.tables.select_compare import side_by_side, technique_summary, wide
from workbench.scoring.metrics import (
    by_level,
    generalization_errors,
    universality,
)

run = notebook_run(run_name, preset, models=models, techniques=techniques, targets=targets,
                   seeds=seeds, n_target=n_target, n_descendant=n_descendant,
                   n_specificity=n_specificity, max_new_tokens=max_new_tokens,
                   n_constituent=n_constituent, n_composition=n_composition,
                   temperature=temperature, top_p=top_p, do_sample=do_sample,
                   early_stop=early_stop, data_dir=data_dir, technique_params=technique_params,
                   detector=detector, aggregate=aggregate)
config, detector, aggregate = run.config, run.detector, run.aggregate
print(run.describe())
run_dir = run_path(run_name)

# %%
runner = Runner(config, executor=executor,
                **run.executor_options(executor, ray_address, ray_workers))
rows = with_detector(runner.run(), detector, progress=True)  # the probe's columns, if named
summary = write_summary(rows, run_dir / "summary.csv", detector)
if "answer_parsed" in rows:  # SELECT's CoT: a reply without an answer field is scored whole
    cot = rows[rows["answer_parsed"].notna()]
    print(f"chain of thought: {int((cot['answer_parsed'] == False).sum())} of {len(cot)} replies "  # noqa: E712
          "have no answer field (scored on the whole reply, as SELECT does)")
summary

# %% [markdown]
# ## Techniques table (mean over target concepts; 95% bootstrap intervals, or SELECT's
# t-intervals over concepts with `aggregate="select"`)

# %%
table = technique_summary(rows, detector, aggregate, n_boot=n_boot)
table.to_csv(run_dir / "techniques.csv", index=False, float_format="%.4f")
table.round(3)

# %%
save_run_figure(plot_technique_metrics(table, "atomic concepts", n_boot), run_name, "techniques")

# %% [markdown]
# ## Beside SELECT's released models
#
# With `release_run` (a run written by `python -m workbench import-select-results`), this run's
# metrics next to those of SELECT's six models, all aggregated SELECT's way under the same
# detector: over this run's targets, and over every concept the release has.

# %%
if release_run:
    import pandas as pd

    released = with_detector(pd.read_parquet(run_path(release_run) / "results.parquet"), detector,
                             progress=True)
    beside = side_by_side(rows, released, detector)
    beside.to_csv(run_dir / "beside_release.csv", index=False, float_format="%.4f")
    same = beside["concepts"] == "same"
    if not (same & (beside["source"] == "release")).any():
        print("the release has none of this run's targets: comparing with all its concepts")
    save_run_figure(plot_against_release(beside, "same" if (same & (beside["source"] == "release")).any()
                                         else "all"), run_name, "beside_release")
    display(wide(beside))

# %% [markdown]
# ## Variation across taxonomy levels

# %%
levels = by_level(rows, detector)
save_run_figure(plot_by_level(levels), run_name, "levels")
levels.round(3)

# %% [markdown]
# ## Generalization errors: does the model know that a descendant is a kind of the target?

# %%
if probe_knowledge:
    import json

    import pandas as pd

    from workbench.experiments.probes import probe_descendants
    from workbench.backends import load_model

    probes, calibrations = [], {}
    for m in models:
        rows_m, calibrations[m] = probe_descendants(load_model(m), runner.bench, targets, m)
        probes.append(rows_m)
    probes = pd.concat(probes, ignore_index=True)
    probes.to_csv(run_dir / "isa_probes.csv", index=False)
    (run_dir / "isa_probe_calibration.json").write_text(
        json.dumps({m: c.to_dict() for m, c in calibrations.items()}, indent=1))
    for m, c in calibrations.items():
        print(f"{m}: IS-A probe {'informative' if c.informative else 'UNINFORMATIVE: ' + c.reason} "
              f"(control AUROC {c.auroc:.2f}; calibrated, it calls {c.true_called_false:.0%} of "
              f"known-true controls false and {c.false_called_true:.0%} of known-false ones true)")
    errors = generalization_errors(rows, probes, detector)
    save_run_figure(plot_generalization_errors(errors), run_name, "generalization_errors")
    display(errors)

# %% [markdown]
# ## Universality: do techniques find the same concepts hard?

# %%
corr = universality(rows, "abstention", detector)
save_run_figure(plot_universality(corr, n_concepts=rows["target"].nunique()), run_name, "universality")
corr.round(2)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
