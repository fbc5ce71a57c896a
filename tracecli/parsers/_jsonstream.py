"""Streaming a Chrome-trace JSON object: one ``traceEvents`` element at a time.

``json.load`` of a 200 MB profiler trace holds the text and every decoded event at once
(several GB). This reader keeps a window of the text, decodes each element of
``traceEvents`` with the C decoder, hands it over and forgets it; other top-level keys are
decoded whole (each bounded). Errors carry the line they were found on.

>>> import io
>>> doc = b'{"schemaVersion": 1, "traceEvents": [\\n{"ph": "X"},\\n{"ph": "M"}\\n]}'
>>> [(kind, value, line) for kind, value, line in iter_trace(io.BytesIO(doc), "t.json")]
[('key', ('schemaVersion', 1), 1), ('events', None, 1), ('event', {'ph': 'X'}, 2), ('event', {'ph': 'M'}, 3)]
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, BinaryIO, Iterator

from ..errors import TraceFormatError
from ..jsonfile import StrictJSONError, strict_decoder
from ..units import format_size

__all__ = ["iter_trace", "MAX_VALUE_CHARS"]

CHUNK_BYTES = 1 << 20
MAX_VALUE_CHARS = 64 << 20  # one event or one top-level value
MAX_TOTAL_BYTES = 16 << 30  # decompressed; a gzip bomb stops here
_WS = re.compile(r"[ \t\n\r]*")
_NEAR_END = 16  # a decode error this close to the window's end may be a cut-off value


class _Window:
    def __init__(self, stream: BinaryIO, path: str):
        self.stream = stream
        self.path = path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.json = strict_decoder()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.total = 0
        self.line = 1  # line number at ``counted``
        self.counted = 0

    def error(self, message: str, pos: int | None = None) -> TraceFormatError:
        return TraceFormatError(message, path=self.path, line=self.line_at(self.pos if pos is None else pos))

    def line_at(self, pos: int) -> int:
        if pos >= self.counted:
            self.line += self.buf.count("\n", self.counted, pos)
        else:
            self.line -= self.buf.count("\n", pos, self.counted)
        self.counted = pos
        return self.line

    def fill(self) -> bool:
        """Append the next chunk; False at end of input."""
        if self.eof:
            return False
        try:
            data = self.stream.read(CHUNK_BYTES)
        except (OSError, EOFError) as exc:
            raise self.error(f"cannot read the trace: {exc}") from None
        except Exception as exc:  # zlib.error and friends from a corrupt gzip stream
            raise self.error(f"cannot read the trace: {type(exc).__name__}: {exc}") from None
        self.total += len(data)
        if self.total > MAX_TOTAL_BYTES:
            raise self.error(f"the trace is larger than {format_size(MAX_TOTAL_BYTES)} "
                             "(decompressed); is it the right file?")
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise self.error("not UTF-8 text; a profiler trace is JSON") from None
        if "\0" in text:
            raise self.error("binary data (NUL bytes), not a JSON trace", self.pos)
        if not data:
            self.eof = True
        if self.pos > CHUNK_BYTES:  # drop what was consumed
            self.line_at(self.pos)
            self.buf = self.buf[self.pos:]
            self.counted -= self.pos
            self.pos = 0
        self.buf += text
        return bool(data)

    def skip_ws(self) -> str:
        """The next non-blank character ("" at end of input), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            found = repr(c) if c else "the end of the file"
            raise self.error(f"invalid JSON: expected {what}, found {found}")
        self.pos += 1
        return c

    def value(self) -> Any:
        start = self.pos
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, start)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - _NEAR_END or exc.msg.startswith("Unterminated")
                if cut and not self.eof and len(self.buf) - start <= MAX_VALUE_CHARS:
                    self.fill()
                    start = self.pos
                    continue
                if cut and not self.eof:
                    raise self.error(f"one JSON value is larger than "
                                     f"{format_size(MAX_VALUE_CHARS)}", start) from None
                raise self.error(f"invalid JSON: {exc.msg}", exc.pos) from None
            except StrictJSONError as exc:
                raise self.error(f"invalid JSON: {exc}", start) from None
            except ValueError as exc:  # an integer of more than 4,300 digits
                raise self.error(f"invalid JSON: {str(exc)[:80]}", start) from None
            except RecursionError:
                raise self.error("invalid JSON: nested too deeply", start) from None
            if end >= len(self.buf) and not self.eof:  # a number may go on in the next chunk
                self.fill()
                start = self.pos
                continue
            self.pos = end
            return value


def iter_trace(stream: BinaryIO, path: str) -> Iterator[tuple[str, Any, int]]:
    """``("events", None, line)`` where the ``traceEvents`` list starts, then
    ``("event", element, line)`` for each of its elements, and ``("key", (name, value),
    line)`` for every other top-level key, in file order."""
    w = _Window(stream, path)
    if w.skip_ws() == "\ufeff":
        w.pos += 1
    if w.skip_ws() != "{":
        raise w.error("expected a JSON object with \"traceEvents\" (what "
                      "torch.profiler's export_chrome_trace writes)")
    w.pos += 1
    seen: set[str] = set()
    if w.skip_ws() == "}":
        w.pos += 1
    else:
        while True:
            if w.skip_ws() != '"':
                w.expect('"', "a key string")
            line = w.line_at(w.pos)
            key = w.value()
            if key in seen:
                raise w.error(f"invalid JSON: duplicate top-level key {key!r}")
            seen.add(key)
            w.expect(":", "':'")
            if w.skip_ws() == "[" and key == "traceEvents":
                yield "events", None, line
                w.pos += 1
                if w.skip_ws() == "]":
                    w.pos += 1
                else:
                    while True:
                        w.skip_ws()
                        line = w.line_at(w.pos)
                        yield "event", w.value(), line
                        if w.expect(",]", "',' or ']' between trace events") == "]":
                            break
            else:
                yield "key", (key, w.value()), line
            if w.expect(",}", "',' or '}' after a top-level value") == "}":
                break
    if w.skip_ws():
        raise w.error("invalid JSON: extra data after the trace object")
