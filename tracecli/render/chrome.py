"""Chrome / Perfetto trace JSON (the "traceEvents" format chrome://tracing opens)."""

from __future__ import annotations

from typing import Any, Iterable, Optional

__all__ = ["chrome_trace", "complete_event"]


def complete_event(name: str, start_ms: float, dur_ms: float, pid: int, tid: int,
                   cat: str, args: Optional[dict] = None) -> dict[str, Any]:
    event = {"name": name, "cat": cat, "ph": "X", "ts": round(start_ms * 1000.0, 3),
             "dur": round(max(dur_ms, 0.0) * 1000.0, 3), "pid": pid, "tid": tid}
    if args:
        event["args"] = args
    return event


def chrome_trace(events: Iterable[dict], tracks: dict[tuple[int, int], str],
                 processes: dict[int, str]) -> dict[str, Any]:
    """A trace document; ``tracks`` names (pid, tid) threads, ``processes`` names pids."""
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}
            for pid, name in sorted(processes.items())]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
             for (pid, tid), name in sorted(tracks.items())]
    return {"traceEvents": meta + list(events), "displayTimeUnit": "ms"}
