"""``tracecli status``: what the directory's session remembers, as lines."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cli.session import Session

__all__ = ["status_lines"]


def _knobs_of(strategy: str) -> set[str]:
    """The options the strategy reads (all of them for a name the registry does not know)."""
    from ..planning import KNOBS, STRATEGIES

    spec = STRATEGIES.get(strategy)
    return {k.name for k in (spec.knobs if spec is not None else KNOBS)}


def status_lines(session: "Session") -> list[str]:
    """The remembered trace (checked against its file), its options, the remembered plan
    with the options its strategy reads, and how to reset."""
    where = os.path.abspath(session.state_file.parent)
    if session.trace is None:
        return [f"no trace remembered in {where}: run tracecli inspect TRACE"]
    state = session.trace_state()
    t = session.trace
    if t.run is not None:  # a run: its files by name, size and time, not their content
        lines = [f"run: {t.given} ({state})", f"  paths: {' '.join(t.run)}",
                 f"  fingerprint: {t.sha256}"]
    else:
        lines = [f"trace: {t.given} ({state})", f"  path: {t.path}", f"  sha256: {t.sha256}"]
    for key in ("format", "sizes", "step"):
        if getattr(t, key) is not None:
            lines.append(f"  --{key}: {getattr(t, key)}")
    plan = session.remembered_plan()
    if plan:
        lines.append(f"plan: {session.plan['strategy']} ({plan})")
        applies = _knobs_of(session.plan["strategy"])
        lines += [f"  --{k.replace('_', '-')}: {v}" for k, v in session.plan["options"].items()
                  if k in applies and v is not None and v is not False]
    else:
        lines.append("plan: none (tracecli plan-buckets remembers the plan it prints)")
    lines.append(f"reset: delete {where}/")
    return lines
