"""The strategy options, generated from the strategy specs' knobs (``planning.KNOBS``):
``strategy_options`` declares them, ``STRATEGY_KEYS`` names them (the session remembers them
with a plan, ``replay`` asks whether any was given) and ``strategy_from`` makes the
library's options of them. A new strategy's knobs appear here without an edit.
"""

from __future__ import annotations

import click

from ..planning import KNOBS, STRATEGIES, Kind, Knob, OptionValues
from .output import notice
from .types import Number, SizeType, options

__all__ = ["strategy_options", "STRATEGY_KEYS", "strategy_from"]


def _knob_type(knob: Knob):
    """The click type of a knob's values, with the knob's own bounds."""
    if knob.kind in (Kind.BYTES, Kind.BYTES_OR_ZERO):
        return SizeType(int(knob.low), int(knob.high))
    if knob.kind is Kind.MS:
        return Number(knob.low, knob.high, "ms", low_open=True)
    if knob.kind is Kind.GIB:
        return Number(knob.low, knob.high, "GiB", low_open=True)
    if knob.kind is Kind.COUNT:
        return click.IntRange(int(knob.low), int(knob.high))
    return click.STRING


def _knob_option(knob: Knob):
    """The click option of one strategy knob."""
    if knob.kind is Kind.FLAG:
        return click.option(knob.flag, is_flag=True, help=knob.help)
    shown = {"default": knob.default, "show_default": True} if knob.default is not None else {}
    return click.option(knob.flag, type=_knob_type(knob), help=knob.help, **shown)


strategy_options = options(
    click.option("--strategy", type=click.Choice(list(STRATEGIES)), default="size",
                 show_default=True, help="How to group gradients into buckets (observed: the "
                 "buckets a profiled run used, with its measured times)."),
    *(_knob_option(knob) for knob in KNOBS),
)

STRATEGY_KEYS = ("strategy", *(knob.name for knob in KNOBS))


SMALL_BYTES = 1024  # a bucket cap below this is a size typed without its unit


def strategy_from(kw) -> OptionValues:
    """The strategy options given, by knob name (each strategy reads its own), saying so
    when a byte size looks like a number of MiB typed without its suffix (``--max-bytes 25``
    for DDP's ``bucket_cap_mb=25``)."""
    for knob in KNOBS:
        value = kw[knob.name]
        if knob.kind is Kind.BYTES and value and value < SMALL_BYTES:
            notice(f"{knob.flag} {value} is {value} bytes; sizes take a unit: {value}MiB for "
                   f"{value} MiB (DDP's bucket_cap_mb={value}), {value}k for {value} KiB")
    return {knob.name: kw[knob.name] for knob in KNOBS}
