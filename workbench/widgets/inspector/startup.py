"""The steering inspector's start-up status line, shown while the widget is not yet on screen."""

from __future__ import annotations

import html


def _plain(text: str):
    from IPython.display import HTML

    return HTML(f"<pre style='margin:0'>{html.escape(text)}</pre>") if text else HTML("")


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class StartupStatus:
    """One line saying what the start-up is doing while the widget is not yet on screen: in a
    notebook a display updated in place (shown before the slow work starts), elsewhere lines on
    stdout. ``lines`` keeps everything shown, in order."""

    prefix = "steering inspector"

    def __init__(self, first: str = "starting"):
        self.lines: list[str] = []
        self._handle = None
        if _in_kernel():  # pragma: no cover - needs a kernel
            from IPython.display import display

            self._handle = display(_plain(f"{self.prefix}: {first}"), display_id=True)
            self.lines.append(first)
        else:
            self.show(first)

    def show(self, text: str) -> None:
        if self.lines and self.lines[-1] == text:
            return
        self.lines.append(text)
        line = f"{self.prefix}: {text}"
        if self._handle is not None:  # pragma: no cover - needs a kernel
            self._handle.update(_plain(line))
        else:
            print(line, flush=True)
