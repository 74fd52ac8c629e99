# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Quickstart: the embedded model answers
#
# Loads a model through `workbench.models` (the embedded SmolLM2-135M-Instruct by default, offline),
# answers a few questions with the batched generation engine, saves the answers as a tidy table in
# `runs/<run_name>/answers.csv` and a figure in `runs/<run_name>/figures/`.

# %% tags=["parameters"]
model = "smollm2-135m-instruct"  # registered name, local path or hub id
questions = [
    "What is the longest river in Africa?",
    "Who wrote the novel Oliver Twist?",
    "Which country is the Eiffel Tower in?",
    "What is a violin made of?",
]  # questions the model answers
system_prompt = None  # a system turn for every question (None: none)
max_new_tokens = 48  # generation budget per answer
seed = 0  # sampling seed (answers are greedy; kept for provenance)
run_name = "quickstart"  # results go to runs/<run_name>/

# %%
from workbench.generation import GenerationConfig, generate, generations_frame
from workbench.backends import load_model
from workbench.paths import run_path
from workbench.plots import plot_answer_lengths, save_run_figure

out_dir = run_path(run_name)
lm = load_model(model)
config = GenerationConfig(max_new_tokens=max_new_tokens, seed=seed, system_prompt=system_prompt)

# %%
gens = generate(lm, questions, config)
answers = generations_frame(gens, questions, lm, config)
answers.to_csv(out_dir / "answers.csv", index=False)
# each answer whole, wrapped and left-aligned (a plain DataFrame cuts text at 50 characters)
(
    answers[["prompt", "response", "n_tokens", "finish_reason"]]
    .style.hide(axis="index")
    .format(escape="html")  # an answer is text, never markup
    .set_properties(**{"text-align": "left", "vertical-align": "top", "white-space": "pre-wrap"})
    .set_properties(subset=["prompt"], **{"min-width": "14em"})
    .set_properties(subset=["response"], **{"min-width": "30em"})
    .set_table_styles([{"selector": "th", "props": "text-align: left"}])
)

# %%
fig = plot_answer_lengths(answers)
save_run_figure(fig, run_name, "answer_lengths")

# %% [markdown]
# ## What next
#
# - **The main experiment**: `make demo` runs `01_select_abstention` headless on the embedded
#   model (techniques table, taxonomy levels, generalization errors, universality; 10 minutes on
#   two CPU cores from an empty cache, measured); open `01_select_abstention.ipynb` here to
#   change its parameters.
# - **This notebook with other settings**: `python -m workbench params 00_quickstart` lists its
#   parameters; `python -m workbench run 00_quickstart -p "questions=['Name a river.']"` runs it
#   headless; any Hugging Face model id or local model directory works as `model`
#   (`python -m workbench models` lists the registered ones).
# - **The other notebooks**: `02_select_compositions` (compositions of concepts),
#   `03_refusal_judge` (an LLM judge's refusal verdicts), `04_unknown_concepts`
#   (UnknownBench-style questions about the unknown), `05_categorical_editing` (IKE / FT / ROME
#   edits), `06_refusal_suite` (seed 001's refusal suite), `07_label_answers` (label answers and
#   check the refusal detectors against your labels), `10_steering_inspector` (the steering
#   widget for one concept), `11_steering_gate` (the steering gate measured across concepts) and
#   `00_build_taxonomy` (rebuild the benchmark from WordNet). `make reproduce` runs them all in
#   order.
# - **The manual**: `make docs`, then open `site/index.html` (start with Getting started and
#   Notebooks; the pages are Markdown under `docs/`).
