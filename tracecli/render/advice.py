r"""The advice records (:mod:`tracecli.planning.advice`) as text: one block, whole at 80
columns, what to paste on lines of its own. A paste line too long for the width is broken
only where it still pastes as it is: a trailing ``  # comment`` goes on the line above, a
call or list breaks after a comma inside its brackets (Python continues such lines), and
shell words (``export ...``, command-line flags) break between words, each broken line
ending in a backslash.

>>> paste_lines("DistributedDataParallel(model)  # defaults: bucket_cap_mb=25, first bucket 1 MiB")
['    # defaults: bucket_cap_mb=25, first bucket 1 MiB', '    DistributedDataParallel(model)']
>>> [len(x) <= 80 for x in paste_lines("f(model, caps=[" + ", ".join(["0.001953"] * 12) + "])")]
[True, True]
>>> paste_lines("--all_reduce_spec=nccl --agg_small_grads_max_bytes=65536 --agg_small_grads_max_group=4")
['    --all_reduce_spec=nccl --agg_small_grads_max_bytes=65536 \\', '        --agg_small_grads_max_group=4']
"""

from __future__ import annotations

import textwrap
from typing import Sequence

__all__ = ["advice_lines"]

WIDTH = 80


def _wrap(text: str, indent: str, more: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + more,
                         break_on_hyphens=False)


def _breaks(line: str) -> list[int]:
    """Where ``line`` may break: after each ", " inside brackets."""
    depth, at = 0, []
    for k, ch in enumerate(line):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth > 0 and line.startswith(", ", k):
            at.append(k + 2)
    return at


def _shell(line: str) -> bool:
    return line.startswith(("export ", "--")) and not any(c in line for c in "([{'\"")


def _fit(line: str, indent: str) -> list[str]:
    """``line`` at ``indent``, broken where it is too long: after commas inside brackets, or
    between shell words (each broken line ending in a backslash)."""
    if _shell(line):
        return _fit_shell(line, indent)
    out, start, more = [], 0, indent + "    "
    breaks = _breaks(line) + [len(line)]
    while len((more if out else indent) + line[start:]) > WIDTH:
        room = WIDTH - len(more if out else indent)
        cut = max((b for b in breaks if start < b - 1 and b - start <= room), default=None)
        if cut is None or cut >= len(line):
            break
        out.append((more if out else indent) + line[start:cut].rstrip())
        start = cut
    return out + [(more if out else indent) + line[start:]]


def _fit_shell(line: str, indent: str) -> list[str]:
    out, current, more = [], indent, indent + "    "
    for word in line.split(" "):
        if current.strip() and len(current) + 1 + len(word) + 2 > WIDTH:
            out.append(current + " \\")
            current = more + word
        else:
            current += (" " if current.strip() else "") + word
    return out + [current]


def paste_lines(paste: str, indent: str = "    ") -> list[str]:
    """The lines to paste, each within the width where it can be broken and still paste."""
    lines = []
    for line in paste.splitlines():
        code, sep, comment = line.partition("  # ")
        if sep and len(indent + line) > WIDTH:
            lines.append(f"{indent}# {comment}")
            line = code.rstrip()
        lines += _fit(line, indent)
    return lines


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
        lines += paste_lines(a.paste)
        lines += _wrap(a.why, "    ")
    return lines
