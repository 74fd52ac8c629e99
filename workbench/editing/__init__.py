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
                                    edit_metrics,
                                    evaluate_editor,
                                    is_category_query,
                                    score_queries,
                                    split_query,
)
from workbench.editing.scoring import choice_logprobs

__all__ = [
    "EDITORS", "FT", "IKE", "ROME", "Edit", "EditedModel", "Editor", "NoEdit", "build_edit_queries",
    "choice_logprobs", "edit_metrics", "edits_from_categories", "evaluate_editor", "get_editor",
    "is_category_query", "load_categories", "load_taxi", "parse_edit", "sample_edits", "score_queries",
    "split_query",
]
