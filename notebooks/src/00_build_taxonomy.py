# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Build the benchmark: taxonomy, compositions, questions
#
# Rebuilds the shipped default benchmark from WordNet 3.0 with SELECT's recipe (five roots,
# IS-A descent to depth 6, up to 5 instances per leaf class, paths shorter than 3 dropped),
# composes pairs of concepts with relation templates, writes 50 questions per concept, and saves
# everything with a manifest. With the defaults the result is byte-identical to `data/`.

# %% tags=["parameters"]
run_name = "taxonomy_build"  # results go to runs/<run_name>/
out_dir = "runs/taxonomy_build/data"  # where the rebuilt benchmark is written
seed = 0  # breaks ties between equally familiar children (the shipped data: 0)
max_depth = 6  # deepest taxonomy level, roots at level 1
instances_per_leaf = 5  # instances kept under each leaf class
min_path = 3  # branches whose root-to-leaf path is shorter are dropped
branching = [3, 3, 2, 2, 1, 1]  # children kept per concept at each level, from the roots down
composition_branching = [2, 2, 1, 1]  # compositions kept per concept at each composition level
composition_max_depth = 4  # deepest composition level

# %%
import json

from workbench.paths import project_path
from workbench.plots import save_run_figure
from workbench.plots.taxonomy import plot_taxonomy_levels
from workbench.taxonomy import (
                                BuildParams,
                                CompositionParams,
                                build_default_benchmark,
                                load_benchmark,
                                save_benchmark,
)

params = BuildParams(max_depth=max_depth, instances_per_leaf=instances_per_leaf,
                     min_path=min_path, branching=tuple(branching), seed=seed)
composition_params = CompositionParams(branching=tuple(composition_branching),
                                       max_depth=composition_max_depth, seed=seed)

# %%
bench = build_default_benchmark(params, composition_params, question_seed=seed, progress=True)
save_benchmark(bench, project_path(out_dir))
print(json.dumps(bench.stats(), indent=1))

# %%
shipped = load_benchmark()
print("identical to the shipped data/:", bench.manifest["content_hash"] == shipped.manifest["content_hash"])

# %%
fig = plot_taxonomy_levels(bench)
save_run_figure(fig, run_name, "taxonomy_levels")
