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
run_name = "compositions"
atomic_run = "demo"
models = ["smollm2-135m-instruct"]
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]
targets = ["about/wn:06613686-n#wn:09835506-n", "about/wn:07037465-n#wn:09215664-n"]
seeds = [0]
n_target = 20
n_descendant = 10
n_specificity = 10
n_constituent = 0
n_composition = 0
max_new_tokens = 32
data_dir = ""
preset = "workbench"
technique_params = {}
executor = "local"
ray_address = ""
ray_workers = 2
detector = "refused_phrase"
n_boot = 1000
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "select_compositions"

# %%
import pandas as pd

from workbench.experiments import ExperimentConfig, Runner
from workbench.experiments.report import write_summary
from workbench.paths import project_path, run_path, runs_root
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.select import (
    plot_atomic_vs_compositions,
    plot_by_level,
    plot_technique_metrics,
)
from workbench.scoring.metrics import by_level, technique_table

config = ExperimentConfig(name=run_name, models=tuple(models), techniques=tuple(techniques),
                          targets=tuple(targets), seeds=tuple(seeds), n_target=n_target,
                          n_descendant=n_descendant, n_specificity=n_specificity,
                          n_constituent=n_constituent, n_composition=n_composition,
                          max_new_tokens=max_new_tokens, preset=preset,
                          data_dir=str(project_path(data_dir)) if data_dir else None,
                          technique_params=technique_params)
run_dir = run_path(run_name)

# %%
rows = Runner(config, executor=executor,
              **({"address": ray_address or None, "workers": ray_workers} if executor == "ray" else {})).run()
summary = write_summary(rows, run_dir / "summary.csv", detector)
summary

# %%
table = technique_table(rows, detector, n_boot=n_boot)
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
both = pd.concat([pd.read_parquet(atomic_path), rows], ignore_index=True) if atomic_path.is_file() else rows
kinds = technique_table(both, detector, n_boot=200, by=("model", "target_kind", "technique"))
save_run_figure(plot_atomic_vs_compositions(kinds), run_name, "vs_atomic")
kinds.round(3)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
