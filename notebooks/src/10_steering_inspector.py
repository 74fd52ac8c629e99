# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Steering inspector
#
# Pick a concept, see how well each layer's concept vector separates related from unrelated
# validation questions, move the condition layers, the threshold and the steering strength, and
# try questions: does the condition fire, and what do the unsteered and steered answers say?
# (Preparing a concept the first time takes about 15 s on 2 CPU cores; it is cached afterwards.)

# %% tags=["parameters"]
model = "smollm2-135m-instruct"  # registered name, local path or hub id
concept = "wn:09411430-n"  # the concept to steer away from (river; find ids: python -m workbench.taxonomy find TEXT)
question = "What is the longest river in Africa?"  # the first question shown

# %%
from workbench.models import load_model
from workbench.taxonomy import load_benchmark
from workbench.widgets import SteeringInspector

lm = load_model(model)
bench = load_benchmark()
inspector = SteeringInspector(lm, bench, concept=concept)
inspector.question.value = question
inspector.widget
