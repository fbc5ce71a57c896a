"""Parameter types of the command line: byte sizes and bounded finite numbers."""

from __future__ import annotations

import math
from typing import Optional

import click

from ..units import format_size, parse_size, parse_sizes

__all__ = ["SizeType", "SizesType", "Number", "SIZE", "SIZES", "POSITIVE_SIZE", "MS", "options"]


class SizeType(click.ParamType):
    """Byte sizes: 32k, 25MiB, 64MB, 1048576 (at least ``minimum``, at most ``maximum``)."""

    name = "SIZE"

    def __init__(self, minimum: int = 0, maximum: Optional[int] = None):
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            size = value
        else:
            try:
                size = parse_size(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        if size < self.minimum:
            self.fail(f"{value!r} is too small; give at least {self.minimum} byte"
                      + ("s" if self.minimum != 1 else ""), param, ctx)
        if self.maximum is not None and size > self.maximum:
            self.fail(f"{value!r} is too large; give at most {format_size(self.maximum)}", param, ctx)
        return size


class SizesType(click.ParamType):
    """Byte sizes as a comma list (1M,25MiB) or a doubling range (8:16G)."""

    name = "SIZES"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            return parse_sizes(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Number(click.ParamType):
    """A finite number in ``[low, high]`` (NaN and infinities are refused)."""

    name = "NUMBER"

    def __init__(self, low: float, high: float, unit: str, low_open: bool = False):
        self.low, self.high, self.unit, self.low_open = low, high, unit, low_open

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        below = x <= self.low if self.low_open else x < self.low
        if not math.isfinite(x) or below or x > self.high:
            lo = "(" if self.low_open else "["
            self.fail(f"{value!r} is not a finite number in {lo}{self.low:g}, {self.high:g}] "
                      f"{self.unit}", param, ctx)
        return x


SIZE = SizeType()
SIZES = SizesType()
POSITIVE_SIZE = SizeType(minimum=1)
MS = Number(0.0, 1e7, "ms")


def options(*decorators):
    """Several option decorators as one, applied in the order given (as --help lists them)."""
    def apply(func):
        for decorator in reversed(decorators):
            func = decorator(func)
        return func
    return apply
