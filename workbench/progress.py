"""Progress bars that leave text, not widgets, behind in a notebook.

``tqdm.auto`` draws a live ipywidgets bar in a notebook, and a finished bar stays a widget. A
widget lives in the kernel: after a restart, or in the saved notebook opened again, JupyterLab
shows "Error displaying widget: model not found" where the bar was. :class:`tqdm` here is
``tqdm.auto.tqdm`` with one change: in a notebook, closing a bar replaces its widget's output by
the bar's last state as one line of text (``cells: 100%|##########| 12/12 [00:41<00:00]``; an
empty one for ``leave=False``), which a saved notebook keeps, in JupyterLab and under papermill.
In a terminal it is ``tqdm.auto.tqdm`` unchanged.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm as _auto_tqdm
from tqdm.notebook import tqdm_notebook as _notebook_tqdm
from tqdm.std import tqdm as _std_tqdm

__all__ = ["tqdm"]


_NOTEBOOK = issubclass(_auto_tqdm, _notebook_tqdm)


class tqdm(_auto_tqdm):  # tqdm's own name: it drops in for tqdm.auto's
    """``tqdm.auto.tqdm``; in a notebook a closed bar leaves a text line, not a widget."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._keep = kwargs.get("leave", True)
        self._handle = None
        if not _NOTEBOOK:
            super().__init__(*args, **kwargs)
            return
        super().__init__(*args, **{**kwargs, "display": False})
        if not self.disable:  # shown under a display id, so that close() can replace it
            from IPython.display import display

            self._handle = display(self.container, display_id=True)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            super().close()
            return
        failed = bool(self.total and self.n < self.total)
        super().close()
        line = _std_tqdm.format_meter(**{**self.format_dict, "bar_format": None, "ncols": 80})
        self.container.close()
        # the output that held the widget now holds the bar's last state as text (or nothing)
        handle.update({"text/plain": line if self._keep or failed else ""}, raw=True)
