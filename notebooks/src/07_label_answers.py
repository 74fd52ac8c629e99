# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Label answers and check the detectors on your model
#
# Before trusting a refusal rate, check the detector on *your* model's answers. This notebook
# makes a small run (or opens one), shows one question at a time with the answers of every
# technique side by side, and lets you label each answer **compliance**, **refusal** or
# **partial** (declines part and answers part; counted as a refusal) with one click or one key.
# Each label is saved at once to a labels file (JSON Lines), so nothing is lost if the kernel
# dies; running the notebook again restores them. Under the answers, every detector's agreement
# with your labels (and the judge's, when the rows carry `refused_judge`) updates as you go.
# The same file feeds `python -m workbench scoring agreement --labels FILE`.
#
# **Keys**: click into the *keys* box once, then `c` / `r` / `p` label the highlighted answer
# (the highlight moves on), `x` withdraws its label, `n` / `b` go to the next / previous
# question, `1`-`9` highlight an answer.

# %% [markdown]
# **Parameters.** By default the notebook makes a small run of its own; set `run_dir` to label
# an existing one instead: its directory (an experiment's `results.parquet`, the refusal suite's
# `rows.parquet`) or a `.parquet` / `.csv` / `.jsonl` file of rows. Answers are never cut at a
# refusal, so partial refusals stay visible. Labels go to `labels.jsonl` in the run's directory
# unless `labels_file` says where.

# %% tags=["parameters"]
run_name = "labelling"  # runs/<run_name>/ holds the small run made here (unless run_dir is set)
run_dir = ""  # label an existing run instead: its directory or a file of rows (see above)
model = "smollm2-135m-instruct"  # the model that answers (registered name, path or hub id)
techniques = ["base", "zero_shot", "few_shot_cot", "steering"]  # compared side by side
targets = ["wn:09411430-n"]  # target concepts (river; python -m workbench taxonomy find TEXT)
n_target = 4  # target questions per technique
n_descendant = 2  # descendant questions per technique
n_specificity = 2  # sibling and ancestor questions per technique
n_unrelated = 2  # questions about far concepts per technique
max_new_tokens = 40  # generation budget per answer
labels_file = ""  # the labels log ("": labels.jsonl in the run's directory)
rescore = False  # decide with the current detector rules, not the run's stored decisions

# %%
from workbench.experiments import ExperimentConfig, Runner
from workbench.paths import project_path, run_path
from workbench.widgets import Labeller
from workbench.widgets.labeller import load_answers

if run_dir:
    source = project_path(run_dir)
    rows = load_answers(source)
    home = source if source.is_dir() else source.parent
else:
    config = ExperimentConfig(name=run_name, models=(model,), techniques=tuple(techniques),
                              targets=tuple(targets), n_target=n_target, n_descendant=n_descendant,
                              n_specificity=n_specificity, n_unrelated=n_unrelated,
                              max_new_tokens=max_new_tokens, early_stop=False)
    rows = Runner(config).run()  # cells already made are reused
    home = run_path(run_name)
labels_path = project_path(labels_file) if labels_file else home / "labels.jsonl"
print(f"{len(rows)} answers to label; labels are saved to {labels_path}")

# %% [markdown]
# The labeller is a live widget: it works while this notebook's kernel runs. After a kernel
# restart, or when the saved notebook is opened again, run this cell (or Run All): the labels
# are read back from the file and labelling goes on where it stopped. The file is a log
# (`labels.jsonl`: every label given, relabelling and withdrawals included); the labels as they
# stand, one row per labelled answer, are kept beside it in `labels.current.csv`, the file to
# load with pandas.

# %%
labeller = Labeller(rows, labels_path, rescore=rescore)
labeller

# %% [markdown]
# ## The labels file against the current detector rules
#
# The widget's table scores the decisions stored with the run. This cell scores every label in
# the file with the detectors' current rules, per model family, as
# `python -m workbench scoring agreement --labels FILE` does; rerun it after labelling.

# %%
from workbench.scoring.agreement import agreement_table, detector_predictions, kappa_by
from workbench.scoring.labels import load_agreement_set

if labels_path.is_file() and labeller.labels:
    predicted = detector_predictions(load_agreement_set(labels_path))
    print(f"{len(predicted)} labelled answers in {labels_path.name} when this cell ran")
    print("each detector's Cohen's kappa per model family (n: the family's labelled answers):")
    print(kappa_by(agreement_table(predicted, by="family"), "family").round(3).to_string())
    table = agreement_table(predicted)[["detector", "n", "accuracy", "kappa", "precision", "recall"]]
else:
    table = None
    print("rerun this cell after labelling: it scores the labels file with the current rules")
table.set_index("detector").round(2) if table is not None else None
