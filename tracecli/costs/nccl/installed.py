"""The NCCL the installed torch loads, found without importing torch where its files say it.

In order: a torch already imported answers ``torch.cuda.nccl.version()``; pip's CUDA wheels
load NCCL from the ``nvidia-nccl-cu1X`` distribution, whose version its metadata gives; a
torch built without CUDA (``torch/version.py``: ``cuda = None``) has no NCCL; only a CUDA
build with NCCL inside it is imported (seconds) and asked. ``None``: no NCCL here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from typing import Optional

__all__ = ["installed_nccl"]

NCCL_DISTS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
_NO_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*None\s*$", re.M)


def _asked(torch) -> Optional[str]:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a CPU build raises; no NCCL either way
        return None
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v[:3])
    if isinstance(v, int) and v > 0:  # older torch: 2708 or 22105 (major*10000+minor*100+patch)
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else \
            f"{v // 1000}.{v // 100 % 10}.{v % 100}"
    return None


@functools.lru_cache(maxsize=1)
def installed_nccl() -> Optional[str]:
    """``2.27.3``-style version of the NCCL torch loads here, or ``None``."""
    if "torch" in sys.modules:
        return _asked(sys.modules["torch"])
    for dist in NCCL_DISTS:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    if _NO_CUDA.search(text):
        return None
    try:
        import torch  # a CUDA build with NCCL linked in: only it can say which
    except Exception:  # noqa: BLE001 - a broken torch has no NCCL to offer
        return None
    return _asked(torch)
