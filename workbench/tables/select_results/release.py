"""The release's results files: where SELECT writes them (partitions, evaluation types,
technique aliases, model folders) and which ones a release should hold, derived from its
``config/``."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.releases import Found, register

#: Partition -> results folder of the release.
PARTITIONS = {"atoms": "expr.abstain.select", "compositions": "expr.abstain.select.compose"}
EVAL_TYPES = ("abstention", "generalization", "specificity")
#: SELECT's technique aliases -> the workbench's technique names.
TECHNIQUES = {
    "prompt-simple": "zero_shot",
    "prompt_cot-few_shot": "few_shot_cot",
    "steering-repe": "steering",
    "tuning-sft": "sft",
    "tuning-sft-dpo": "sft_dpo",
}
#: Technique families that need the model's weights (SELECT ran them on open models only).
WHITE_BOX_FAMILIES = ("steering", "tuning")
#: Model-id prefixes of models SELECT reached through an API (prompting only).
API_PROVIDERS = ("openai",)
LFS_REASON = "a Git LFS pointer, not the file (its blob was not downloaded)"


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(64)


def count_results(root: str | os.PathLike) -> tuple[Path, dict[str, Found]]:
    """(the folder holding ``results/``, per partition the readable results files there: present
    and not a Git LFS pointer), for ``releases check select-results``."""
    from workbench.taxonomy.select_format.protocol import is_lfs_pointer

    base = release_root(root)
    found = {}
    for folder in PARTITIONS.values():
        files = sorted((base / "results" / folder).glob("*/*/*.json.gz"))
        found[f"results/{folder}"] = Found(sum(not is_lfs_pointer(_head(p)) for p in files))
    return base, found


#: kinshuk-h/SELECT results/: 4 open models x 5 techniques x 3 evaluation types + 2 API
#: models x 2 prompting techniques x 3, for atoms and compositions: 144 files. The importer
#: derives the same set from the release's config/ (:func:`expected_files`).
SELECT_RESULTS_RELEASE = register(
    "select-results",
    "github.com/kinshuk-h/SELECT @ e193764, results/",
    {
        "results/expr.abstain.select": {"items": 72},
        "results/expr.abstain.select.compose": {"items": 72},
    },
    unit="files",
    locate=count_results,
)


class SelectResultsError(WorkbenchError):
    """The release or its results cannot be imported as asked."""


@dataclass(frozen=True)
class ResultFile:
    """One results file the release should hold."""

    partition: str
    model: str  # SELECT's display alias ("Gemma-2-IT-2B")
    model_id: str  # the Hugging Face (or API) id
    model_dir: str  # the release's folder name for it
    eval_type: str
    select_technique: str

    @property
    def relpath(self) -> str:
        return (
            f"results/{PARTITIONS[self.partition]}/{self.model_dir}/{self.eval_type}/"
            f"{self.select_technique}.json.gz"
        )

    @property
    def technique(self) -> str:
        return TECHNIQUES.get(self.select_technique, self.select_technique)


def release_root(release_dir: str | os.PathLike) -> Path:
    """The folder holding ``results/`` (a clone of SELECT's repository or its release)."""
    d = Path(release_dir)
    if any((d / "results" / folder).is_dir() for folder in PARTITIONS.values()):
        return d
    if d.name == "results" and any((d / folder).is_dir() for folder in PARTITIONS.values()):
        return d.parent
    raise SelectResultsError(
        f"no SELECT results under {d} (looked for results/{PARTITIONS['atoms']} "
        f"and results/{PARTITIONS['compositions']})"
    )


def model_dir_name(model_id: str) -> str:
    """The folder SELECT writes a model's results to: its id lower-cased, ``/`` as ``--``,
    characters unsafe in paths dropped (``?"<>``) or made dashes (``:\\|*``)."""
    name = re.sub(r'[?"<>]', "", model_id.lower().replace("/", "--"))
    return re.sub(r"[:/\\|*]", "-", name)


def _yaml(path: Path) -> Any:
    import yaml

    from workbench.yamlfile import yaml_problem

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise SelectResultsError(f"{path}: invalid YAML: {yaml_problem(e)}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SelectResultsError(f"{path}: cannot read ({e})") from None


def technique_family(alias: str) -> str:
    """``prompt_cot-few_shot`` -> ``prompt``, ``tuning-sft-dpo`` -> ``tuning``."""
    return re.split(r"[-_]", alias, maxsplit=1)[0]


def ran_for(model_id: str, technique: str) -> bool:
    """Whether SELECT ran ``technique`` for ``model_id``: white-box techniques need weights, so
    API models were prompted only."""
    api = model_id.split("/", 1)[0].lower() in API_PROVIDERS
    return not (api and technique_family(technique) in WHITE_BOX_FAMILIES)


def expected_files(
    release_dir: str | os.PathLike, models: list[str] | None = None, allow_partial: bool = False
) -> tuple[list[ResultFile], list[str]]:
    """Every results file the release should hold, and notes on how the set was derived.

    Models: those of ``config/models.yaml`` plus any other model folder present; techniques:
    those of ``config/techniques.yaml`` that SELECT ran for the model (:func:`ran_for`).
    ``models`` (aliases, ids or folder names) restricts the set. Without ``models.yaml`` a
    missing model folder could not be told from a model the release lacks, so that is an error
    unless ``allow_partial`` (then: the folders present).
    """
    root = release_root(release_dir)
    notes: list[str] = []
    cfg = root / "config"
    aliases: dict[str, str] = {}
    if (cfg / "models.yaml").is_file():
        raw = _yaml(cfg / "models.yaml") or {}
        if not isinstance(raw, dict):
            raise SelectResultsError(f"{cfg / 'models.yaml'}: expected alias: model id pairs")
        aliases = {str(a): str(m) for a, m in raw.items()}
    elif not allow_partial:
        raise SelectResultsError(
            f"{cfg / 'models.yaml'} absent: without SELECT's config the models the release "
            "should hold are unknown, and a missing model folder could not be named (restore "
            "config/ from the clone, or --allow-partial / allow_partial=True to import the "
            "folders present)"
        )
    else:
        notes.append(f"{cfg / 'models.yaml'} absent: models are the folders present")
    if (cfg / "techniques.yaml").is_file():
        raw = _yaml(cfg / "techniques.yaml") or {}
        if not isinstance(raw, dict) or not raw:
            raise SelectResultsError(
                f"{cfg / 'techniques.yaml'}: expected technique: settings pairs (SELECT's "
                "config), got " + (type(raw).__name__ if raw else "nothing")
            )
        techniques = list(raw)
    else:
        techniques = list(TECHNIQUES)
        notes.append(f"{cfg / 'techniques.yaml'} absent: techniques are the workbench's known ones")
    # model folder -> (alias, id): configured first, then folders the config does not name
    by_dir = {model_dir_name(mid): (alias, mid) for alias, mid in aliases.items()}
    for _part, folder in PARTITIONS.items():
        base = root / "results" / folder
        for d in sorted(base.iterdir()) if base.is_dir() else ():
            if d.is_dir() and d.name not in by_dir:
                by_dir[d.name] = (d.name, d.name.replace("--", "/"))
                notes.append(f"model folder {folder}/{d.name} is not in config/models.yaml")
    if models:
        wanted = {m.lower(): m for m in models}
        names = {x.lower() for k, v in by_dir.items() for x in (k, *v)}
        unknown = [m for w, m in wanted.items() if w not in names]
        if unknown:  # named against every model of the release, not those that matched
            raise SelectResultsError(
                f"unknown model(s) {', '.join(map(repr, unknown))}; the release has: "
                + (", ".join(f"{a} ({mid})" for a, mid in by_dir.values()) or "none")
            )
        by_dir = {
            k: v for k, v in by_dir.items() if {k.lower(), v[0].lower(), v[1].lower()} & set(wanted)
        }
    files = [
        ResultFile(part, alias, mid, mdir, et, t)
        for part in PARTITIONS
        for mdir, (alias, mid) in by_dir.items()
        for et in EVAL_TYPES
        for t in techniques
        if ran_for(mid, t)
    ]
    return files, notes
