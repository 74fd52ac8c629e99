# %% [markdown]
# # Responses to the unknown (UnknownBench-style)
#
# Non-existent concepts, false premises and perturbed factual questions, each against
# answerable controls: refusal rates (phrase matching and the keyword baseline), accuracy on
# answerable factual items, verbalized confidence, next-token entropy and prompt perplexity, and
# how refusal and accuracy follow confidence. Optionally through an abstention technique.

# %% [parameters]
run_name = "unknown"
model = "smollm2-135m-instruct"
data_dir = "data/unknown"
per_partition = 30
technique = "base"
technique_target = "wn:09411430-n"
max_new_tokens = 40
seed = 0
figure_prefix = "unknown"

# %%
import random
from pathlib import Path

from workbench.models import load_model
from workbench.plots import save_figure
from workbench.plots.unknown import plot_by_confidence, plot_uncertainty_histograms
from workbench.unknown import (TASKS, by_confidence, evaluate_unknown, expected_calibration_error,
                               load_unknownbench, summarize_unknown)

run_dir = Path("runs") / run_name
run_dir.mkdir(parents=True, exist_ok=True)
dataset = load_unknownbench(data_dir)
rng = random.Random(seed)
items = []
for task in TASKS:
    for partition in ("answerable", "unanswerable"):
        pool = dataset.select(task, partition)
        items += rng.sample(pool, min(per_partition, len(pool)))
lm = load_model(model)

# %%
abstainer = None
if technique != "base":
    from workbench.taxonomy import load_benchmark
    from workbench.techniques import get_technique

    abstainer = get_technique(technique).prepare(lm, load_benchmark(), technique_target, seed=seed)
rows = evaluate_unknown(lm, items, abstainer, max_new_tokens=max_new_tokens, progress=True)
rows.insert(0, "technique", technique)
rows.to_parquet(run_dir / "results.parquet", index=False)

# %%
summary = summarize_unknown(rows)
summary.to_csv(run_dir / "summary.csv", index=False, float_format="%.4f")
ece = expected_calibration_error(rows)
print(f"expected calibration error of verbalized confidence (answerable factual items): {ece:.3f}")
summary.round(3)

# %%
levels = by_confidence(rows)
save_figure(plot_by_confidence(levels), f"{figure_prefix}_by_confidence")
save_figure(plot_uncertainty_histograms(rows), f"{figure_prefix}_uncertainty")
levels
