"""Exceptions the workbench raises for bad input.

Every error a user can cause (an unknown model name, a malformed file, a wrong parameter) is a
:class:`WorkbenchError` with a one-line message that names the problem. The command line prints
that line instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any


class WorkbenchError(Exception):
    """Base class for errors caused by bad input or a missing resource."""


class ModelLoadError(WorkbenchError):
    """A model or tokenizer could not be found or loaded."""


class ChatTemplateError(WorkbenchError):
    """A tokenizer has no usable chat template."""


class ConfigError(WorkbenchError):
    """A configuration value is invalid; the message names the field."""


class SteeringError(WorkbenchError):
    """A steered request failed on its own (its activations became non-finite); the other
    requests of the batch are unaffected."""


class Interrupted(WorkbenchError):
    """The user stopped a command (Ctrl-C); what was finished is kept."""


class OutputError(WorkbenchError):
    """An output location cannot be written (read-only, not a folder, another run holds it)."""


def some_of(names: Sequence[str], shown: int) -> str:
    """The first ``shown`` of ``names`` for a one-line message: ``a, b, c and 4 more``."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _quiet_leftover_tasks() -> None:
    """After an interrupt, what a library's asyncio code leaves behind says nothing the
    command's one line does not: tasks that failed because of it (a notebook kernel's channels:
    ``DeadKernelError``), for which asyncio prints "Task exception was never retrieved" with a
    traceback at exit, and a coroutine the interrupt stopped before it was awaited (nbclient's
    next cell), for which Python warns "coroutine ... was never awaited" when the interrupt's
    traceback is freed, after the one line, and objects whose clean-up fails then (a closed
    kernel channel's socket), which Python reports as "Exception ignored in ..."."""
    import logging
    import warnings

    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings(
        "ignore", message="coroutine .* was never awaited", category=RuntimeWarning
    )
    sys.unraisablehook = lambda unraisable: None


def run_command(command: Callable[..., int | None], *args: Any) -> int:
    """A command line's exit status: ``command(*args)``'s (0 when it returns None), or 2 after
    printing a :class:`WorkbenchError` as one ``error: ...`` line on stderr. Ctrl-C is such an
    error too (``error: interrupted``, status 2, no traceback); a command that can resume says
    how in its own :class:`Interrupted`."""
    import errno
    import signal
    import warnings

    def terminated(signum, frame):  # SIGTERM ends a command as Ctrl-C does: locks released
        raise KeyboardInterrupt

    def one_line(message, category, filename, lineno, file=None, line=None):
        # a command's warnings read as its errors do: one line, no source file or code line
        print(f"warning: {message}", file=file or sys.stderr)

    shown, warnings.showwarning = warnings.showwarning, one_line

    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread
        previous = None
    try:
        return command(*args) or 0
    except WorkbenchError as e:
        if isinstance(e, Interrupted):
            _quiet_leftover_tasks()
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _quiet_leftover_tasks()
        print("error: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head` stopped reading: nothing more to say, no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own exit flush
        return 1
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        where = f" writing {e.filename}" if e.filename else ""
        remedy = (
            "choose a writable place and run the command again"
            if e.errno == errno.EROFS
            else "free space and run the same command again"
        )
        print(
            f"error: {e.strerror}{where}; what was finished before is kept (each result is "
            f"written whole or not at all): {remedy}",
            file=sys.stderr,
        )
        return 2
    finally:
        warnings.showwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
