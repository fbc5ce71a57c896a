"""Text traces as lines, with binary garbage, encodings and huge lines reported by line."""

from __future__ import annotations

from ..errors import TraceFormatError
from ..units import format_size

__all__ = ["decode_text", "split_lines", "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 1 << 20


def decode_text(path: str, data: bytes) -> str:
    """The text of ``data``; binary data and bad UTF-8 are errors at their line."""
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
        bad = nul
    except UnicodeDecodeError as exc:
        bad = exc.start if nul < 0 else min(nul, exc.start)
    if bad >= 0:
        line = data.count(b"\n", 0, bad) + 1
        raise TraceFormatError(
            "binary data, not a text trace; pass a Chainer dump, a "
            "TensorFlow op list or a PyTorch profiler trace", path=str(path), line=line
        )
    return text[1:] if text.startswith("\ufeff") else text


def split_lines(path: str, text: str) -> list[str]:
    """Lines without their endings (``\\n`` or ``\\r\\n``); one longer than
    :data:`MAX_LINE_CHARS` is no trace line, an error at its line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lines and max(map(len, lines)) > MAX_LINE_CHARS:
        number = next(i for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS)
        raise TraceFormatError(f"a line of more than "
                               f"{format_size(MAX_LINE_CHARS)}: not a trace line", path=str(path), line=number)
    if "\r" not in text:
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]
