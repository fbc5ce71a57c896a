"""pytest at the repository root: where torch is not installed (the ``replay`` extra), the
doctests of the replay modules that import it, and the tests' helper modules that do (the fake
CUDA device and NCCL group), are not collected, and the header names them; the test modules
that need torch skip themselves, by name, with ``pytest.importorskip``."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
TORCH = importlib.util.find_spec("torch") is not None
_IMPORTS_TORCH = re.compile(r"^(import torch|from torch)\b", re.MULTILINE)
_MODULES = [*(HERE / "tracecli").rglob("*.py"),
            *(p for p in (HERE / "tests").rglob("*.py")
              if not p.name.startswith("test_") and "fixtures" not in p.parts)]
NEEDS_TORCH = sorted(str(p.relative_to(HERE)) for p in _MODULES
                     if _IMPORTS_TORCH.search(p.read_text(encoding="utf-8")))
# the fake GPU's site hook, imported only by rank processes that put it on their path: never
# collected (a Python whose own sitecustomize is already imported, as Ubuntu's is, would clash)
collect_ignore = ["tests/fakecuda_site"] + ([] if TORCH else NEEDS_TORCH)


def pytest_report_header(config):
    if not TORCH:
        return ["torch is not installed: doctests not collected (they import it): "
                + ", ".join(NEEDS_TORCH)]
    return None
