# %% [markdown]
# # Refusal scoring with an LLM judge (seed 001's view)
#
# K sampled answers per prompt; a judge model classifies each with a rubric of twelve refusal
# categories; the refusal confidence c(x) in [-1, 1] weights the samples' verdicts by their
# probabilities. Histograms of c(x) and compliance / rejection percentages per technique, judge
# parse failures counted, and every detector's agreement with the hand-labelled responses.
# The embedded 135M model is a weak judge: the agreement table says how weak.

# %% [parameters]
run_name = "judge"
model = "smollm2-135m-instruct"
judge_model = "smollm2-135m-instruct"
techniques = ["base", "zero_shot", "few_shot_cot", "steering", "sft"]
targets = ["wn:09411430-n"]
k_samples = 3
temperature = 0.7
n_target = 10
n_descendant = 5
n_specificity = 5
max_new_tokens = 32
labels_path = "data/labels/hand_labelled.jsonl"
figure_prefix = "judge"

# %%
from pathlib import Path

from workbench.experiments import ExperimentConfig, Runner
from workbench.models import load_model
from workbench.plots import save_figure
from workbench.plots.select import plot_compliance, plot_confidence_histograms
from workbench.scoring.agreement import (compliance_shares, detector_agreement, judge_rows,
                                         load_labels, prompt_confidence)
from workbench.scoring.judge import LLMJudge

config = ExperimentConfig(name=run_name, models=(model,), techniques=tuple(techniques),
                          targets=tuple(targets), n_target=n_target, n_descendant=n_descendant,
                          n_specificity=n_specificity, max_new_tokens=max_new_tokens,
                          num_samples=k_samples, temperature=temperature, early_stop=False)
run_dir = Path("runs") / run_name

# %%
rows = Runner(config).run()
judge = LLMJudge(load_model(judge_model))
judged = judge_rows(rows, judge, progress=True)
judged.to_parquet(run_dir / "judged.parquet", index=False)
print(f"judge parse failures: {int((~judged['judge_parsed']).sum())} of {len(judged)} answers")

# %%
scores = prompt_confidence(judged)
scores.to_csv(run_dir / "confidence.csv", index=False)
shares = compliance_shares(scores)
shares.to_csv(run_dir / "compliance.csv", index=False)
save_figure(plot_confidence_histograms(scores), f"{figure_prefix}_confidence")
save_figure(plot_compliance(shares), f"{figure_prefix}_compliance")
shares.round(1)

# %% [markdown]
# ## Detectors against the hand-labelled responses

# %%
labels = load_labels(labels_path)
agreement = detector_agreement(labels, judge)
agreement.to_csv(run_dir / "agreement.csv", index=False, float_format="%.3f")
agreement.round(3)
