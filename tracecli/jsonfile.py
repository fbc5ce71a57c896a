"""Reading the small JSON files users hand us (timings, plans, profiles), errors by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import TraceCliError

__all__ = ["read_json"]


def read_json(path: str | Path, error: type[TraceCliError], what: str) -> Any:
    """The decoded document; any problem raises ``error(path, line, ...)`` naming ``what``.

    >>> read_json("/nonexistent.json", TraceCliError, "plan file")
    Traceback (most recent call last):
    ...
    tracecli.errors.TraceCliError: /nonexistent.json: cannot read plan file: No such file or directory
    """
    path = str(path)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise error(path, 1, f"not UTF-8 text; a {what} is JSON") from None
    except OSError as exc:
        raise error(path, None, f"cannot read {what}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise error(path, exc.lineno, f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise error(path, 1, "invalid JSON: nested too deeply") from None
