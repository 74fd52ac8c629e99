"""Exceptions the workbench raises for bad input.

Every error a user can cause (an unknown model name, a malformed file, a wrong parameter) is a
:class:`WorkbenchError` with a one-line message that names the problem. The command line prints
that line instead of a traceback.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """Base class for errors caused by bad input or a missing resource."""


class ModelLoadError(WorkbenchError):
    """A model or tokenizer could not be found or loaded."""


class ChatTemplateError(WorkbenchError):
    """A tokenizer has no usable chat template."""


class ConfigError(WorkbenchError):
    """A configuration value is invalid; the message names the field."""
