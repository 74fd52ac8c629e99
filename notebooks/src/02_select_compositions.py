# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # SELECT: abstention from compositions of concepts
#
# The same evaluation for compositions ("movies about athletes"): abstention on the
# composition's questions, generalization to its descendants in the composition taxonomy,
# specificity on its siblings and ancestors; then atomic concepts against compositions, using
# the atomic run (`atomic_run`) when it exists. `n_constituent` adds SELECT's check that a
# model abstaining from a composition still answers about its constituent concepts.

# %% tags=["parameters"]
run_name = "compositions"  # results go to runs/<run_name>/
atomic_run = "demo"  # a notebook-01 run to compare atomic concepts against compositions
models = ["smollm2-135m-instruct"]  # registered names, local paths or hub ids
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]  # base: the unmodified model
targets = ["about/wn:06613686-n#wn:09835506-n", "about/wn:07037465-n#wn:09215664-n"]  # movies about ballplayers, musical compositions about bays
data_dir = ""  # benchmark directory; empty: the shipped WordNet one (or one written by import-select)
preset = "workbench"  # protocol: workbench defaults, or select (SELECT's code, setting by setting)
seeds = None  # None: the preset's (select: SELECT's five run seeds)
n_target = None  # target questions per cell (None: 20 under the workbench preset, else the preset's)
n_descendant = None  # descendant questions per cell (None: 10 under the workbench preset, else the preset's)
n_specificity = None  # specificity-set questions per cell (None: 10 under the workbench preset, else the preset's)
n_constituent = 0  # questions about each composition's constituent concepts
n_composition = 0  # for atomic targets: questions about compositions they are part of
max_new_tokens = None  # generation budget (None: 32 under the workbench preset, else the preset's)
temperature = None  # sampling temperature (None: the preset's)
top_p = None  # nucleus sampling mass (None: the preset's)
do_sample = None  # sample instead of greedy decoding (None: the preset's)
early_stop = None  # stop an answer once a refusal has settled (None: the preset's)
technique_params = {}  # per-technique overrides, e.g. {"steering": {"strength": 0.8}}
executor = "local"  # run cells here (local) or on a Ray cluster (ray)
ray_address = ""  # Ray cluster address; empty: start a local one
ray_workers = 2  # Ray actors (each loads the model once)
detector = ""  # refusal column to score; empty: the preset's (select: refused_select_heuristic)
aggregate = ""  # over targets: bootstrap or select; empty: the preset's
n_boot = 1000  # bootstrap resamples for the intervals
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "select_compositions"  # file name prefix of exported figures

# %%
import pandas as pd

from workbench.experiments import Runner
from workbench.experiments.notebook import notebook_run
from workbench.experiments.report import write_summary
from workbench.paths import run_path, runs_root
from workbench.scoring.detectors import with_detector
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.select import (
    plot_atomic_vs_compositions,
    plot_by_level,
    plot_technique_metrics,
)
from workbench.scoring.metrics import by_level, technique_table
from workbench.tables.select_compare import technique_summary

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
rows = Runner(config, executor=executor,
              **run.executor_options(executor, ray_address, ray_workers)).run()
rows = with_detector(rows, detector, progress=True)  # the probe's columns, if named
summary = write_summary(rows, run_dir / "summary.csv", detector)
if "answer_parsed" in rows:  # SELECT's CoT: a reply without an answer field is scored whole
    cot = rows[rows["answer_parsed"].notna()]
    print(f"chain of thought: {int((cot['answer_parsed'] == False).sum())} of {len(cot)} replies "  # noqa: E712
          "have no answer field (scored on the whole reply, as SELECT does)")
summary

# %%
table = technique_summary(rows, detector, aggregate, n_boot=n_boot)
table.to_csv(run_dir / "techniques.csv", index=False, float_format="%.4f")
save_run_figure(plot_technique_metrics(table, "compositions", n_boot), run_name, "techniques")
table.round(3)

# %%
levels = by_level(rows, detector)
save_run_figure(plot_by_level(levels), run_name, "levels")
levels.round(3)

# %% [markdown]
# ## Atomic concepts against compositions

# %%
atomic_path = runs_root() / atomic_run / "results.parquet"
both = (pd.concat([with_detector(pd.read_parquet(atomic_path), detector), rows], ignore_index=True)
        if atomic_path.is_file() else rows)
kinds = technique_table(both, detector, n_boot=200, by=("model", "target_kind", "technique"))
save_run_figure(plot_atomic_vs_compositions(kinds), run_name, "vs_atomic")
kinds.round(3)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
