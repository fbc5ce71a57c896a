"""Writing the files a command produces: checked first, written last, replaced atomically.

The rules (``docs/session.md`` states them for users):

- a path that exists, or is a symlink even to nothing, is replaced only with ``--force``;
  ``--force`` replaces the link itself, never the file it points to;
- a directory is never replaced; two outputs of one command never share a path, and no
  output is one of the command's inputs;
- nothing is written until the command has succeeded; each file is written to a temporary
  file in the same directory and renamed over the target, so a failed write (disk full)
  leaves the old file whole;
- ``-`` is standard output, which the caller writes.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> out = Outputs(force=False)
>>> out.claim("--out", os.path.join(d, "plan.json"))
>>> out.write("--out", "{}") == os.path.join(d, "plan.json")
True
>>> open(os.path.join(d, "plan.json")).read()
'{}'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from ..errors import OutputError

__all__ = ["Outputs", "atomic_write"]


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b)


def atomic_write(path: str, data: bytes | Iterable[bytes]) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of bytes written as they come)
    through a temporary file in the same directory."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"cannot write: {exc.strerror}", path=path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                for chunk in data:
                    f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OutputError(f"cannot write: {exc.strerror}; the file is unchanged", path=path) from None


class Outputs:
    """The files one command writes: claimed (and checked) before the work, written after."""

    def __init__(self, force: bool, inputs: Iterable[Optional[str]] = ()):
        self.force = force
        self.inputs = [p for p in inputs if p and p != "-"]
        self.claimed: dict[str, str] = {}  # option -> path

    def claim(self, option: str, path: Optional[str]) -> None:
        if not path:
            return
        for other, taken in self.claimed.items():
            if taken == path == "-" or (path != "-" and taken != "-" and _same(taken, path)):
                raise OutputError(f"{option} and {other} name the same file; give "
                                  "each its own", path=path)
        if path != "-":
            for source in self.inputs:
                if _same(source, path):
                    raise OutputError(f"{option} names an input of this command; "
                                      "write to another file", path=path)
            if os.path.isdir(path):
                raise OutputError(f"{option} is a directory; name a file", path=path)
            if (os.path.lexists(path)) and not self.force:
                what = "is a symlink" if os.path.islink(path) else "exists"
                raise OutputError(f"{what}; pass --force to replace it", path=path)
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise OutputError("its directory does not exist", path=path)
        self.claimed[option] = path

    def path(self, option: str) -> Optional[str]:
        return self.claimed.get(option)

    def write(self, option: str, text: str | Iterable[str]) -> str:
        """Write a claimed output file (text, or chunks of text) and return its path;
        ``-`` (standard output) is the caller's to write."""
        path = self.claimed[option]
        if path == "-":
            raise ValueError(f"{option} is standard output; the caller writes it")
        chunks = [text] if isinstance(text, str) else text
        atomic_write(path, (chunk.encode("utf-8") for chunk in chunks))
        return path
