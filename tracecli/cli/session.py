"""The working session: what ``inspect`` and ``plan-buckets`` remember in ``.tracecli/``.

``tracecli inspect trace.txt`` remembers the trace (its path, how it was read, a content
hash); ``tracecli plan-buckets`` with no TRACE plans it and remembers the plan it printed
(its options and the plan file itself); ``tracecli replay`` with neither TRACE nor ``--plan``
replays that plan. Explicit arguments always win; the state only fills in what was left
out, and scripts never need it. It is one JSON file, ``.tracecli/state.json`` in the
current directory, written atomically; ``tracecli status`` shows it and deleting
``.tracecli/`` resets it.

A remembered trace that changed since it was remembered is read again (its plan is then
stale and forgotten), with a notice; one that vanished is an error naming the way out.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import SessionError, TraceCliError
from .outfile import atomic_write

__all__ = ["Session", "RememberedTrace", "STATE_DIR", "STATE_FORMAT"]

STATE_DIR = ".tracecli"
STATE_FORMAT = "tracecli-session"
PLAN_FILE = "plan.json"
_HASH_CHUNK = 1 << 20


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class RememberedTrace:
    path: str  # absolute
    given: str  # as the user typed it
    format: Optional[str] = None  # --format, if given
    sizes: Optional[str] = None  # --sizes, absolute, if given
    step: Optional[int] = None  # --step, if given
    sha256: str = ""
    size: int = 0
    mtime_ns: int = 0
    run: Optional[tuple[str, ...]] = None  # a run: its directory or files, absolute

    def to_json(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        doc["run"] = list(self.run) if self.run is not None else None
        return doc


_TRACE_FIELDS = {"path": str, "given": str, "format": (str, type(None)), "sizes": (str, type(None)),
                 "step": (int, type(None)), "sha256": str, "size": int, "mtime_ns": int,
                 "run": (list, type(None))}
_PLAN_FIELDS = {"strategy": str, "options": dict, "file": str, "trace_sha256": (str, type(None))}


def _checked(doc: Any, fields: dict[str, Any], what: str) -> dict[str, Any]:
    """``doc`` with exactly ``fields``, each of its type (a state file is input too)."""
    if not isinstance(doc, dict) or set(doc) != set(fields):
        raise ValueError(f"its {what} does not have the fields {', '.join(fields)}")
    for key, kind in fields.items():
        if isinstance(doc[key], bool) or not isinstance(doc[key], kind):
            raise ValueError(f"its {what}'s {key} has the wrong type")
    return doc


def _checked_trace(doc: Any) -> RememberedTrace:
    if isinstance(doc, dict) and "run" not in doc:  # a state file from before runs
        doc = dict(doc, run=None)
    fields = _checked(doc, _TRACE_FIELDS, "trace")
    if fields["run"] is not None:
        if not fields["run"] or not all(isinstance(p, str) for p in fields["run"]):
            raise ValueError("its trace's run is not a list of paths")
        fields = dict(fields, run=tuple(fields["run"]))
    return RememberedTrace(**fields)


MAX_RUN_ENTRIES = 4096  # as tracecli.run.discover lists at most


def run_fingerprint(paths: tuple[str, ...]) -> tuple[str, int, int]:
    """A run's files by name, size and modification time (hashing every rank's trace
    would read gigabytes): its digest, total size and latest modification."""
    h = hashlib.sha256()
    total, latest = 0, 0
    files = []
    for p in paths:
        if os.path.isdir(p):
            with os.scandir(p) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_RUN_ENTRIES:
                        break
                    if entry.name.endswith((".json", ".json.gz")):
                        files.append(entry.path)
        else:
            files.append(p)
    for f in sorted(files):
        info = os.stat(f)
        total += info.st_size
        latest = max(latest, info.st_mtime_ns)
        h.update(f"{f}\0{info.st_size}\0{info.st_mtime_ns}\n".encode("utf-8", "replace"))
    return h.hexdigest(), total, latest


def _checked_plan(doc: Any) -> dict[str, Any]:
    return _checked(doc, _PLAN_FIELDS, "plan")


@dataclass
class Session:
    """The state of one directory's session (``.tracecli/state.json``)."""

    directory: Path
    trace: Optional[RememberedTrace] = None
    plan: Optional[dict[str, Any]] = None  # {"strategy", "options", "file", "trace_sha256"}
    notices: list[str] = field(default_factory=list)

    @property
    def state_file(self) -> Path:
        return self.directory / STATE_DIR / "state.json"

    @property
    def plan_file(self) -> Path:
        return self.directory / STATE_DIR / PLAN_FILE

    @classmethod
    def load(cls, directory: str | Path = ".") -> "Session":
        session = cls(Path(directory))
        path = session.state_file
        if not path.is_file():
            return session
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
                raise ValueError("not a session file")
            trace = doc.get("trace")
            if trace is not None:
                session.trace = _checked_trace(trace)
            plan = doc.get("plan")
            if plan is not None:
                session.plan = _checked_plan(plan)
        except (OSError, ValueError, TypeError) as exc:
            session.notices.append(f"ignoring {path}: it is unreadable ({exc}); delete "
                                   f"{STATE_DIR}/ to reset the session")
            session.trace = session.plan = None
        return session

    def to_json(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "version": 1,
                "trace": self.trace.to_json() if self.trace else None, "plan": self.plan}

    def save(self) -> Optional[str]:
        """Write the state; a failure is a notice, never an error (the session is optional)."""
        try:
            (self.directory / STATE_DIR).mkdir(exist_ok=True)
            atomic_write(str(self.state_file), (json.dumps(self.to_json(), indent=2) + "\n").encode())
            return None
        except (OSError, TraceCliError) as exc:
            return f"could not remember the session in {STATE_DIR}/: {exc}"

    # -- the trace ---------------------------------------------------------------------

    def remember_trace(self, given: str, format: Optional[str], sizes: Optional[str],
                       step: Optional[int]) -> None:
        if given == "-":  # standard input cannot be read again
            return
        path = os.path.abspath(given)
        info = os.stat(path)
        digest = file_digest(path)
        if self.trace is None or self.trace.sha256 != digest or self.trace.path != path:
            self.plan = None
        self.trace = RememberedTrace(path, given, format, os.path.abspath(sizes) if sizes else None,
                                     step, digest, info.st_size, info.st_mtime_ns)

    def remember_run(self, given: tuple[str, ...]) -> None:
        """A run (its directory, or its files) as the remembered trace."""
        paths = tuple(os.path.abspath(p) for p in given)
        digest, size, mtime = run_fingerprint(paths)
        if self.trace is None or self.trace.sha256 != digest or self.trace.run != paths:
            self.plan = None
        shown = given[0] if len(given) == 1 else f"{given[0]} and {len(given) - 1} more"
        self.trace = RememberedTrace(paths[0], shown, None, None, None, digest, size, mtime, paths)

    def is_remembered(self, given) -> bool:
        """Whether ``given`` (a path, or a run's paths) names the remembered trace or run."""
        if self.trace is None or given is None:
            return False
        if isinstance(given, tuple) or self.trace.run is not None:
            paths = given if isinstance(given, tuple) else (given,)
            return self.trace.run == tuple(os.path.abspath(p) for p in paths)
        return given != "-" and os.path.abspath(given) == self.trace.path

    def remembered_trace(self) -> RememberedTrace:
        """The remembered trace, checked against the file; changed: noticed and refreshed."""
        if self.trace is None:
            raise SessionError("no trace yet: run tracecli inspect TRACE, or pass TRACE")
        t = self.trace
        if t.run is not None:
            try:
                digest, size, mtime = run_fingerprint(t.run)
            except OSError:
                raise SessionError("the remembered run is gone; run tracecli "
                                   "inspect RUN with the one to use, or pass it", path=t.given) from None
            if digest != t.sha256:
                self.notices.append(f"{t.given} changed since it was remembered; reading it again"
                                    + ("; the remembered plan is stale and forgotten" if self.plan else ""))
                self.plan = None
                self.trace = RememberedTrace(t.path, t.given, None, None, None, digest, size,
                                             mtime, t.run)
            return self.trace
        try:
            info = os.stat(t.path)
        except OSError:
            raise SessionError("the remembered trace is gone; run tracecli "
                               "inspect TRACE with the one to use, or pass TRACE", path=t.given) from None
        if info.st_size != t.size or info.st_mtime_ns != t.mtime_ns:
            digest = file_digest(t.path)
            if digest != t.sha256:
                self.notices.append(f"{t.given} changed since it was remembered; reading it again"
                                    + ("; the remembered plan is stale and forgotten" if self.plan else ""))
                self.plan = None
            self.trace = RememberedTrace(t.path, t.given, t.format, t.sizes, t.step, digest,
                                         info.st_size, info.st_mtime_ns)
        return self.trace

    def trace_state(self) -> str:
        """The remembered trace against its file: ``unchanged``, ``changed since it was
        remembered`` (and refreshed) or ``gone``."""
        before = len(self.notices)
        try:
            self.remembered_trace()
        except SessionError:
            return "gone"
        changed = len(self.notices) > before
        del self.notices[before:]
        return "changed since it was remembered" if changed else "unchanged"

    # -- the plan ----------------------------------------------------------------------

    def remember_plan(self, strategy: str, settings: dict[str, Any], plan_text: str) -> Optional[str]:
        """Keep the plan just printed (its file and how it was made)."""
        try:
            (self.directory / STATE_DIR).mkdir(exist_ok=True)
            atomic_write(str(self.plan_file), plan_text.encode("utf-8"))
        except (OSError, TraceCliError) as exc:
            return f"could not remember the plan in {STATE_DIR}/: {exc}"
        self.plan = {"strategy": strategy, "options": settings,
                     "file": str(self.plan_file),
                     "trace_sha256": self.trace.sha256 if self.trace else None}
        return None

    def remembered_plan(self) -> Optional[str]:
        """The remembered plan file, if there is one for the remembered trace."""
        if not self.plan or not Path(self.plan.get("file", "")).is_file():
            return None
        if self.trace is not None and self.plan.get("trace_sha256") not in (None, self.trace.sha256):
            return None
        return self.plan["file"]
