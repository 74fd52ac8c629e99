"""The steering inspector's parts, one job per module, all usable without a browser.

- :mod:`~workbench.widgets.inspector.state`: the plain values the inspector keeps and compares
  (settings, votes, answers, whether an answer is stale, the slider's range, the layer to view).
- :mod:`~workbench.widgets.inspector.steering`: the model work (a question's votes, a steerer from
  the controls, an unsteered and a steered answer).
- :mod:`~workbench.widgets.inspector.plots`: the figures (similarity per layer, the histogram).
- :mod:`~workbench.widgets.inspector.views`: the HTML shown (votes, answers, notes, captions).
- :mod:`~workbench.widgets.inspector.startup`: the start-up status line shown before the widget.

The widget that wires them, :class:`~workbench.widgets.steering_inspector.SteeringInspector`, is
in :mod:`workbench.widgets.steering_inspector`.
"""
