"""Reading the small JSON files users hand us (timings, plans, profiles), errors by line.

Every document is read through :mod:`tracecli.inputfile` (bounded, ``-`` for stdin,
FIFOs never block in open) and decoded strictly: no ``NaN``/``Infinity``, no duplicate
keys hiding a value, no integers of more than 4,300 digits.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import TraceCliError
from .inputfile import open_input

__all__ = ["read_json", "strict_decoder", "StrictJSONError", "MAX_JSON_BYTES", "finite_number",
           "FLOAT_INT_LIMIT"]

MAX_JSON_BYTES = 256 << 20
FLOAT_INT_LIMIT = 1 << 1023  # integers beyond this do not become a finite float


def finite_number(value: Any) -> bool:
    """A JSON number (not a boolean) that is a finite float: an integer is range-checked
    before it is ever converted (a 400-digit integer would overflow).

    >>> finite_number(1.5), finite_number(10 ** 400), finite_number(True), finite_number("1")
    (True, False, False, False)
    """
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return -FLOAT_INT_LIMIT <= value <= FLOAT_INT_LIMIT
    return False


def read_json(path: str | Path, error: type[TraceCliError], what: str) -> Any:
    """The decoded document; any problem raises ``error(path, line, ...)`` naming ``what``.

    >>> read_json("/nonexistent.json", TraceCliError, "plan file")
    Traceback (most recent call last):
    ...
    tracecli.errors.TraceCliError: /nonexistent.json: no such file
    """
    path = str(path)
    data = open_input(path, error, what, MAX_JSON_BYTES).read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text; a {what} is JSON", path=path, line=data.count(b"\n", 0, exc.start) + 1) from None
    try:
        return strict_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    except RecursionError:
        raise error("invalid JSON: nested too deeply", path=path, line=1) from None
    except ValueError as exc:  # duplicate keys, NaN/Infinity, integers of 4,300+ digits
        message = str(exc)
        match = re.search(r"duplicate key '(.*)' in one object", message)
        line = 1
        if match:  # the line of the key's second appearance
            spots = [m.start() for m in re.finditer(re.escape(json.dumps(match.group(1))) + r"\s*:", text)]
            if len(spots) > 1:
                line = text.count("\n", 0, spots[1]) + 1
        raise error(f"invalid JSON: {message[:100]}", path=path, line=line) from None


class StrictJSONError(ValueError):
    """What :func:`strict_decoder` raises for a value strict JSON does not allow."""


def _reject_constant(name: str):
    raise StrictJSONError(f"{name} is not a number JSON allows")


def _no_duplicates(pairs):
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise StrictJSONError(f"duplicate key {key!r} in one object")
            seen.add(key)
    return result


def strict_decoder() -> json.JSONDecoder:
    """JSON without NaN/Infinity and without duplicate keys in an object."""
    return json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
