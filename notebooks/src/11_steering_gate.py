# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # The steering gate, measured across concepts
#
# Conditional steering abstains only where its gate fires. This notebook prepares the steering
# technique with several gate settings for concepts from all five roots and measures each gate
# on held-out evaluation questions: how often it fires on the target's and descendants'
# questions (TPR) and on near (siblings, parent, ancestors) and far concepts' questions (FPR),
# and the AUROC of its margin against each. `legacy` is the gate as it was before it was
# measured; the others are today's defaults and their variants. The figure is the trade-off
# curve as all thresholds move together; rings mark each setting's operating point.

# %% tags=["parameters"]
run_name = "steering_gate"  # results go to runs/<run_name>/
model = "smollm2-135m-instruct"  # registered name, local path or hub id
concepts_per_root = 4  # target concepts drawn from each of the five roots
n_questions = 20  # held-out evaluation questions per group and concept
seed = 0  # seeds the draw of concepts
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "steering_gate"  # file name prefix of exported figures

# %%
import random

from workbench.backends import load_model
from workbench.paths import run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.steering import plot_gate_tradeoff
from workbench.experiments.gate_sweep import gate_sweep
from workbench.taxonomy import load_benchmark
from workbench.techniques.steering import LEGACY_GATE

run_dir = run_path(run_name)
bench = load_benchmark()
rng = random.Random(seed)
targets = []
for root in bench.atomic.roots:
    pool = sorted(c for c in bench.atomic.descendants(root)
                  if bench.atomic[c].kind == "class" and len(bench.atomic.descendants(c)) >= 2)
    targets += rng.sample(pool, min(concepts_per_root, len(pool)))
settings = {"legacy": LEGACY_GATE, "pc1": {"method": "pc1"}, "default (mean_diff)": {},
            "mean_diff, majority": {"aggregate": "majority"}}
print(f"{len(targets)} concepts: " + ", ".join(bench.concept(t).name for t in targets))
lm = load_model(model)

# %%
per_target, curve = gate_sweep(lm, bench, targets, settings, n=n_questions, seed=seed, progress=True)
per_target.to_csv(run_dir / "gate_per_target.csv", index=False, float_format="%.4f")
curve.to_csv(run_dir / "gate_curve.csv", index=False, float_format="%.4f")
summary = per_target.groupby("setting", sort=False)[
    ["auroc_near", "auroc_far", "tpr_target", "tpr_descendant", "fpr_near", "fpr_far", "val_auroc"]].mean()
summary["concepts"] = per_target.groupby("setting", sort=False)["target"].nunique()
summary.to_csv(run_dir / "gate_summary.csv", float_format="%.4f")
summary.round(2)

# %%
save_run_figure(plot_gate_tradeoff(curve, per_target), run_name, "tradeoff")

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
