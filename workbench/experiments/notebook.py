"""A SELECT notebook's run from its parameters: the grid config, the detector and aggregation its
preset implies, and which settings differ from the preset (notebooks 01 and 02 share this)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.errors import ConfigError
from workbench.experiments.config import PRESET_FIELDS, ExperimentConfig
from workbench.paths import project_path
from workbench.techniques.presets import notebook_settings, preset_settings


@dataclass(frozen=True)
class NotebookRun:
    """What a notebook runs: ``config``, the ``detector`` column it scores by and the
    ``aggregate`` over targets (the preset's unless set), and the settings ``changed`` from the
    preset."""

    config: ExperimentConfig
    detector: str
    aggregate: str
    changed: dict[str, Any]

    def describe(self) -> str:
        """One line: the preset, and the settings changed from it."""
        p = self.config.preset
        return f"preset {p!r}" + (
            f"; settings changed from it: {self.changed}" if self.changed else ", as it is"
        )

    def executor_options(self, executor: str, ray_address: str, ray_workers: int) -> dict:
        """The Runner's executor options for the notebook's ``executor`` parameter (checked
        before the kernel starts: :func:`workbench.notebooks.run_notebook`)."""
        if executor == "ray":
            if isinstance(ray_workers, bool) or not isinstance(ray_workers, int) or ray_workers < 1:
                raise ConfigError(f"ray_workers must be at least 1, got {ray_workers!r}")
            return {"address": ray_address or None, "workers": ray_workers}
        return {}


def notebook_run(
    run_name: str,
    preset: str,
    *,
    models,
    techniques,
    targets,
    seeds,
    n_target,
    n_descendant,
    n_specificity,
    max_new_tokens,
    n_constituent: int,
    n_composition: int,
    temperature,
    top_p,
    do_sample,
    early_stop,
    data_dir: str,
    technique_params: dict,
    detector: str = "",
    aggregate: str = "",
) -> NotebookRun:
    """The run a SELECT notebook's parameters ask for; ``None`` sizes take the notebook defaults
    of :func:`~workbench.techniques.presets.notebook_settings`."""
    sizes = notebook_settings(
        preset,
        n_target=n_target,
        n_descendant=n_descendant,
        n_specificity=n_specificity,
        max_new_tokens=max_new_tokens,
    )
    config = ExperimentConfig(
        name=run_name,
        models=tuple(models),
        techniques=tuple(techniques),
        targets=tuple(targets),
        seeds=seeds,
        **sizes,
        n_constituent=n_constituent,
        n_composition=n_composition,
        temperature=temperature,
        top_p=top_p,
        do_sample=do_sample,
        early_stop=early_stop,
        preset=preset,
        data_dir=str(project_path(data_dir)) if data_dir else None,
        technique_params=technique_params,
    )
    settings = preset_settings(preset)
    changed = {k: getattr(config, k) for k in PRESET_FIELDS if getattr(config, k) != settings[k]}
    return NotebookRun(
        config, detector or settings["detector"], aggregate or settings["aggregate"], changed
    )
