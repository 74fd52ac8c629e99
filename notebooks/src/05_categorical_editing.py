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
# `editing_preset` picks the protocol: `workbench` (our settings) or `taxi` (taxi's code,
# setting by setting: summed log-probabilities, its way of filling query slots, FT and ROME at
# its blocks mapped to this model's depth, ROME with its KL term and second moment, its in-context
# wording read from the clone; the table "taxi's protocol, setting by setting" in docs/taxi.md).
#
# `taxi_file` may name taxi's released `datasets/edits-evaluation.json` inside the user's clone
# of derekpowell/taxi: its stale rows are counted and, with `fix_stale`, corrected from the
# clone's taxonomy TSVs; `edits_per_group` edits are sampled per superordinate category.

# %% tags=["parameters"]
run_name = "editing"  # results go to runs/<run_name>/
model = "smollm2-135m-instruct"  # registered name, local path or hub id
editing_preset = "workbench"  # protocol: workbench (our settings) or taxi (taxi's code, setting by setting)
editors = ["none", "ike", "ft", "rome"]  # editing methods: none (unedited), ike, ft, rome
edits_per_group = 2  # edits sampled per superordinate category (0: all)
taxi_file = ""  # taxi's released edits-evaluation.json in the user's clone (empty: the shipped categories file)
fix_stale = True  # correct the release's stale rows from the clone's taxonomy TSVs (when the clone has them)
subjects = ""  # subject spelling, the same in edits and queries: as_released or normalised (empty: the preset's)
layer = None  # decoder block FT and ROME edit (None: the preset's; taxi's blocks 21 and 5 of 32 map by relative depth)
normalization = ""  # choice scores: none (summed log-probability), token (mean per token) or byte; empty: the preset's
seed = 0  # seeds the sample of edits
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "editing"  # file name prefix of exported figures

# %%
import json
import random
import time

import pandas as pd

from workbench.editing import (
    build_edit_queries,
    edit_metrics,
    edits_from_categories,
    evaluate_editor,
    load_categories,
    load_taxi,
    normalise_subjects,
    sample_edits,
)
from workbench.editing.presets import check_against_clone, editors_for, run_settings
from workbench.editing.taxi import find_taxi_root, prepare_release, read_hparams, read_protocol
from workbench.backends import load_model
from workbench.paths import project_path, run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.editing import plot_consistency_by_group, plot_edit_metrics

settings = run_settings(editing_preset, normalization, subjects)
normalization, subjects = settings["normalization"], settings["subjects"]
run_dir = run_path(run_name)
record = {"preset": editing_preset, "model": model, **settings, "fix_stale": fix_stale}
protocol = None
if taxi_file:
    path = project_path(taxi_file)
    root = find_taxi_root(path)
    queries, report = prepare_release(load_taxi(path), root, fix_stale, subjects)
    print("\n".join(report.lines()))
    record["release"] = report.as_dict()
    if root is None:
        print("no clone around the file: taxi's wording unavailable, the workbench's is used")
    else:
        protocol = read_protocol(root)
        record["protocol_files"] = protocol.files
        drift = check_against_clone(read_hparams(root)) if editing_preset == "taxi" else []
        record["settings_drift"] = drift
        for line in drift:
            print("differs from the clone:", line)
    queries = sample_edits(queries, edits_per_group, seed)
else:
    data = load_categories()
    rng = random.Random(seed)
    all_edits = edits_from_categories(data)
    sample = []
    for group in data["groups"]:
        sample += rng.sample([e for e in all_edits if e.group == group], edits_per_group)
    queries = build_edit_queries(data, sample)
    if subjects == "normalised":
        queries = normalise_subjects(queries)
print(f"{queries['edit'].nunique()} edits, {len(queries)} queries")
lm = load_model(model)

# %%
chosen, record["editors"] = editors_for(editing_preset, editors, lm, protocol, layer)
for name, r in record["editors"].items():
    print(name, r.get("sources", {}))
scored, record["seconds"] = [], {}
for editor in chosen:
    start = time.perf_counter()
    scored.append(evaluate_editor(lm, editor, queries, normalization, progress=True, slots=settings["slots"]))
    record["seconds"][editor.name] = round(time.perf_counter() - start, 1)
(run_dir / "protocol.json").write_text(json.dumps(record, indent=2, default=str))
scored = pd.concat(scored, ignore_index=True)
scored.to_parquet(run_dir / "scored.parquet", index=False)
metrics = edit_metrics(scored)
metrics[["editor", "metric", "subset", "value", "n"]].to_csv(run_dir / "summary.csv", index=False, float_format="%.4f")
metrics[metrics["subset"] == "overall"].pivot(index="editor", columns="metric", values="value").round(3)

# %% [markdown]
# Forward queries only (taxi's main table): edit success, property success, invariance and
# consistency, overall and by typical against rare subjects.

# %%
forward = edit_metrics(scored[scored["direction"] == "forward"])
forward[["editor", "metric", "subset", "value", "n"]].to_csv(run_dir / "forward.csv", index=False, float_format="%.4f")
forward[forward["subset"].isin(["overall", "token_type=typical", "token_type=rare"])].pivot_table(
    index=["metric", "subset"], columns="editor", values="value", sort=False).round(3)

# %%
save_run_figure(plot_edit_metrics(metrics), run_name, "metrics")
save_run_figure(plot_consistency_by_group(metrics), run_name, "consistency_by_group")
metrics[metrics["subset"].str.startswith("token_type")].pivot_table(
    index=["editor", "subset"], columns="metric", values="value").round(3)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
