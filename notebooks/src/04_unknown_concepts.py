# ---
# jupyter:
#   kernelspec:
#     display_name: Abstention Workbench
#     language: python
#     name: abstention-workbench
# ---

# %% [markdown]
# # Responses to the unknown (UnknownBench-style)
#
# Non-existent concepts, false premises and perturbed factual questions, each against
# answerable controls: refusal rates (phrase matching, the workbench's keywords and
# UnknownBench's exact keyword rule), accuracy on answerable factual items (lexical match and
# UnknownBench's substring rule), verbalized confidence (parsed from the reply, and read from the
# log-probabilities of the numbers 0-10), next-token entropy and prompt perplexity, and how
# refusal and accuracy follow confidence. Optionally through an abstention technique.
#
# `prompts="paper"` uses UnknownBench's own prompts; `data_dir` may point at the released
# `data/` folder of genglinliu/UnknownBench (13,319 items: set `per_partition=0` for all of
# them). Work is saved in chunks, so an interrupted run resumes where it stopped.

# %% tags=["parameters"]
run_name = "unknown"  # results go to runs/<run_name>/
model = "smollm2-135m-instruct"  # registered name, local path or hub id
data_dir = "data/unknown"  # UnknownBench-shaped data: the shipped set, or the release's data/ folder
per_partition = 30  # items per task and partition, seeded (0: all of them)
allow_partial = False  # load a release lacking files or items (each row's release_load says so)
prompts = "paper"  # answer and confidence prompts: paper (UnknownBench's) or the workbench's
technique = "base"  # answer through this abstention technique (base: the unmodified model)
technique_target = "wn:09411430-n"  # the concept that technique abstains from (river)
max_new_tokens = 40  # generation budget per answer
chunk_size = 64  # items per saved chunk (a killed run resumes from the last chunk)
seed = 0  # seeds the item sample and the technique
export_figures = False  # also copy the figures to figures/<figure_prefix>_*
figure_prefix = "unknown"  # file name prefix of exported figures

# %%
import random

from workbench.backends import load_model
from workbench.paths import project_path, run_path
from workbench.plots import export_run_figures, save_run_figure
from workbench.plots.unknown import plot_by_confidence, plot_uncertainty_histograms
from workbench.unknown import (
    TASKS,
    by_confidence,
    expected_calibration_error,
    get_prompts,
    load_unknownbench,
    run_unknown,
    default_detector,
    summarize_unknown,
)

run_dir = run_path(run_name)
get_prompts(prompts)  # an unknown preset fails here, before the model loads
dataset = load_unknownbench(project_path(data_dir), allow_partial=allow_partial)
print(f"data: {dataset.source} (sha256 {dataset.content_hash[:16]}), {len(dataset.items)} items, "
      f"release: {dataset.release_load}")
rng = random.Random(seed)
items = []
for task in TASKS:
    for partition in ("answerable", "unanswerable"):
        pool = dataset.select(task, partition)
        items += rng.sample(pool, min(per_partition, len(pool))) if per_partition else pool
lm = load_model(model)

# %%
abstainer = None
if technique != "base":
    from workbench.taxonomy import load_benchmark
    from workbench.techniques import get_technique

    abstainer = get_technique(technique).prepare(lm, load_benchmark(), technique_target, seed=seed)
key = f"{lm.model_id}@{lm.revision}|{technique}:{technique_target}|data:{dataset.content_hash}"
rows = run_unknown(lm, items, run_dir, abstainer, chunk_size=chunk_size, key=key, progress=True,
                   max_new_tokens=max_new_tokens, prompts=prompts)
rows.insert(0, "technique", technique)
rows["data_dir"], rows["data_hash"] = dataset.source, dataset.content_hash
rows.to_parquet(run_dir / "results.parquet", index=False)

# %%
summary = summarize_unknown(rows)
summary.to_csv(run_dir / "summary.csv", index=False, float_format="%.4f")
for column in ("confidence", "confidence_logprob"):
    print(f"expected calibration error of {column} (answerable factual items): "
          f"{expected_calibration_error(rows, column):.3f}")
summary.round(3)

# %%
levels = by_confidence(rows, column="confidence_logprob")
save_run_figure(plot_by_confidence(levels, "confidence from the log-probabilities of 0-10; refusal by "
                                   + default_detector(rows).removeprefix("refused_") + "'s rule"),
                run_name, "by_confidence")
save_run_figure(plot_uncertainty_histograms(rows), run_name, "uncertainty")
levels

# %%
if export_figures:
    export_run_figures(run_name, figure_prefix)
