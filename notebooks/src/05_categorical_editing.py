# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Categorical knowledge editing (taxi-style)
#
# Each editor makes the model believe "a <subject> is a kind of <category>" for a sample of
# edits, one at a time, and restores the weights after each. Metrics against the unedited model
# and chance: edit success (the category query), consistency (properties that should change),
# invariance (properties that should not), property success (all property queries), each
# overall, typical against rare subjects, forward against reverse, per superordinate group.
#
# `taxi_file` may name taxi's released `datasets/edits-evaluation.json` (derekpowell/taxi): its
# queries are then used unchanged, `edits_per_group` edits sampled per superordinate category.

# %% tags=["parameters"]
run_name = "editing"  # results go to runs/<run_name>/
model = "smollm2-135m-instruct"  # registered name, local path or hub id
editors = ["none", "ike", "ft", "rome"]  # editing methods: none (unedited), ike, ft, rome
edits_per_group = 2  # edits sampled per superordinate category (0: all)
taxi_file = ""  # taxi's released edits-evaluation.json (empty: the shipped categories file)
layer = 4  # decoder block that FT and ROME edit
normalization = "token"  # choice scores: none (summed log-probability), token (mean per token) or byte (per byte)
seed = 0  # seeds the sample of edits
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "editing"  # file name prefix of exported figures

# %%
import random

import pandas as pd

from workbench.editing import (
    build_edit_queries,
    edit_metrics,
    edits_from_categories,
    evaluate_editor,
    get_editor,
    load_categories,
    load_taxi,
    sample_edits,
)
from workbench.models import load_model
from workbench.paths import project_path, run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.editing import plot_consistency_by_group, plot_edit_metrics

run_dir = run_path(run_name)
if taxi_file:
    queries = sample_edits(load_taxi(project_path(taxi_file)), edits_per_group, seed)
else:
    data = load_categories()
    rng = random.Random(seed)
    all_edits = edits_from_categories(data)
    sample = []
    for group in data["groups"]:
        sample += rng.sample([e for e in all_edits if e.group == group], edits_per_group)
    queries = build_edit_queries(data, sample)
print(f"{queries['edit'].nunique()} edits, {len(queries)} queries")
lm = load_model(model)

# %%
scored = []
for name in editors:
    kwargs = {"layer": layer} if name in ("ft", "rome") else {}
    scored.append(evaluate_editor(lm, get_editor(name, **kwargs), queries, normalization, progress=True))
scored = pd.concat(scored, ignore_index=True)
scored.to_parquet(run_dir / "scored.parquet", index=False)
metrics = edit_metrics(scored)
metrics[["editor", "metric", "subset", "value", "n"]].to_csv(run_dir / "summary.csv", index=False, float_format="%.4f")
metrics[metrics["subset"] == "overall"].pivot(index="editor", columns="metric", values="value").round(3)

# %%
save_run_figure(plot_edit_metrics(metrics), run_name, "metrics")
save_run_figure(plot_consistency_by_group(metrics), run_name, "consistency_by_group")
metrics[metrics["subset"].str.startswith("token_type")].pivot_table(
    index=["editor", "subset"], columns="metric", values="value").round(3)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
