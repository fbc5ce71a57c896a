r"""Errors a user can cause, each rendered as one ``path:line: message`` line.

The library raises these and never prints; the CLI turns every
:class:`TraceCliError` into one line on stderr and exit status 2.

The message comes first; where it applies, the file and line are keywords:

>>> str(TraceFormatError("expected 'forward' or 'backward'", path="trace.txt", line=3))
"trace.txt:3: expected 'forward' or 'backward'"
>>> str(PlanError("no gradients to plan"))
'no gradients to plan'
>>> print(ReplayError("rank 1 failed: line one\nline two"))
rank 1 failed: line one\nline two
>>> import pickle; e = pickle.loads(pickle.dumps(SizesError("bad", path="s.json", line=2)))
>>> type(e).__name__, str(e)
('SizesError', 's.json:2: bad')
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
    "CostModelError",
    "excerpt",
]


class TraceCliError(Exception):
    """Base of every error the user can fix; ``str()`` is ``path:line: message``."""

    def __init__(self, message: str, *, path: Optional[str] = None, line: Optional[int] = None):
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.line = line
        self.message = message

    def __reduce__(self):
        """Pickles with its path and line (a rank's error crosses to the launcher)."""
        return _rebuild, (type(self), self.message, self.path, self.line)

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


class CostModelError(TraceCliError):
    """A cost model cannot answer for the topology, collective or figures given."""


def _rebuild(cls: type, message: str, path: Optional[str], line: Optional[int]) -> TraceCliError:
    return cls(message, path=path, line=line)


def excerpt(text: str, limit: int = 60) -> str:
    """A quoted excerpt of input for a message (long garbage lines stay short).

    >>> excerpt("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"
    """
    return repr(text if len(text) <= limit else text[:limit] + "...")
