"""Categorical knowledge editing (taxi-style): edits, editors, choice scoring, metrics."""

from workbench.editing.data import (
    Edit,
    build_edit_queries,
    edits_from_categories,
    load_categories,
    load_taxi,
    parse_edit,
    sample_edits,
)
from workbench.editing.editors import (
    EDITORS,
    FT,
    IKE,
    ROME,
    EditedModel,
    Editor,
    NoEdit,
    get_editor,
)
from workbench.editing.evaluate import (
    SLOTS,
    edit_metrics,
    edit_subject,
    evaluate_editor,
    is_category_query,
    score_queries,
    split_query,
)
from workbench.editing.presets import (
    EDITING_PRESETS,
    check_against_clone,
    editors_for,
    relative_layer,
)
from workbench.editing.scoring import choice_logprobs
from workbench.editing.taxi import (
    find_taxi_root,
    normalise_subjects,
    prepare_release,
    read_hparams,
    read_protocol,
    release_report,
    stale_rows,
)

__all__ = [
    "EDITING_PRESETS",
    "EDITORS",
    "FT",
    "IKE",
    "ROME",
    "SLOTS",
    "Edit",
    "EditedModel",
    "Editor",
    "NoEdit",
    "build_edit_queries",
    "check_against_clone",
    "choice_logprobs",
    "edit_metrics",
    "edit_subject",
    "editors_for",
    "edits_from_categories",
    "evaluate_editor",
    "find_taxi_root",
    "get_editor",
    "is_category_query",
    "load_categories",
    "load_taxi",
    "normalise_subjects",
    "parse_edit",
    "prepare_release",
    "read_hparams",
    "read_protocol",
    "relative_layer",
    "release_report",
    "sample_edits",
    "score_queries",
    "split_query",
    "stale_rows",
]
