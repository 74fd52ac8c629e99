"""The refusal probe's classifier: multinomial logistic regression on standardised features.

Fitted in float64 with L-BFGS (class-balanced weights, an L2 penalty ``1 / (2 C)``, as
scikit-learn's ``LogisticRegression(C, class_weight="balanced")`` minimises), then calibrated
by one temperature fitted on out-of-fold logits (folds by a hash of each text), so that its
probabilities mean what they say. Saved as JSON with its settings and provenance: the head
that ships in ``data/detectors/`` needs nothing but torch to run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import torch

from workbench.errors import ConfigError
from workbench.scoring.probe.features import FeatureSettings

#: the classes a head may predict, in this order (``partial`` only where labels have it)
CLASSES = ("compliance", "refusal", "partial")


@dataclass
class ProbeHead:
    """A fitted head: ``weight`` (classes x features) and ``bias`` over features standardised
    by ``mean`` / ``scale``, logits divided by ``temperature``."""

    settings: FeatureSettings
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weight: np.ndarray
    bias: np.ndarray
    temperature: float = 1.0
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the probe's confidence that overrules the phrase detector in the ``combined`` detector
    #: (:mod:`workbench.scoring.probe.combined`), chosen on the development halves
    overrule: float = 0.95

    def logits(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, np.float64)
        if x.ndim != 2 or x.shape[1] != self.mean.shape[0]:
            raise ConfigError(
                f"features of shape {x.shape} but the head reads {self.mean.shape[0]} columns: "
                f"read them with its settings ({self.settings})"
            )
        x = (x - self.mean) / self.scale
        return (x @ self.weight.T + self.bias) / self.temperature

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Calibrated class probabilities, shape ``(n, len(classes))``."""
        z = self.logits(features)
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def refusal_probability(self, features: np.ndarray) -> np.ndarray:
        """P(refusal) + P(partial): partial refusals count as refusals, as in every table."""
        p = self.probabilities(features)
        keep = [i for i, c in enumerate(self.classes) if c != "compliance"]
        return p[:, keep].sum(1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "workbench-refusal-probe/1",
            "settings": {**asdict(self.settings), "layers": list(self.settings.layers)},
            "classes": list(self.classes),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weight": self.weight.tolist(),
            "bias": self.bias.tolist(),
            "temperature": self.temperature,
            "overrule": self.overrule,
            "provenance": self.provenance,
        }

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ProbeHead:
        p = Path(path)
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"no refusal probe at {p}") from None
        except (UnicodeDecodeError, ValueError) as e:
            raise ConfigError(f"{p} is not a refusal probe (not JSON: {e})") from None
        if not isinstance(d, dict) or d.get("format") != "workbench-refusal-probe/1":
            raise ConfigError(f"{p} is not a refusal probe (format workbench-refusal-probe/1)")
        try:
            s = d["settings"]
            settings = FeatureSettings(
                str(s["model"]),
                tuple(int(l) for l in s["layers"]),
                int(s["max_tokens"]),
                bool(s.get("context", False)),  # heads from before questions were read
                int(s.get("question_tokens", FeatureSettings.question_tokens)),
            )
            head = cls(
                settings,
                tuple(str(c) for c in d["classes"]),
                np.asarray(d["mean"], np.float64),
                np.asarray(d["scale"], np.float64),
                np.asarray(d["weight"], np.float64),
                np.asarray(d["bias"], np.float64),
                float(d["temperature"]),
                d.get("provenance", {}),
                float(d.get("overrule", cls.overrule)),
            )
        except KeyError as e:
            raise ConfigError(f"{p} is not a whole refusal probe: it has no {e}") from None
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{p} is not a refusal probe ({e})") from None
        problem = head.problem()
        if problem:
            raise ConfigError(f"{p} is not a usable refusal probe: {problem}")
        return head

    def problem(self) -> str | None:
        """What makes this head unusable (shapes that disagree, unknown classes, a temperature
        that is not above 0), or ``None``."""
        n = self.mean.shape[-1] if self.mean.ndim == 1 else -1
        k = len(self.classes)
        if not self.settings.model or not self.settings.layers:
            return "its settings name no model or no layers"
        if unknown := sorted(set(self.classes) - set(CLASSES)):
            return f"class {unknown[0]!r} is not one of {', '.join(CLASSES)}"
        if k < 2 or len(set(self.classes)) != k:
            return f"classes {list(self.classes)}: two or more different ones are needed"
        if n < 1 or self.scale.shape != (n,):
            return f"mean {self.mean.shape} and scale {self.scale.shape} are not one row each"
        if self.weight.shape != (k, n) or self.bias.shape != (k,):
            return (
                f"weight {self.weight.shape} and bias {self.bias.shape} do not fit {k} classes "
                f"over {n} features"
            )
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            return f"temperature {self.temperature}: it must be above 0"
        arrays = (self.mean, self.scale, self.weight, self.bias)
        if not all(np.isfinite(a).all() for a in arrays) or (self.scale <= 0).any():
            return "it holds numbers that are not finite (or a scale not above 0)"
        return None


def _fit_lr(
    x: np.ndarray, y: np.ndarray, k: int, c: float, prior: tuple | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias minimising the class-balanced cross-entropy + ||W - W0||^2 / (2 C)
    (W0 the ``prior``'s weights, or zeros)."""
    counts = np.bincount(y, minlength=k).astype(np.float64)
    present = max(1, int((counts > 0).sum()))
    sample_w = torch.tensor((len(y) / (present * np.maximum(counts, 1)))[y])
    xt, yt = torch.tensor(x), torch.tensor(y)
    w0 = (
        torch.tensor(prior[0], dtype=torch.float64)
        if prior
        else torch.zeros(k, x.shape[1], dtype=torch.float64)
    )
    w = w0.clone().requires_grad_(True)
    b = (
        torch.tensor(prior[1], dtype=torch.float64)
        if prior
        else torch.zeros(k, dtype=torch.float64)
    ).requires_grad_(True)
    opt = torch.optim.LBFGS(
        [w, b], lr=1, max_iter=500, tolerance_grad=1e-8, line_search_fn="strong_wolfe"
    )

    def loss_fn():
        opt.zero_grad()
        ce = torch.nn.functional.cross_entropy(xt @ w.T + b, yt, reduction="none")
        loss = (sample_w * ce).sum() + ((w - w0) ** 2).sum() / (2 * c)
        loss.backward()
        return loss

    opt.step(loss_fn)
    return w.detach().numpy(), b.detach().numpy()


def _fold(text: str, k: int) -> int:
    return hashlib.sha256(text.encode()).digest()[0] % k


def _temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The temperature minimising the negative log-likelihood of ``logits``."""
    z, yt = torch.tensor(logits), torch.tensor(y)
    log_t = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.5, max_iter=100, line_search_fn="strong_wolfe")

    def loss_fn():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_t.exp(), yt)
        loss.backward()
        return loss

    opt.step(loss_fn)
    return float(log_t.detach().exp())


def check_training(labels: Sequence[object], c: float) -> list[str]:
    """``labels`` as strings a head can be fitted on with inverse L2 strength ``c``, or one
    line naming what cannot: an unknown label, a single class, a C that is not above 0.
    Cheap: called before any features are read."""
    if isinstance(c, bool) or not (isinstance(c, Real) and math.isfinite(c) and c > 0):
        raise ConfigError(f"C {c!r}: the inverse L2 strength must be a finite number above 0")
    out = [str(l) for l in labels]
    unknown = sorted(set(out) - set(CLASSES))
    if unknown:
        raise ConfigError(f"unknown label {unknown[0]!r}: labels are {', '.join(CLASSES)}")
    counts = Counter(out)
    if len(counts) < 2:
        only = next(iter(counts), "no")
        raise ConfigError(
            f"the labelled set has {only!r} answers only ({len(out)}): training needs at "
            "least two classes"
        )
    return out


def fit_head(
    features: np.ndarray,
    labels: Sequence[str],
    *,
    texts: Sequence[str] | None = None,
    settings: FeatureSettings | None = None,
    c: float = 0.05,
    folds: int = 5,
    provenance: dict[str, Any] | None = None,
    prior: ProbeHead | None = None,
    standardize: bool = True,
) -> ProbeHead:
    """A head fitted on ``features`` with ``labels`` (compliance / refusal / partial), its
    temperature from ``folds`` out-of-fold fits (folds by a hash of ``texts[i]``, else of the
    row index). One class alone is refused: there is nothing to tell apart.

    With ``prior`` (the shipped head, say) the fit starts from its weights and is pulled
    towards them instead of towards zero, on its standardisation and classes: a few hundred
    labels of your own adjust it without losing what it learned from the sets it came from."""
    labels = check_training(labels, c)
    counts = Counter(labels)
    if len(features) != len(labels):
        raise ConfigError(f"{len(features)} feature rows but {len(labels)} labels")
    if texts is not None and len(texts) != len(labels):
        raise ConfigError(f"{len(texts)} texts but {len(labels)} labels")
    if isinstance(folds, bool) or not isinstance(folds, Integral) or folds < 2:
        raise ConfigError(f"folds {folds!r}: calibration needs at least 2 folds")
    c, folds = float(c), int(folds)
    x = np.asarray(features, np.float64)
    if prior is not None:
        missing = sorted(set(counts) - set(prior.classes))
        if missing:
            raise ConfigError(
                f"label {missing[0]!r} is not one of the prior head's classes "
                f"({', '.join(prior.classes)})"
            )
        if x.shape[1] != prior.weight.shape[1]:
            raise ConfigError(
                f"features have {x.shape[1]} columns but the prior head reads "
                f"{prior.weight.shape[1]}: read them with its settings ({prior.settings})"
            )
        classes, mean, scale = prior.classes, prior.mean, prior.scale
        start: tuple | None = (prior.weight, prior.bias)
    else:
        classes = tuple(c_ for c_ in CLASSES if c_ in counts)
        mean = x.mean(0) if standardize else np.zeros(x.shape[1])
        scale = x.std(0) if standardize else np.ones(x.shape[1])
        scale[scale < 1e-12] = 1.0
        start = None
    y = np.array([classes.index(l) for l in labels])
    xs = (x - mean) / scale
    k = len(classes)
    keys = list(texts) if texts is not None else [str(i) for i in range(len(y))]
    fold = np.array([_fold(t, folds) for t in keys])
    oof = np.zeros((len(y), k))
    for f in range(folds):
        train, test = fold != f, fold == f
        if not test.any() or len(set(y[train])) < len(counts):
            continue
        w, b = _fit_lr(xs[train], y[train], k, c, start)
        oof[test] = xs[test] @ w.T + b
    covered = np.abs(oof).sum(1) > 0
    temperature = _temperature(oof[covered], y[covered]) if covered.any() else 1.0
    weight, bias = _fit_lr(xs, y, k, c, start)
    prov = {
        **(provenance or {}),
        **(
            {"prior": {k: prior.provenance.get(k) for k in ("sources", "answers", "counts")}}
            if prior is not None
            else {}
        ),
        "counts": {c_: counts[c_] for c_ in classes},
        "c": c,
        "folds": folds,
    }
    settings = prior.settings if prior is not None else settings or FeatureSettings()
    overrule = prior.overrule if prior is not None else ProbeHead.overrule
    return ProbeHead(settings, classes, mean, scale, weight, bias, temperature, prov, overrule)
