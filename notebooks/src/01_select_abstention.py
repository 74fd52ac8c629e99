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
# `python -m workbench.taxonomy import-select`), `preset` the technique protocol (`workbench`
# or `select`), `technique_params` overrides per technique (`{"steering": {"strength": 0.8}}`).

# %% tags=["parameters"]
run_name = "demo"
models = ["smollm2-135m-instruct"]
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft", "sft_dpo"]
targets = ["wn:09411430-n", "wn:10560637-n", "wn:06613686-n"]
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
probe_knowledge = True
n_boot = 1000
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "select_atomic"

# %%
from workbench.experiments import ExperimentConfig, Runner
from workbench.experiments.report import write_summary
from workbench.paths import project_path, run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.select import (
    plot_by_level,
    plot_generalization_errors,
    plot_technique_metrics,
    plot_universality,
)
from workbench.scoring.metrics import (
    by_level,
    generalization_errors,
    technique_table,
    universality,
)

config = ExperimentConfig(name=run_name, models=tuple(models), techniques=tuple(techniques),
                          targets=tuple(targets), seeds=tuple(seeds), n_target=n_target,
                          n_descendant=n_descendant, n_specificity=n_specificity,
                          n_constituent=n_constituent, n_composition=n_composition,
                          max_new_tokens=max_new_tokens, preset=preset,
                          data_dir=str(project_path(data_dir)) if data_dir else None,
                          technique_params=technique_params)
run_dir = run_path(run_name)

# %%
runner = Runner(config, executor=executor,
                **({"address": ray_address or None, "workers": ray_workers} if executor == "ray" else {}))
rows = runner.run()
summary = write_summary(rows, run_dir / "summary.csv", detector)
summary

# %% [markdown]
# ## Techniques table (mean over target concepts, 95% bootstrap intervals)

# %%
table = technique_table(rows, detector, n_boot=n_boot)
table.to_csv(run_dir / "techniques.csv", index=False, float_format="%.4f")
table.round(3)

# %%
save_run_figure(plot_technique_metrics(table, "atomic concepts", n_boot), run_name, "techniques")

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
    from workbench.models import load_model

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
