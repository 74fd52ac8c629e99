"""Chat formatting through the tokenizer's own chat template.

Some model families (e.g. Gemma) reject a ``system`` turn; for them the system prompt is folded
into the first user turn, which is what their own documentation recommends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.errors import ChatTemplateError

Message = Mapping[str, str]
#: A prompt is either a bare user message or a whole conversation.
Prompt = str | Sequence[Message]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def require_chat_template(tokenizer: Any, name: str = "this model") -> None:
    if not has_chat_template(tokenizer):
        raise ChatTemplateError(
            f"{name} has no chat template; the workbench needs an instruction-tuned model "
            "whose tokenizer defines one (tokenizer.chat_template)"
        )


def supports_system_prompt(tokenizer: Any) -> bool:
    """Whether the tokenizer's template accepts a ``system`` turn and actually renders it."""
    cached = getattr(tokenizer, "_workbench_supports_system", None)
    if cached is not None:
        return cached
    marker = "WORKBENCH-SYSTEM-PROBE"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "system", "content": marker}, {"role": "user", "content": "hi"}],
            tokenize=False,
            add_generation_prompt=True,
        )
        ok = marker in text
    except Exception:  # jinja raises TemplateError("System role not supported") and the like
        ok = False
    try:
        tokenizer._workbench_supports_system = ok
    except AttributeError:
        pass
    return ok


def to_messages(prompt: Prompt, system: str | None = None, fold_system: bool = False) -> list[dict]:
    """Turn a prompt into a list of chat messages, adding or folding a system prompt."""
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = [dict(m) for m in prompt]
    if system is not None:
        messages = [{"role": "system", "content": system}] + messages
    if fold_system and messages and messages[0]["role"] == "system":
        sys_text = messages.pop(0)["content"]
        for m in messages:
            if m["role"] == "user":
                m["content"] = f"{sys_text}\n\n{m['content']}"
                break
        else:
            messages.insert(0, {"role": "user", "content": sys_text})
    return messages


def render_chat(tokenizer: Any, prompt: Prompt, system: str | None = None) -> str:
    """Render a prompt with the tokenizer's chat template, ready for the assistant's turn.

    Args:
        tokenizer: a tokenizer with a chat template.
        prompt: a user message, or a list of ``{"role", "content"}`` messages.
        system: an optional system prompt; folded into the first user turn when the template
            rejects system turns.
    """
    require_chat_template(tokenizer)
    has_system = system is not None or (
        not isinstance(prompt, str) and len(prompt) > 0 and prompt[0]["role"] == "system"
    )
    fold = has_system and not supports_system_prompt(tokenizer)
    messages = to_messages(prompt, system=system, fold_system=fold)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
