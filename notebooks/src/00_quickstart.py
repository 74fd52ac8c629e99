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
answers[["prompt", "response", "n_tokens", "finish_reason"]]

# %%
fig = plot_answer_lengths(answers)
save_run_figure(fig, run_name, "answer_lengths")
