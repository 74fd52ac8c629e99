"""The refusal suite notebook's run from its parameters (notebook 06): its config file, or a
config made of the parameters, checked by the runner before the kernel starts as well."""

from __future__ import annotations

from typing import Any

from workbench.refusal.config import SuiteConfig


def notebook_config(
    run_name: str,
    config_file: str,
    *,
    models,
    datasets,
    data_dir: str,
    limit: int,
    sampling: str,
    k_samples: int,
    max_new_tokens: int,
    judge_model: str,
    score_detector: str,
    thinking_marker: str,
    abstainer_technique: str,
    abstainer_target: str,
) -> SuiteConfig:
    """``config_file`` (a refusal-eval YAML, renamed ``run_name``) when given, else the suite
    the other parameters describe."""
    from workbench.paths import project_path

    if config_file:
        return SuiteConfig.from_yaml(project_path(config_file)).replace(name=run_name)
    settings: dict[str, Any] = dict(
        name=run_name,
        models=tuple(models),
        datasets=tuple(datasets),
        limit=limit,
        sampling={"preset": sampling, "num_samples": k_samples, "max_new_tokens": max_new_tokens},
        judge={"model": judge_model or None},
        detector=score_detector,
        thinking_marker=thinking_marker or None,
        abstainers=[{"technique": abstainer_technique, "target": abstainer_target}]
        if abstainer_technique
        else [],
    )
    if data_dir:
        settings["data_dir"] = data_dir
    return SuiteConfig(**settings)
