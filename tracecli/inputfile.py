"""Reading what users hand us, bounded: traces, sidecars, timing files, plans, profiles.

One reader for every input, so every input gets the same guarantees:

- ``-`` is standard input; a FIFO with no writer reads as empty instead of blocking in
  ``open()``; directories and missing files are one-line errors;
- nothing is read past a limit (an endless ``/dev/zero`` stops at the first chunk, since
  NUL bytes mean a binary file; an endless text stops at the size limit);
- gzip is recognised by its magic bytes and decompressed as a stream, bounded too.

Errors are raised as the caller's :class:`~tracecli.errors.TraceCliError` subclass with
the path, so each file format reports in its own terms.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import zlib
from typing import BinaryIO, Optional

from .errors import TraceCliError
from .units import format_size

__all__ = ["Input", "open_input", "read_limited", "GZIP_MAGIC", "CHUNK"]

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20

ErrorType = type[TraceCliError]  # called as error(message, path=..., line=...)


def _open_raw(path: str, error: ErrorType) -> BinaryIO:
    """The file (or stdin for ``-``) as a binary stream, without ever blocking in open."""
    if path == "-":
        return sys.stdin.buffer
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error("no such file", path=path) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", path=path) from None
    if stat.S_ISDIR(info.st_mode):
        raise error("is a directory; pass a file", path=path)
    try:
        if stat.S_ISFIFO(info.st_mode):
            # O_NONBLOCK: open returns at once even with no writer; reads then block as
            # usual and give end-of-file when no process writes.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", path=path) from None


def read_limited(stream: BinaryIO, path: str, limit: int, error: ErrorType, what: str,
                 binary_ok: bool = False, max_line: Optional[int] = None) -> bytes:
    """Every byte of ``stream``, refusing more than ``limit`` bytes; a NUL byte in the first
    chunk (``binary_ok`` false) is a binary file, reported before reading on; a line longer
    than ``max_line`` stops the reading at once."""
    parts, total = [], 0
    since_newline = 0  # bytes after the last newline read so far
    while True:
        try:
            chunk = stream.read(min(CHUNK, limit + 1 - total))
        except (OSError, EOFError, zlib.error) as exc:
            raise error(f"cannot read {what}: {_reason(exc)}", path=path) from None
        if not chunk:
            break
        if not binary_ok and total == 0 and b"\0" in chunk:
            line = chunk.count(b"\n", 0, chunk.index(b"\0")) + 1
            raise error(f"binary data, not a {what}", path=path, line=line)
        if max_line is not None:
            last = chunk.rfind(b"\n")
            if last < 0:
                since_newline += len(chunk)
            else:
                first = chunk.find(b"\n")
                # lines between the first and last newline: none is longer than max_line
                # when all of them together are not (the common case: no split to look)
                inner = _longest_line(chunk, first, last) if last - first - 1 > max_line else 0
                longest = max(since_newline + first, inner)
                since_newline = len(chunk) - last - 1
                if longest > max_line:
                    since_newline = longest
            if since_newline > max_line:
                line = sum(p.count(b"\n") for p in parts) + 1
                raise error(f"a line of more than {format_size(max_line)} is in "
                            f"this {what} (line {line} or after); it is no {what} line", path=path, line=line)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise error(f"{what} is larger than the {format_size(limit)} this "
                        "tool reads; is it the right file?", path=path)
    return b"".join(parts)


def _longest_line(chunk: bytes, first: int, last: int) -> int:
    """The longest line lying wholly between the first and last newline of ``chunk``."""
    if first == last:
        return 0
    return max(map(len, chunk[first + 1:last].split(b"\n")))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, gzip.BadGzipFile):
        return f"not valid gzip data ({exc})"
    if isinstance(exc, EOFError):
        return "the gzip stream is truncated"
    if isinstance(exc, zlib.error):
        return f"corrupt gzip data ({exc})"
    return getattr(exc, "strerror", None) or str(exc)


class _Prefixed:
    """``head`` (already read), then the rest of ``raw``."""

    def __init__(self, head: bytes, raw: BinaryIO):
        self.head, self.raw = head, raw

    def read(self, n: int) -> bytes:
        if self.head:
            part, self.head = self.head[:n], self.head[n:]
            return part
        return self.raw.read(n)


class Input:
    """One input file, read once: its (decompressed) bytes on demand, bounded.

    Regular files are reopened for each pass; stdin and pipes are buffered on first read
    (they cannot be read twice).
    """

    def __init__(self, path: str, error: ErrorType, what: str, limit: int,
                 max_line: Optional[int] = None):
        self.path = path
        self.error = error
        self.what = what
        self.limit = limit
        self._buffered: Optional[bytes] = None
        self._gzip: Optional[bool] = None
        raw = _open_raw(path, error)
        try:
            self._seekable = raw is not sys.stdin.buffer and raw.seekable()
            if not self._seekable:
                head = raw.read(CHUNK)
                json_like = head.lstrip()[:1] in (b"{", b"[") or head[:2] == GZIP_MAGIC
                self._buffered = read_limited(_Prefixed(head, raw), path, limit, error, what,
                                              binary_ok=True,
                                              max_line=None if json_like else max_line)
            else:
                self._gzip = raw.read(2) == GZIP_MAGIC
        finally:
            if raw is not sys.stdin.buffer:
                raw.close()

    @property
    def gzipped(self) -> bool:
        if self._gzip is None:
            self._gzip = bool(self._buffered and self._buffered[:2] == GZIP_MAGIC)
        return self._gzip

    def stream(self) -> BinaryIO:
        """A fresh binary stream of the content, decompressed if it is gzip."""
        raw = io.BytesIO(self._buffered) if self._buffered is not None else _open_raw(self.path, self.error)
        return gzip.GzipFile(fileobj=raw, mode="rb") if self.gzipped else raw

    def head(self, size: int = 64 * 1024) -> bytes:
        """The first ``size`` bytes of the content (decompressed)."""
        with self.stream() as s:
            try:
                return s.read(size)
            except (OSError, EOFError, zlib.error) as exc:
                raise self.error(f"cannot read {self.what}: {_reason(exc)}", path=self.path) from None

    def read(self, binary_ok: bool = False, max_line: Optional[int] = None) -> bytes:
        """The whole content (decompressed), within the limit."""
        if self._buffered is None and not self.gzipped:
            try:
                size = os.stat(self.path).st_size
            except OSError:
                size = 0
            if size > self.limit:
                raise self.error(f"{self.what} is larger than the "
                                 f"{format_size(self.limit)} this tool reads; is it the right file?", path=self.path)
        with self.stream() as s:
            return read_limited(s, self.path, self.limit, self.error, self.what, binary_ok, max_line)


def open_input(path: str, error: ErrorType, what: str, limit: int,
               max_line: Optional[int] = None) -> Input:
    """``max_line``: for text read from a pipe or stdin, stop at a line this long."""
    return Input(str(path), error, what, limit, max_line)
