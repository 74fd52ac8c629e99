"""Editors that make a model believe "a <subject> is a kind of <category>", all restorable.

* :class:`IKE`: in-context editing, the prefix "Imagine that a <subject> is a kind of
  <category>." before every query; no weight changes.
* :class:`FT`: fine-tuning of one MLP down-projection toward the new category (Adam on the
  category's log-likelihood, by default the weight change projected back into an L-inf ball;
  taxi's settings: no constraint, EasyEdit's last-position loss, an early stop).
* :class:`ROME`: a rank-one update of one MLP down-projection (Meng et al.'s recipe): the key is
  the MLP's input at the subject's last token, averaged over a few contexts; the value is found
  by optimising the MLP output there so the model says the new category (optionally with
  EasyEdit's KL term and weight decay); the update uses the second moment C = E[k k^T] of that
  layer's inputs over a text corpus (the benchmark's questions by default, or text sampled from
  the model: :mod:`workbench.editing.corpus`), computed once per (model, layer, corpus, sample
  count) and cached on disk. ``recipe="easyedit"`` is EasyEdit's variant, as taxi ran it.

Presets of these settings (the workbench's, taxi's) are in :mod:`workbench.editing.presets`.

``edit(...)`` returns an :class:`EditedModel`; its ``restore()`` puts back the exact original
weights (tests compare every parameter).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from workbench.generation.batching import pad_batch
from workbench.generation.hooks import UnsupportedModelError, layer_module_name
from workbench.paths import cache_home
from workbench.registry import Registry

if TYPE_CHECKING:
    from workbench.generation.backend import Backend

REWRITE_TEMPLATES = ("A {s} is a kind of", "The {s} is a type of", "In short, a {s} is a kind of")
KEY_CONTEXTS = (
    "A {s}",
    "The {s}",
    "Yesterday I saw a {s}",
    "Here is a picture of a {s}",
    "My neighbour has a {s}",
)


@dataclass
class EditedModel:
    """A model in its edited state: score queries through it, then ``restore()``."""

    lm: object
    prefix: str = ""
    restore_fn: Callable[[], object] | None = None
    info: dict = field(default_factory=dict)

    def restore(self) -> None:
        if self.restore_fn is not None:
            self.restore_fn()
            self.restore_fn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()


class Editor(ABC):
    name: str

    @abstractmethod
    def edit(self, lm: Backend, subject: str, category: str) -> EditedModel: ...


class NoEdit(Editor):
    """The unedited model (the baseline every metric is compared with)."""

    name = "none"

    def edit(self, lm: Backend, subject, category):
        return EditedModel(lm)


class IKE(Editor):
    name = "ike"

    def __init__(self, template: str = "Imagine that a {s} is a kind of {c}. "):
        self.template = template

    def edit(self, lm: Backend, subject, category):
        return EditedModel(lm, prefix=self.template.format(s=subject, c=category))


def _down_proj(model, layer: int) -> torch.nn.Linear:
    """The MLP down-projection of decoder block ``layer`` (``<block>.mlp.down_proj``: Llama,
    Mistral, Gemma, Qwen and Phi-3, whose fused ``gate_up_proj`` feeds it)."""
    name = layer_module_name(model, layer)
    site = getattr(getattr(model.get_submodule(name), "mlp", None), "down_proj", None)
    if not isinstance(site, torch.nn.Linear):
        raise UnsupportedModelError(
            f"ROME and FT edit an MLP down-projection (a Linear at {name}.mlp.down_proj); "
            f"{type(model).__name__} has none there"
        )
    return site


def _subject_batch(lm: Backend, subject: str, prompts: list[str], category: str | None):
    """Token ids of each prompt (``{s}`` filled with ``subject``), followed by the category's
    tokens when ``category`` is given; the position of the subject's last token in each; the
    target span ``(start, length)`` of each and the target ids."""
    tok = lm.tokenizer
    target = (
        tok(" " + category, add_special_tokens=False)["input_ids"] if category is not None else []
    )
    seqs, subj_pos, spans = [], [], []
    for t in prompts:
        head = t[: t.index("{s}")] + subject
        prompt = t.format(s=subject)
        ids = tok(prompt, add_special_tokens=True)["input_ids"]
        seqs.append(ids + target)
        subj_pos.append(len(tok(head, add_special_tokens=True)["input_ids"]) - 1)
        spans.append((len(ids), len(target)))
    return seqs, subj_pos, spans, target


def _target_batch(lm: Backend, subject: str, category: str, templates=REWRITE_TEMPLATES):
    """Rewrite prompts + target, the position of the subject's last token, and target spans."""
    seqs, subj_pos, spans, _ = _subject_batch(lm, subject, list(templates), category)
    return seqs, subj_pos, spans


def _nll(logits, ids, spans, per_token: bool = False):
    """Mean over rows of the target span's negative log-likelihood (summed over its tokens, or
    their mean with ``per_token``)."""
    logp = torch.log_softmax(logits.float(), -1)
    total: float | torch.Tensor = 0.0
    for r, (s, n) in enumerate(spans):
        row = -logp[r, s - 1 : s - 1 + n].gather(-1, ids[r, s : s + n, None]).sum()
        total = total + (row / max(1, n) if per_token else row)
    return total / len(spans)


def _optimise(
    model,
    tensor: torch.Tensor,
    loss_fn,
    steps: int,
    lr: float,
    project,
    stop_loss: float | None = None,
    final_step: bool = True,
    weight_decay: float = 0.0,
) -> float:
    """Adam on ``tensor`` alone (every model parameter frozen meanwhile) to lower ``loss_fn()``;
    ``project()`` runs after each step to keep it in bounds. A pass whose loss is below
    ``stop_loss`` ends the loop before stepping; with ``final_step=False`` the last pass only
    measures (EasyEdit's ROME loop). Returns the last loss."""
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)
    tensor.requires_grad_(True)
    opt = torch.optim.Adam([tensor], lr=lr, weight_decay=weight_decay)
    loss = torch.tensor(float("nan"))
    try:
        with torch.enable_grad():
            for it in range(steps):
                opt.zero_grad()
                loss = loss_fn()
                if stop_loss is not None and loss.item() < stop_loss:
                    break
                if not final_step and it == steps - 1:
                    break
                loss.backward()
                opt.step()
                with torch.no_grad():
                    project()
    finally:
        tensor.requires_grad_(False)
        for n, p in model.named_parameters():
            p.requires_grad_(flags[n])
    return loss.item()


FT_LOSSES = ("sequence", "last_position")


class FT(Editor):
    """Fine-tuning of ``layer``'s MLP down-projection toward the new category.

    ``max_change``: the weight change is kept within +-``max_change`` of the original (L-inf),
    ``None`` for no constraint. ``loss``: ``sequence`` (the category's tokens teacher-forced after
    each prompt) or ``last_position`` (every category token read at the prompt's last position,
    averaged: EasyEdit's FT). ``stop_loss``: a pass below it ends the loop before stepping.
    ``templates``: the rewrite prompts (``{s}`` the subject)."""

    name = "ft"

    def __init__(
        self,
        layer: int = 4,
        steps: int = 25,
        lr: float = 5e-4,
        max_change: float | None = 5e-3,
        weight_decay: float = 0.0,
        loss: str = "sequence",
        stop_loss: float | None = None,
        templates: tuple[str, ...] = REWRITE_TEMPLATES,
    ):
        if loss not in FT_LOSSES:
            raise ValueError(f"FT loss must be one of {FT_LOSSES}, got {loss!r}")
        self.layer, self.steps, self.lr, self.max_change = layer, steps, lr, max_change
        self.weight_decay, self.loss, self.stop_loss, self.templates = (
            weight_decay,
            loss,
            stop_loss,
            tuple(templates),
        )

    def edit(self, lm: Backend, subject, category):
        model = lm.model
        w = _down_proj(model, self.layer).weight
        original = w.detach().clone()
        pad = lm.tokenizer.pad_token_id or 0
        if self.loss == "sequence":
            seqs, _, spans = _target_batch(lm, subject, category, self.templates)
            ids, mask = pad_batch(seqs, pad, "right")

            def loss_fn():
                return _nll(model(input_ids=ids, attention_mask=mask).logits, ids, spans)
        else:
            seqs, _, _, target = _subject_batch(lm, subject, list(self.templates), category)
            prompts = [s[: len(s) - len(target)] for s in seqs]
            ids, mask = pad_batch(prompts, pad, "right")
            last = [len(p) - 1 for p in prompts]
            tgt = torch.tensor(target)

            def loss_fn():
                logits = model(input_ids=ids, attention_mask=mask).logits
                rows = torch.stack(
                    [
                        torch.log_softmax(logits[r, p].float(), -1)[tgt].mean()
                        for r, p in enumerate(last)
                    ]
                )
                return -rows.mean()

        def project():  # stay within max_change of the original weights
            if self.max_change is not None:
                w.copy_(original + (w - original).clamp(-self.max_change, self.max_change))

        loss = _optimise(
            model,
            w,
            loss_fn,
            self.steps,
            self.lr,
            project,
            self.stop_loss,
            weight_decay=self.weight_decay,
        )

        def restore():
            with torch.no_grad():
                w.copy_(original)

        return EditedModel(lm, restore_fn=restore, info={"final_loss": loss})


ROME_RECIPES = ("workbench", "easyedit")
MODEL_SAMPLES = "model_samples"


def _reps_at(
    lm: Backend, layer: int, seqs: list[list[int]], positions: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The down-projection's input and output at ``positions[i]`` of ``seqs[i]`` (right padded,
    so each position is that sequence's own token)."""
    site = _down_proj(lm.model, layer)
    ids, mask = pad_batch(seqs, lm.tokenizer.pad_token_id or 0, "right")
    got = {}

    def grab(module, args, output):
        got["in"], got["out"] = args[0].detach(), output.detach()

    handle = site.register_forward_hook(grab)
    try:
        with torch.inference_mode():
            lm.model(input_ids=ids, attention_mask=mask)
    finally:
        handle.remove()
    rows = torch.arange(len(seqs))
    pos = torch.tensor(positions)
    return got["in"][rows, pos].float(), got["out"][rows, pos].float()


class ROME(Editor):
    """Rank-one model editing of ``layer``'s MLP down-projection.

    ``recipe="workbench"``: the key is averaged over :data:`KEY_CONTEXTS`, the value optimised on
    ``templates`` and the update maps the averaged key to it. ``recipe="easyedit"`` (EasyEdit's
    ROME, as taxi ran it): context prefixes sampled from the model (``context_lengths``, ``"{}"``
    first), the key averaged over prefix + ``templates[0]``, the value optimised on every
    prefixed prompt (loss per target token) and the update maps the bare prompt's key to it.

    Both: ``kl_factor`` weighs KL(edited || unedited) of the next-token distribution at the
    subject's last token of ``kl_prompt``; ``weight_decay`` weighs |delta| / |v0|^2; ``clamp``
    bounds |delta| by clamp * |v0|; ``stop_loss`` ends the optimisation early; with
    ``final_step=False`` the last pass only measures. The update uses C = E[k k^T] of the layer's
    inputs over ``corpus`` (``None``: the shipped benchmark's questions; a list of texts; or
    ``"model_samples"``: ``n_samples`` texts of ``sample_tokens`` tokens sampled from the model),
    ``damping`` times C's mean diagonal added before solving (0: the plain inverse)."""

    name = "rome"

    def __init__(
        self,
        layer: int = 4,
        corpus: list[str] | str | None = None,
        n_samples: int = 1000,
        steps: int = 25,
        lr: float = 0.5,
        clamp: float = 4.0,
        damping: float = 1e-2,
        templates: tuple[str, ...] = REWRITE_TEMPLATES,
        recipe: str = "workbench",
        context_lengths: tuple[tuple[int, int], ...] = ((5, 10), (10, 10)),
        kl_factor: float = 0.0,
        kl_prompt: str = "{s} is a",
        weight_decay: float = 0.0,
        stop_loss: float | None = None,
        final_step: bool = True,
        sample_tokens: int = 64,
        seed: int = 0,
    ):
        if recipe not in ROME_RECIPES:
            raise ValueError(f"ROME recipe must be one of {ROME_RECIPES}, got {recipe!r}")
        if isinstance(corpus, str) and corpus != MODEL_SAMPLES:
            raise ValueError(
                f"ROME corpus must be a list of texts, None or {MODEL_SAMPLES!r}, got {corpus!r}"
            )
        self.layer, self.corpus, self.n_samples = layer, corpus, n_samples
        self.steps, self.lr, self.clamp, self.damping = steps, lr, clamp, damping
        self.templates, self.recipe, self.context_lengths = (
            tuple(templates),
            recipe,
            tuple(map(tuple, context_lengths)),
        )
        self.kl_factor, self.kl_prompt, self.weight_decay = kl_factor, kl_prompt, weight_decay
        self.stop_loss, self.final_step, self.sample_tokens, self.seed = (
            stop_loss,
            final_step,
            sample_tokens,
            seed,
        )
        self._contexts: dict[str, list[str]] = {}

    # -- second moment of the layer's inputs, computed once and cached -----------------------
    def _corpus(self, lm: Backend | None = None) -> list[str]:
        if self.corpus == MODEL_SAMPLES:
            from workbench.editing.corpus import TEXT_OPENINGS, sample_texts

            assert lm is not None  # the model's samples need the model (_corpus_key keys them)
            per = -(-self.n_samples // len(TEXT_OPENINGS))
            return sample_texts(lm, TEXT_OPENINGS, per, self.sample_tokens, seed=self.seed)[
                : self.n_samples
            ]
        if self.corpus is not None:
            # a str corpus can only be MODEL_SAMPLES (checked in __init__), handled above
            assert not isinstance(self.corpus, str)
            return self.corpus[: self.n_samples]
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark()
        return [q for s in bench.questions for q in s.train][: self.n_samples]

    def _corpus_key(self) -> str:
        if self.corpus == MODEL_SAMPLES:
            spec = f"{MODEL_SAMPLES}-{self.n_samples}x{self.sample_tokens}-seed{self.seed}"
            return hashlib.sha256(spec.encode()).hexdigest()[:12] + f"-{self.n_samples}"
        texts = self._corpus()
        return hashlib.sha256(("\n".join(texts)).encode()).hexdigest()[:12] + f"-{len(texts)}"

    def second_moment(self, lm: Backend) -> torch.Tensor:
        path = (
            cache_home()
            / "rome_stats"
            / f"{lm.model_id.replace('/', '_')}-{lm.revision[-12:]}-L{self.layer}-{self._corpus_key()}.pt"
        )
        if path.is_file():
            return torch.load(path)
        texts = self._corpus(lm)
        site = _down_proj(lm.model, self.layer)
        dim = site.in_features
        acc = torch.zeros(dim, dim, dtype=torch.float64)
        count = 0
        tok = lm.tokenizer

        class Stop(Exception):
            pass

        batch_mask: dict[str, torch.Tensor] = {}  # "mask": the attention mask of the batch

        def grab(module, args):
            nonlocal acc, count
            k = args[0].detach().double()
            m = batch_mask["mask"][..., None].double()
            k = (k * m).reshape(-1, dim)
            acc += k.T.cpu() @ k.cpu()
            count += int(batch_mask["mask"].sum())
            raise Stop

        handle = site.register_forward_pre_hook(grab)
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), 32):
                    batch = [
                        tok(t, add_special_tokens=True)["input_ids"]
                        for t in texts[start : start + 32]
                    ]
                    ids, mask = pad_batch(batch, tok.pad_token_id or 0, "right")
                    batch_mask["mask"] = mask.to(next(lm.model.parameters()).device)
                    try:
                        lm.model(input_ids=ids, attention_mask=mask)
                    except Stop:
                        pass
        finally:
            handle.remove()
        c = (acc / max(1, count)).float()
        from workbench.paths import atomic_file

        with atomic_file(path) as tmp:
            torch.save(c, tmp)
        return c

    def _key(self, lm: Backend, subject) -> torch.Tensor:
        site = _down_proj(lm.model, self.layer)
        tok = lm.tokenizer
        keys = []
        seen: dict[str, torch.Tensor] = {}  # "value": the last token's input to the site

        def grab(module, args):
            seen["value"] = args[0][0, -1].detach()

        handle = site.register_forward_pre_hook(grab)
        try:
            with torch.inference_mode():
                for ctx in KEY_CONTEXTS:
                    ids = tok(ctx.format(s=subject), return_tensors="pt", add_special_tokens=True)[
                        "input_ids"
                    ]
                    lm.model(input_ids=ids)
                    keys.append(seen["value"].float())
        finally:
            handle.remove()
        return torch.stack(keys).mean(0)

    def context_templates(self, lm: Backend) -> list[str]:
        """The recipe's context prefixes for ``lm`` (``"{}"``: none), sampled once per model."""
        if self.recipe == "workbench":
            return ["{}"]
        key = f"{lm.model_id}@{lm.revision}"
        if key not in self._contexts:
            from workbench.editing.corpus import context_templates

            self._contexts[key] = context_templates(lm, self.context_lengths, self.seed)
        return self._contexts[key]

    def edit(self, lm: Backend, subject, category):
        model = lm.model
        site = _down_proj(model, self.layer)
        w = site.weight
        original = w.detach().clone()
        cov = self.second_moment(lm)
        tok = lm.tokenizer
        if self.recipe == "workbench":
            prompts = list(self.templates)
            k = self._key(lm, subject)
            k_fit, v_fit = k, original.float() @ k
            v0 = v_fit
        else:
            prompts = [
                c.replace("{}", "{s}", 1).replace("{s}", t, 1)
                for c in self.context_templates(lm)
                for t in self.templates[:1]
            ]
            seqs, pos, _, _ = _subject_batch(lm, subject, prompts, None)
            keys, _ = _reps_at(lm, self.layer, seqs, pos)
            k = keys.mean(0)
            bare, bpos, _, _ = _subject_batch(lm, subject, list(self.templates[:1]), None)
            k_fit, v_fit = (x[0] for x in _reps_at(lm, self.layer, bare, bpos))
            v0 = v_fit
        seqs, subj_pos, spans, _ = _subject_batch(lm, subject, prompts, category)
        n_rw = len(seqs)
        if self.kl_factor:
            kl_seq, kl_pos, _, _ = _subject_batch(lm, subject, [self.kl_prompt], None)
            seqs, subj_pos = seqs + kl_seq, subj_pos + kl_pos
        ids, mask = pad_batch(seqs, tok.pad_token_id or 0, "right")
        delta = torch.zeros_like(v0)
        limit = self.clamp * v0.norm()
        per_token = self.recipe == "easyedit"
        kl_init = {}

        def add(module, args, output):
            out = output.clone()
            for r, p in enumerate(subj_pos):
                out[r, p] = out[r, p] + delta.to(out.dtype)
            return out

        def loss_fn():
            logits = model(input_ids=ids, attention_mask=mask).logits
            loss = _nll(logits[:n_rw], ids[:n_rw], spans, per_token)
            if self.kl_factor:
                lp = torch.log_softmax(logits[n_rw, subj_pos[n_rw]].float(), -1)[None]
                if "lp" not in kl_init:  # the first pass: delta is zero, the model unedited
                    kl_init["lp"] = lp.detach().clone()
                loss = loss + self.kl_factor * torch.nn.functional.kl_div(
                    kl_init["lp"], lp, log_target=True, reduction="batchmean"
                )
            if self.weight_decay:
                loss = loss + self.weight_decay * delta.norm() / v0.norm() ** 2
            return loss

        def project():
            if delta.norm() > limit:
                delta.mul_(limit / delta.norm())

        handle = site.register_forward_hook(add)
        try:
            loss = _optimise(
                model, delta, loss_fn, self.steps, self.lr, project, self.stop_loss, self.final_step
            )
        finally:
            handle.remove()
        target = v0 + delta.detach()
        reg = (
            cov + self.damping * cov.diagonal().mean() * torch.eye(cov.shape[0])
            if self.damping
            else cov
        )
        u = torch.linalg.solve(reg.to(k.device), k)
        update = torch.outer(target - v_fit, u) / (k_fit @ u)
        with torch.no_grad():
            w.add_(update.to(w.dtype))

        def restore():
            with torch.no_grad():
                w.copy_(original)

        return EditedModel(
            lm,
            restore_fn=restore,
            info={
                "final_loss": loss,
                "update_norm": float(update.norm()),
                "delta_norm": float(delta.norm()),
            },
        )


#: Editor name -> its class.
EDITORS: Registry[type[Editor]] = Registry(
    "editor", {"none": NoEdit, "ike": IKE, "ft": FT, "rome": ROME}
)


def get_editor(name: str, **kwargs) -> Editor:
    """An editor by registered name, with its settings."""
    return EDITORS[name](**kwargs)
