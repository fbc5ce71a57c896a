"""The advice records (:mod:`tracecli.planning.advice`) as text: one block, whole at 80
columns, what to paste on lines of its own (never wrapped, so it pastes as it is)."""

from __future__ import annotations

import textwrap
from typing import Sequence

__all__ = ["advice_lines"]

WIDTH = 80


def _wrap(text: str, indent: str, more: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + more,
                         break_on_hyphens=False)


def _action(a) -> str:
    if a.framework == "chainermn":
        return "nothing to set"
    if a.verdict == "set":
        return "set"
    return "keep the run's own settings" if a.reference == "run" else "keep the defaults"


def advice_lines(advice: Sequence, model: str) -> list[str]:
    """The block: a heading naming the model, then per framework its verdict, what to
    paste and why."""
    if not advice:
        return []
    lines = _wrap(f"What to set under the {model} model (only a gain beyond the model's error "
                  "is set):", "", "")
    for a in advice:
        head = (f"{a.title} (the trace's framework)" if a.traced else f"If you used {a.title}")
        lines += _wrap(f"{head}: {_action(a)}", "  ")
        lines += [f"    {line}" for line in a.paste.splitlines()]
        lines += _wrap(a.why, "    ")
    return lines
