"""Reading settings out of a published code base without running it (SELECT's and taxi's protocol
readers parse the authors' Python with ``ast``)."""

from __future__ import annotations

import ast
from collections.abc import Callable


def fstring_template(node: ast.JoinedStr, field: Callable[[ast.expr], str | None]) -> str | None:
    """An f-string as a ``str.format`` template: its literal parts (braces doubled) and each
    plain replacement field (no conversion, no format spec) as ``{name}``, where ``field`` names
    the field's expression (None: an expression the template cannot hold, and so None)."""
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(v.value.replace("{", "{{").replace("}", "}}"))
            continue
        name = (
            field(v.value)
            if isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None
            else None
        )
        if name is None:
            return None
        parts.append("{" + name + "}")
    return "".join(parts)
