# %% [markdown]
# # Quickstart: the embedded model answers
#
# Loads a model through `workbench.models` (the embedded SmolLM2-135M-Instruct by default, offline),
# answers a few questions with the batched generation engine, saves the answers as a tidy table in
# `runs/<run_name>/answers.csv` and a figure in `figures/`.

# %% [parameters]
model = "smollm2-135m-instruct"
questions = [
    "What is the longest river in Africa?",
    "Who wrote the novel Oliver Twist?",
    "Which country is the Eiffel Tower in?",
    "What is a violin made of?",
]
system_prompt = None
max_new_tokens = 48
seed = 0
run_name = "quickstart"

# %%
from pathlib import Path

from workbench.generation import GenerationConfig, generate, generations_frame
from workbench.models import load_model
from workbench.plots import plot_answer_lengths, save_figure

out_dir = Path("runs") / run_name
out_dir.mkdir(parents=True, exist_ok=True)
lm = load_model(model)
config = GenerationConfig(max_new_tokens=max_new_tokens, seed=seed, system_prompt=system_prompt)

# %%
gens = generate(lm, questions, config)
answers = generations_frame(gens, questions, lm, config)
answers.to_csv(out_dir / "answers.csv", index=False)
answers[["prompt", "response", "n_tokens", "finish_reason"]]

# %%
fig = plot_answer_lengths(answers)
save_figure(fig, f"{run_name}_answer_lengths")
