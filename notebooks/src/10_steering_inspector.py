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
#
# Start-up, measured in JupyterLab on 2 shared CPU cores: about 9 s from "run all" to the widget
# with the caches filled (model 5 s, river 2 s); the very first time about 60 s (the model is
# unpacked into the cache once, about 35 s, and a concept's vectors take about 20 s to prepare,
# then are cached). Meanwhile a status line says what is loading; it ends with each step's time.
# An answer (unsteered and steered, 48 new tokens each) takes 3 to 6 s.

# %% tags=["parameters"]
model = "smollm2-135m-instruct"  # registered name, local path or hub id
concept = "wn:09411430-n"  # the concept to steer away from (river; find ids: python -m workbench taxonomy find TEXT)
question = "What is the longest river in Africa?"  # the first question shown

# %%
from workbench.widgets.steering_inspector import open_inspector

# %%
inspector = open_inspector(model, concept, question)  # a status line says what it loads meanwhile
inspector  # shown with a note that appears if the kernel goes away
