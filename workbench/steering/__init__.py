"""Conditional activation steering: concept vectors, refusal vectors, per-row steered generation.

Hooks are our own and small (``collect_activations`` reads, ``SteeringPlan.hooks`` writes):
steering-vectors and nnsight patch whole forward passes and do not know which prompt a row of
a KV-cached batch belongs to, which conditional steering needs; the engine's ``StepState`` does.
"""

from workbench.steering.activations import collect_activations
from workbench.steering.behavior import ABSTENTIONS, fit_refusal_vector
from workbench.steering.concept import (
    ConceptVectors,
    Condition,
    direction_agreement,
    fit_concept_vectors,
    fit_repe_vectors,
    pair_scatter,
)
from workbench.steering.conditional import ConditionalSteerer, SteeringPlan
from workbench.steering.gate import (
    LayerStats,
    choose_gate,
    choose_layers,
    layer_table,
    select_layers,
)

__all__ = [
    "ABSTENTIONS",
    "ConceptVectors",
    "Condition",
    "ConditionalSteerer",
    "LayerStats",
    "SteeringPlan",
    "choose_gate",
    "choose_layers",
    "collect_activations",
    "direction_agreement",
    "fit_concept_vectors",
    "fit_refusal_vector",
    "fit_repe_vectors",
    "layer_table",
    "pair_scatter",
    "select_layers",
]
