"""ipywidgets UIs. Each UI is one class; what it shows is computed by plain functions."""

from workbench.widgets.concept_picker import ConceptPicker, concept_summary, search_options, summary_html

from workbench.widgets.steering_inspector import SteeringInspector

__all__ = ["ConceptPicker", "SteeringInspector", "concept_summary", "search_options", "summary_html"]
