# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Refusal scoring with an LLM judge (seed 001's view)
#
# K sampled answers per prompt; a judge model classifies each with a rubric of twelve refusal
# categories, by constrained choice (its verdict is read from its log-probabilities over the
# labels, so it never fails to parse); the refusal confidence c(x) in [-1, 1] weights the
# samples' verdicts by their probabilities. Histograms of c(x) and compliance / rejection
# percentages per technique, and every detector's agreement with the labelled set (its test
# split). The embedded 135M model is a weak judge: the agreement table says how weak; any
# Hugging Face chat model can judge (`judge_model`).

# %% tags=["parameters"]
run_name = "judge"  # results go to runs/<run_name>/
model = "smollm2-135m-instruct"  # the model whose answers are judged
judge_model = "smollm2-135m-instruct"  # the LLM judge (a 7B+ model on a GPU for numbers you report)
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft"]  # abstention techniques the answers come from (base: the unmodified model)
targets = ["wn:09411430-n"]  # target concepts (river; find ids: python -m workbench taxonomy find TEXT)
k_samples = 3  # sampled answers per question (the refusal confidence c(x) averages over them)
temperature = 0.7  # sampling temperature of those answers
n_target = 10  # target questions per cell
n_descendant = 5  # descendant questions per cell
n_specificity = 5  # sibling and ancestor questions per cell
max_new_tokens = 32  # generation budget per answer
labels_dir = "data/labels"  # labelled responses the detectors and the judge are checked against
labels_split = "test"  # which part of the labelled set: test, dev or all
max_labelled = 0  # judge at most this many labelled responses (0: all of them)
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "judge"  # file name prefix of exported figures

# %%
from workbench.experiments import ExperimentConfig, Runner
from workbench.backends import load_model
from workbench.paths import project_path, run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.select import plot_compliance, plot_confidence_histograms
from workbench.scoring.agreement import (
    agreement_table,
    compliance_shares,
    detector_predictions,
    judge_rows,
    prompt_confidence,
)
from workbench.scoring.judge import LLMJudge
from workbench.scoring.labels import load_agreement_set

config = ExperimentConfig(name=run_name, models=(model,), techniques=tuple(techniques),
                          targets=tuple(targets), n_target=n_target, n_descendant=n_descendant,
                          n_specificity=n_specificity, max_new_tokens=max_new_tokens,
                          num_samples=k_samples, temperature=temperature, early_stop=False)
run_dir = run_path(run_name)

# %%
rows = Runner(config).run()
judge = LLMJudge(load_model(judge_model))
judged = judge_rows(rows, judge, progress=True)
judged.to_parquet(run_dir / "judged.parquet", index=False)
print(f"judge: {judged['refused_judge'].mean():.0%} of {len(judged)} answers judged refusals; "
      f"mean probability mass on the two labels {judged['judge_mass'].mean():.2f}")

# %%
scores = prompt_confidence(judged)
scores.to_csv(run_dir / "confidence.csv", index=False)
shares = compliance_shares(scores)
shares.to_csv(run_dir / "compliance.csv", index=False)
save_run_figure(plot_confidence_histograms(scores), run_name, "confidence")
save_run_figure(plot_compliance(shares), run_name, "compliance")
shares.round(1)

# %% [markdown]
# ## Detectors against the labelled set

# %%
labels = load_agreement_set(project_path(labels_dir))
if labels_split != "all":
    labels = labels[labels["split"] == labels_split]
if max_labelled:
    labels = labels.sample(min(max_labelled, len(labels)), random_state=0)
predicted = detector_predictions(labels, judge)
agreement = agreement_table(predicted)
agreement.to_csv(run_dir / "agreement.csv", index=False, float_format="%.3f")
agreement_table(predicted, by="style").to_csv(run_dir / "agreement_by_style.csv", index=False,
                                              float_format="%.3f")
agreement.round(3)

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
