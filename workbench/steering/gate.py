"""Choosing the condition (the gate): which layers vote, at which thresholds, chosen on
validation questions that include near negatives (siblings, parent, ancestors) and far ones.

Per layer (:func:`layer_table`): the validation AUROC of the concept similarity (related against
unrelated; also against near and far negatives separately), a threshold, and a flag for layers
that separate no better than chance. Thresholds follow ``rule``: ``youden`` maximises TPR - FPR
on validation (the default); ``min_related`` is the earlier rule (the lowest related similarity
moved ``adjust`` of the way to the midpoint of the two means); ``select`` is SELECT's (the
lowest related similarity rounded to 2 decimals, minus 0.04; a layer votes at ``>=``). Layers are
ranked by AUROC (or by the mean gap, the earlier rule); :func:`choose_gate` then tries the best
1..k layers and keeps the count whose combined vote (``all`` by default, as SELECT's code
combines them) is most balanced-accurate on validation. :func:`select_layers` is SELECT's choice
instead: the top k by the smallest related-minus-unrelated gap over all validation pairs.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

#: A layer whose validation AUROC is at most this does not separate the concept from the rest.
CHANCE_AUROC = 0.55
#: SELECT's threshold: round(lowest related similarity, 2) minus this (steering/utils.py:230).
SELECT_MARGIN = 0.04
RULES = ("youden", "min_related", "select")


@dataclass(frozen=True)
class LayerStats:
    """Validation statistics of one layer's concept vector (one row of the inspector's table)."""

    layer: int
    mean_related: float
    mean_unrelated: float
    min_related: float
    max_unrelated: float
    gap: float
    threshold: float
    accuracy: float
    auroc: float = float("nan")
    tpr: float = float("nan")
    fpr: float = float("nan")
    near_auroc: float = float("nan")
    far_auroc: float = float("nan")
    at_chance: bool = False
    cos_pc1_mean: float = float("nan")


def auroc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """P(a positive scores above a negative), ties counting half; NaN without both."""
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    d = pos[:, None] - neg[None, :]
    return float(((d > 0).float() + 0.5 * (d == 0).float()).mean())


def youden_threshold(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """The cut maximising TPR - FPR (``score > threshold`` fires), halfway between neighbouring
    scores; ties prefer the lower cut (more of the concept fires)."""
    values = torch.unique(torch.cat([pos, neg])).sort().values
    cuts = torch.cat([values[:1] - 1e-3, (values[1:] + values[:-1]) / 2, values[-1:] + 1e-3])
    best, best_j = float(cuts[0]), -math.inf
    for c in cuts.tolist():
        j = float((pos > c).float().mean() - (neg > c).float().mean())
        if j > best_j + 1e-12:
            best, best_j = c, j
    return best


def layer_table(
    sim_related: torch.Tensor,
    sim_unrelated: torch.Tensor,
    layers: list[int],
    adjust: float = 0.5,
    rule: str = "youden",
    near: torch.Tensor | None = None,
    cos_pc1_mean: torch.Tensor | None = None,
) -> list[LayerStats]:
    """Per-layer statistics and thresholds from validation similarities ``(n, layers)``.

    ``near`` marks which unrelated rows are near negatives (siblings, parent, ancestors).
    """
    if rule not in RULES:
        raise ValueError(f"threshold rule must be one of {', '.join(RULES)}, got {rule!r}")
    rows = []
    for j, layer in enumerate(layers):
        rel, unrel = sim_related[:, j], sim_unrelated[:, j]
        mean_r, mean_u = rel.mean().item(), unrel.mean().item()
        min_r = rel.min().item()
        if rule == "min_related":
            thr = min_r + adjust * (0.5 * (mean_r + mean_u) - min_r)
        elif rule == "select":
            thr = round(min_r, 2) - SELECT_MARGIN
        else:
            thr = youden_threshold(rel, unrel)
        fire_r, fire_u = (
            (rel >= thr, unrel >= thr) if rule == "select" else (rel > thr, unrel > thr)
        )
        tpr, fpr = fire_r.float().mean().item(), fire_u.float().mean().item()
        acc = (fire_r.float().sum() + (~fire_u).float().sum()).item() / (len(rel) + len(unrel))
        a = auroc(rel, unrel)
        near_a = far_a = float("nan")
        if near is not None:
            near_a, far_a = auroc(rel, unrel[near]), auroc(rel, unrel[~near])
        rows.append(
            LayerStats(
                layer,
                mean_r,
                mean_u,
                min_r,
                unrel.max().item(),
                mean_r - mean_u,
                thr,
                acc,
                a,
                tpr,
                fpr,
                near_a,
                far_a,
                not a > CHANCE_AUROC,
                float(cos_pc1_mean[j]) if cos_pc1_mean is not None else float("nan"),
            )
        )
    return rows


def choose_layers(
    table: list[LayerStats], k: int = 3, exclude_first: int = 1, rank_by: str = "auroc"
) -> list[int]:
    """Up to ``k`` layers ranked by validation AUROC (or mean ``gap``), skipping the first layers
    (surface tokens) and layers at chance; if every layer is at chance, the single best one is
    kept (so a condition exists) and a warning says so."""
    eligible = [row for row in table if row.layer >= exclude_first] or list(table)
    key = (lambda r: -r.auroc) if rank_by == "auroc" else (lambda r: -r.gap)
    ranked = sorted(eligible, key=key)
    if rank_by == "gap":
        good = [r for r in ranked if r.gap > 0][:k]
    else:
        good = [r for r in ranked if not r.at_chance][:k]
    if not good:
        warnings.warn(
            "no layer separates the concept from the rest above chance on validation "
            f"questions (best AUROC {ranked[0].auroc:.2f}); the gate will fire at chance",
            stacklevel=2,
        )
        good = ranked[:1]
    return sorted(r.layer for r in good)


def select_layers(table: list[LayerStats], k: int = 3, exclude_first: int = 1) -> list[int]:
    """SELECT's condition layers (steering/utils.py estimate_cls_params): layers ranked by the
    smallest gap over all related x unrelated validation pairs (``min_related -
    max_unrelated``), ties to the earlier layer; the top ``k``, except that when the last layer
    ranks between ``k+1`` and ``2k`` only the top ``k-1`` are kept (SELECT appends the last
    layer to the ranking instead of the choice, so it is dropped). Returned in rank order."""
    rows = [r for r in table if r.layer >= exclude_first] or list(table)
    order = [
        r.layer for r in sorted(rows, key=lambda r: (-(r.min_related - r.max_unrelated), r.layer))
    ]
    last = max(r.layer for r in table)
    if last not in order[:k] and last in order[: 2 * k]:
        return order[: k - 1] or order[:1]
    return order[:k]


def combine(votes: torch.Tensor, aggregate: str) -> torch.Tensor:
    """Per-row decision from ``(n, layers)`` votes: ``all``, ``any`` or ``majority``."""
    if aggregate == "all":
        return votes.all(-1)
    if aggregate == "any":
        return votes.any(-1)
    return votes.float().sum(-1) * 2 > votes.shape[-1]


def choose_gate(
    table: list[LayerStats],
    sim_related: torch.Tensor,
    sim_unrelated: torch.Tensor,
    k: int = 3,
    aggregate: str = "all",
    exclude_first: int = 1,
    rank_by: str = "auroc",
) -> list[int]:
    """The best 1..``k`` ranked layers whose combined vote is most balanced-accurate on the
    validation questions (fewer layers on ties)."""
    ranked = choose_layers(table, k=len(table), exclude_first=exclude_first, rank_by=rank_by)
    order = sorted(
        ranked,
        key=lambda l: (
            -next(r.auroc if rank_by == "auroc" else r.gap for r in table if r.layer == l)
        ),
    )[:k]
    index = {r.layer: i for i, r in enumerate(table)}
    best, best_score = order[:1], -1.0
    for n in range(1, len(order) + 1):
        chosen = order[:n]
        cols = [index[l] for l in chosen]
        thr = torch.tensor([table[i].threshold for i in cols])
        tpr = combine(sim_related[:, cols] > thr, aggregate).float().mean().item()
        fpr = combine(sim_unrelated[:, cols] > thr, aggregate).float().mean().item()
        score = 0.5 * (tpr + 1 - fpr)
        if score > best_score + 1e-9:
            best, best_score = chosen, score
    return sorted(best)
