"""ipywidgets UIs. Each UI is one class; what it shows is computed by plain functions."""

from workbench.widgets.concept_picker import (
    NOTHING,
    ConceptPicker,
    Options,
    browse_options,
    concept_summary,
    search_options,
    summary_html,
    targets_code,
)
from workbench.widgets.labeller import Labeller
from workbench.widgets.steering_inspector import SteeringInspector, open_inspector

__all__ = [
    "NOTHING",
    "ConceptPicker",
    "Labeller",
    "Options",
    "SteeringInspector",
    "browse_options",
    "concept_summary",
    "open_inspector",
    "search_options",
    "summary_html",
    "targets_code",
]
