"""Editors that make a model believe "a <subject> is a kind of <category>", all restorable.

* :class:`IKE`: in-context editing, the prefix "Imagine that a <subject> is a kind of
  <category>." before every query; no weight changes.
* :class:`FT`: constrained fine-tuning of one MLP down-projection toward the new category
  (Adam on the category's log-likelihood, the weight change projected back into an L-inf ball).
* :class:`ROME`: a rank-one update of one MLP down-projection (Meng et al.'s recipe): the key is
  the MLP's input at the subject's last token, averaged over a few contexts; the value is found
  by optimising the MLP output there so the model says the new category; the update uses the
  second moment C = E[k k^T] of that layer's inputs over a shipped text corpus (the benchmark's
  questions), computed once per (model, layer, corpus, sample count) and cached on disk.

``edit(...)`` returns an :class:`EditedModel`; its ``restore()`` puts back the exact original
weights (tests compare every parameter).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from workbench.generation.batching import pad_batch
from workbench.paths import cache_home

REWRITE_TEMPLATES = ("A {s} is a kind of", "The {s} is a type of", "In short, a {s} is a kind of")
KEY_CONTEXTS = ("A {s}", "The {s}", "Yesterday I saw a {s}", "Here is a picture of a {s}", "My neighbour has a {s}")


@dataclass
class EditedModel:
    """A model in its edited state: score queries through it, then ``restore()``."""

    lm: object
    prefix: str = ""
    restore_fn: object = None
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
    def edit(self, lm, subject: str, category: str) -> EditedModel: ...


class NoEdit(Editor):
    """The unedited model (the baseline every metric is compared with)."""

    name = "none"

    def edit(self, lm, subject, category):
        return EditedModel(lm)


class IKE(Editor):
    name = "ike"

    def __init__(self, template: str = "Imagine that a {s} is a kind of {c}. "):
        self.template = template

    def edit(self, lm, subject, category):
        return EditedModel(lm, prefix=self.template.format(s=subject, c=category))


def _down_proj(model, layer: int):
    return model.model.layers[layer].mlp.down_proj


def _target_batch(lm, subject: str, category: str):
    """Rewrite prompts + target, the position of the subject's last token, and target ids."""
    tok = lm.tokenizer
    seqs, subj_pos, tgt_spans = [], [], []
    target = tok(" " + category, add_special_tokens=False)["input_ids"]
    for t in REWRITE_TEMPLATES:
        prompt = t.format(s=subject)
        ids = tok(prompt, add_special_tokens=True)["input_ids"]
        head = tok(prompt[: prompt.index(subject) + len(subject)], add_special_tokens=True)["input_ids"]
        seqs.append(ids + target)
        subj_pos.append(len(head) - 1)
        tgt_spans.append((len(ids), len(target)))
    return seqs, subj_pos, tgt_spans


def _nll(logits, ids, spans):
    logp = torch.log_softmax(logits.float(), -1)
    total = 0.0
    for r, (s, n) in enumerate(spans):
        total = total - logp[r, s - 1:s - 1 + n].gather(-1, ids[r, s:s + n, None]).sum()
    return total / len(spans)


def _optimise(model, tensor: torch.Tensor, ids, mask, spans, steps: int, lr: float, project) -> float:
    """Adam on ``tensor`` alone (every model parameter frozen meanwhile) to lower the target's
    NLL; ``project()`` runs after each step to keep it in bounds. Returns the last loss."""
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)
    tensor.requires_grad_(True)
    opt = torch.optim.Adam([tensor], lr=lr)
    try:
        with torch.enable_grad():
            for _ in range(steps):
                opt.zero_grad()
                loss = _nll(model(input_ids=ids, attention_mask=mask).logits, ids, spans)
                loss.backward()
                opt.step()
                with torch.no_grad():
                    project()
    finally:
        for n, p in model.named_parameters():
            p.requires_grad_(flags[n])
    return loss.item()


class FT(Editor):
    """Constrained fine-tuning of ``layer``'s MLP down-projection."""

    name = "ft"

    def __init__(self, layer: int = 4, steps: int = 25, lr: float = 5e-4, max_change: float = 5e-3):
        self.layer, self.steps, self.lr, self.max_change = layer, steps, lr, max_change

    def edit(self, lm, subject, category):
        model = lm.model
        w = _down_proj(model, self.layer).weight
        original = w.detach().clone()
        seqs, _, spans = _target_batch(lm, subject, category)
        ids, mask = pad_batch(seqs, lm.tokenizer.pad_token_id or 0, "right")

        def project():  # stay within max_change of the original weights
            w.copy_(original + (w - original).clamp(-self.max_change, self.max_change))

        loss = _optimise(model, w, ids, mask, spans, self.steps, self.lr, project)

        def restore():
            with torch.no_grad():
                w.copy_(original)

        return EditedModel(lm, restore_fn=restore, info={"final_loss": loss})


class ROME(Editor):
    """Rank-one model editing of ``layer``'s MLP down-projection."""

    name = "rome"

    def __init__(self, layer: int = 4, corpus: list[str] | None = None, n_samples: int = 1000,
                 steps: int = 25, lr: float = 0.5, clamp: float = 4.0, damping: float = 1e-2):
        self.layer, self.corpus, self.n_samples = layer, corpus, n_samples
        self.steps, self.lr, self.clamp, self.damping = steps, lr, clamp, damping

    # -- second moment of the layer's inputs, computed once and cached -----------------------
    def _corpus(self) -> list[str]:
        if self.corpus is not None:
            return self.corpus[: self.n_samples]
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark()
        return [q for s in bench.questions for q in s.train][: self.n_samples]

    def second_moment(self, lm) -> torch.Tensor:
        texts = self._corpus()
        key = hashlib.sha256(("\n".join(texts)).encode()).hexdigest()[:12]
        path = cache_home() / "rome_stats" / f"{lm.model_id.replace('/', '_')}-{lm.revision[-12:]}-L{self.layer}-{key}-{len(texts)}.pt"
        if path.is_file():
            return torch.load(path)
        site = _down_proj(lm.model, self.layer)
        dim = site.in_features
        acc = torch.zeros(dim, dim, dtype=torch.float64)
        count = 0
        tok = lm.tokenizer

        class Stop(Exception):
            pass

        def grab(module, args):
            nonlocal acc, count
            k = args[0].detach().double()
            m = grab.mask[..., None].double()
            k = (k * m).reshape(-1, dim)
            acc += k.T @ k
            count += int(grab.mask.sum())
            raise Stop

        handle = site.register_forward_pre_hook(grab)
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), 32):
                    batch = [tok(t, add_special_tokens=True)["input_ids"] for t in texts[start:start + 32]]
                    ids, mask = pad_batch(batch, tok.pad_token_id or 0, "right")
                    grab.mask = mask.to(next(lm.model.parameters()).device)
                    try:
                        lm.model(input_ids=ids, attention_mask=mask)
                    except Stop:
                        pass
        finally:
            handle.remove()
        c = (acc / max(1, count)).float()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(c, tmp)
        tmp.replace(path)
        return c

    def _key(self, lm, subject) -> torch.Tensor:
        site = _down_proj(lm.model, self.layer)
        tok = lm.tokenizer
        keys = []

        def grab(module, args):
            grab.value = args[0][0, -1].detach()

        handle = site.register_forward_pre_hook(grab)
        try:
            with torch.inference_mode():
                for ctx in KEY_CONTEXTS:
                    ids = tok(ctx.format(s=subject), return_tensors="pt", add_special_tokens=True)["input_ids"]
                    lm.model(input_ids=ids)
                    keys.append(grab.value.float())
        finally:
            handle.remove()
        return torch.stack(keys).mean(0)

    def edit(self, lm, subject, category):
        model = lm.model
        site = _down_proj(model, self.layer)
        w = site.weight
        original = w.detach().clone()
        cov = self.second_moment(lm)
        k = self._key(lm, subject)
        seqs, subj_pos, spans = _target_batch(lm, subject, category)
        ids, mask = pad_batch(seqs, lm.tokenizer.pad_token_id or 0, "right")
        base = (original.float() @ k)
        delta = torch.zeros_like(base, requires_grad=True)
        limit = self.clamp * base.norm()

        def add(module, args, output):
            out = output.clone()
            for r, p in enumerate(subj_pos):
                out[r, p] = out[r, p] + delta.to(out.dtype)
            return out

        def project():
            if delta.norm() > limit:
                delta.mul_(limit / delta.norm())

        handle = site.register_forward_hook(add)
        try:
            loss = _optimise(model, delta, ids, mask, spans, self.steps, self.lr, project)
        finally:
            handle.remove()
        target = base + delta.detach()
        reg = cov + self.damping * cov.diagonal().mean() * torch.eye(cov.shape[0])
        u = torch.linalg.solve(reg, k)
        update = torch.outer(target - base, u) / (k @ u)
        with torch.no_grad():
            w.add_(update.to(w.dtype))

        def restore():
            with torch.no_grad():
                w.copy_(original)

        return EditedModel(lm, restore_fn=restore, info={"final_loss": loss,
                                                         "update_norm": float(update.norm())})


EDITORS = {"none": NoEdit, "ike": IKE, "ft": FT, "rome": ROME}


def get_editor(name: str, **kwargs) -> Editor:
    from workbench.errors import ConfigError

    if name not in EDITORS:
        raise ConfigError(f"unknown editor {name!r}; known: {', '.join(EDITORS)}")
    return EDITORS[name](**kwargs)
