"""The labelling widget's parts, one job per module, all usable without a browser.

- :mod:`~workbench.widgets.labelling.answers`: a run's answers read, keyed and made ready to label
  (question and technique columns, detector decisions, a stable key per answer).
- :mod:`~workbench.widgets.labelling.questions`: the answers grouped by question, and the filters
  that choose which questions to walk through.
- :mod:`~workbench.widgets.labelling.records`: the labels-file line for one label.
- :mod:`~workbench.widgets.labelling.agreement`: the detectors' agreement with the labels so far.
- :mod:`~workbench.widgets.labelling.views`: the HTML shown (an answer's card, the question, the
  agreement table).

The widget that wires them, :class:`~workbench.widgets.labeller.Labeller`, is in
:mod:`workbench.widgets.labeller`.
"""
