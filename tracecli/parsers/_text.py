"""Reading trace files as lines, with binary garbage and encodings reported by line."""

from __future__ import annotations

from pathlib import Path

from ..errors import TraceFormatError

__all__ = ["read_lines", "read_bytes"]


def read_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except IsADirectoryError:
        raise TraceFormatError(str(path), None, "is a directory; pass a trace file") from None
    except FileNotFoundError:
        raise TraceFormatError(str(path), None, "no such file") from None
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read: {exc.strerror}") from None


def read_lines(path: str | Path, data: bytes | None = None) -> list[str]:
    """The file's lines without line endings (``\\n`` or ``\\r\\n``).

    A NUL byte or bytes that are not UTF-8 mean a binary file: reported at their line.
    """
    if data is None:
        data = read_bytes(path)
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
        bad = nul
    except UnicodeDecodeError as exc:
        bad = exc.start if nul < 0 else min(nul, exc.start)
    if bad >= 0:
        line = data.count(b"\n", 0, bad) + 1
        raise TraceFormatError(
            str(path), line, "binary data, not a text trace; pass a Chainer dump or a "
            "TensorFlow op list"
        )
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]

