r"""Errors a user can cause, each rendered as one ``path:line: message`` line.

The library raises these and never prints; the CLI turns every
:class:`TraceCliError` into one line on stderr and exit status 2.

>>> str(TraceFormatError("trace.txt", 3, "expected 'forward' or 'backward'"))
"trace.txt:3: expected 'forward' or 'backward'"
>>> str(PlanError(None, None, "no gradients to plan"))
'no gradients to plan'
>>> print(ReplayError(None, None, "rank 1 failed: line one\nline two"))
rank 1 failed: line one\nline two
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "TraceCliError",
    "TraceFormatError",
    "UnknownFormatError",
    "SizesError",
    "PlanError",
    "CalibrationError",
    "ReplayUnavailableError",
    "ReplayError",
    "SessionError",
    "OutputError",
    "excerpt",
]


class TraceCliError(Exception):
    """Base of every error the user can fix; ``str()`` is ``path:line: message``."""

    def __init__(self, path: Optional[str], line: Optional[int], message: str):
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        """``path:line: message`` on one line (newlines in any part are escaped)."""
        where = self.path or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        text = f"{where}: {self.message}" if where else self.message
        return text.replace("\r", "\\r").replace("\n", "\\n")


class TraceFormatError(TraceCliError):
    """A trace file does not follow its format."""


class UnknownFormatError(TraceCliError):
    """The format of a trace cannot be told from its content."""


class SizesError(TraceCliError):
    """A sizes sidecar (``TRACE.sizes.json``) is malformed or does not fit its trace."""


class PlanError(TraceCliError):
    """A bucket plan cannot be made with the given inputs and options."""


class CalibrationError(TraceCliError):
    """A calibration profile or a timing file is malformed."""


class ReplayUnavailableError(TraceCliError):
    """Replay needs something that is not installed or not present (torch, GPUs)."""


class ReplayError(TraceCliError):
    """A replay or calibration run failed on one of its ranks."""


class SessionError(TraceCliError):
    """The remembered session state (``.tracecli/``) cannot be used."""


class OutputError(TraceCliError):
    """An output file cannot or may not be written."""


def excerpt(text: str, limit: int = 60) -> str:
    """A quoted excerpt of input for a message (long garbage lines stay short).

    >>> excerpt("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"
    """
    return repr(text if len(text) <= limit else text[:limit] + "...")
