"""Abstention Workbench: make language models abstain from (or be edited about) chosen concepts,
and measure how far that generalizes along a knowledge-graph taxonomy.

Data flows one way: taxonomy -> questions -> technique -> generations -> scores -> tables -> figures.
"""

from workbench.errors import (
    ChatTemplateError,
    ConfigError,
    ModelLoadError,
    WorkbenchError,
)

__version__ = "0.1.0"

__all__ = ["ChatTemplateError", "ConfigError", "ModelLoadError", "WorkbenchError", "__version__"]
