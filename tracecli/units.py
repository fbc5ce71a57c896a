"""Byte sizes: parse ``32k`` / ``25MiB`` / ``1.5GB`` and format them for humans.

Suffixes follow tf_cnn_benchmarks for the short forms (``k``/``K``, ``M``, ``G``, ``T``
are powers of 1024), IEC names are powers of 1024 and SI names powers of 1000; case does
not matter (``32mb`` is ``32MB``, 32,000,000 bytes; ``32m`` is ``32M``, 32 MiB).

>>> parse_size("32k")
32768
>>> parse_size("25MiB")
26214400
>>> parse_size("1.5KB")
1500
>>> format_size(411041792)
'392.0 MiB'
>>> format_size(1000)
'1000 B'
"""

from __future__ import annotations

import math
import re

__all__ = ["parse_size", "parse_sizes", "format_size", "SIZE_SUFFIXES", "MAX_SIZES", "size_text"]

SIZE_SUFFIXES = {
    "": 1,
    "B": 1,
    "k": 1024,
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
    "T": 1024**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_BY_LOWER = {suffix.lower(): scale for suffix, scale in SIZE_SUFFIXES.items()}  # case ignored

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str) -> int:
    """Return the number of bytes that ``text`` names.

    Raises ``ValueError`` with a message listing the accepted forms on anything else,
    including negative, fractional-byte and unknown-suffix sizes.

    >>> parse_size("1048576")
    1048576
    >>> parse_size("32mb"), parse_size("32m"), parse_size("1kib")
    (32000000, 33554432, 1024)
    >>> parse_size("32x")
    Traceback (most recent call last):
    ...
    ValueError: unknown size suffix 'x' in '32x'; use k/K, M, G, T (powers of 1024), KiB/MiB/GiB/TiB, or KB/MB/GB/TB (powers of 1000), in any case
    """
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(
            f"not a size: {text!r}; write a non-negative number with an optional suffix, "
            "e.g. 32k, 25MiB, 64MB"
        )
    number, suffix = match.groups()
    scale = _BY_LOWER.get(suffix.lower())
    if scale is None:
        raise ValueError(
            f"unknown size suffix {suffix!r} in {text!r}; use k/K, M, G, T (powers of 1024), "
            "KiB/MiB/GiB/TiB, or KB/MB/GB/TB (powers of 1000), in any case"
        )
    value = float(number) * scale
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


MAX_SIZES = 1000
MAX_SWEEP_BYTES = 1 << 50


def parse_sizes(text: str) -> list[int]:
    """Sizes as a comma list (``1M,25MiB,1G``) or a range doubling from its first to at most
    its last (``8:16G``, as nccl-tests' ``-b 8 -e 16G -f 2``); ascending, without repeats.

    >>> parse_sizes("8:64"), parse_sizes("1M, 1k,1k")
    ([8, 16, 32, 64], [1024, 1048576])
    >>> parse_sizes("1k:1")
    Traceback (most recent call last):
    ...
    ValueError: range 1k:1 ends below its start; write LOW:HIGH, e.g. 8:16G
    """
    text = str(text).strip()
    if ":" in text:
        low_text, _, high_text = text.partition(":")
        low, high = parse_size(low_text), parse_size(high_text)
        if low < 1:
            raise ValueError(f"range {text} starts at 0 bytes; start at 1 or more, e.g. 8:16G")
        if high < low:
            raise ValueError(f"range {text} ends below its start; write LOW:HIGH, e.g. 8:16G")
        if high > MAX_SWEEP_BYTES:
            raise ValueError(f"range {text} ends above 1 PiB")
        sizes, n = [], low
        while n <= high:
            sizes.append(n)
            n *= 2
        return sizes
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("no sizes given; write a comma list (1M,25MiB) or a range (8:16G)")
    if len(parts) > MAX_SIZES:
        raise ValueError(f"{len(parts)} sizes; give at most {MAX_SIZES}")
    sizes = sorted({parse_size(p) for p in parts})
    if sizes[0] < 1 or sizes[-1] > MAX_SWEEP_BYTES:
        raise ValueError("sizes must be from 1 byte to 1 PiB")
    return sizes


def format_size(nbytes: float | int | None) -> str:
    """Format a byte count with binary units and one decimal (``392.0 MiB``)."""
    if nbytes is None:
        return "unknown"
    value = float(nbytes)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024.0
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def size_text(nbytes: int) -> str:
    """The shortest exact text :func:`parse_size` reads back as ``nbytes`` (a default shown in
    ``--help``).

    >>> size_text(4096), size_text(256 << 20), size_text(1 << 30), size_text(1000)
    ('4KiB', '256MiB', '1GiB', '1000')
    """
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)
