"""The import layers: a lower layer never imports a higher one.

Every module of the tracecli package is read with ``ast`` (imports inside functions count;
those under ``if TYPE_CHECKING:`` do not) and each import of a tracecli module is checked
against LAYERS, lowest first:

    base (errors, units, limits, jsonfile, inputfile, _gc)
    < model < parsers < analysis, run < costs < planning
    < render, replay (one level; neither imports the other)
    < pipeline < cli, tracecli/__init__.py (the public API may import anything)

A top-level module or package not in LAYERS fails the test: a new one is placed deliberately.
No module of the package may pass 400 lines either.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


PACKAGE = Path(__file__).resolve().parent.parent / "tracecli"

# top-level name (module or package under tracecli/) -> layer, lowest first
LAYERS = {
    **dict.fromkeys(["errors", "units", "limits", "jsonfile", "inputfile", "_gc"], 0),
    "model": 1,
    "parsers": 2,
    "analysis": 3,
    "run": 3,  # a whole run's rank traces: reads them with the parsers
    "costs": 4,
    "planning": 5,
    "render": 6, "replay": 6,
    "pipeline": 7,
    "cli": 8, "__init__": 8,
}
NAMES = {0: "base", 1: "model", 2: "parsers", 3: "analysis", 4: "costs", 5: "planning",
         6: "render/replay", 7: "pipeline", 8: "cli"}
APART = {"render", "replay"}  # one level, and neither imports the other
SKIPPED = {"__main__"}  # the entry point: it imports the CLI and nothing imports it

def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def top_level(module: str) -> str:
    """``tracecli.planning.plan`` -> ``planning``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The tracecli modules ``module`` imports (``from X import y`` names ``X.y`` where that is
    a module, else ``X``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                       for a in node.names]
        found |= {t for t in targets if t == "tracecli" or t.startswith("tracecli.")}
    return found


@functools.lru_cache(maxsize=1)
def violations() -> tuple[tuple[str, str, str], ...]:
    """(importer, imported, rule) for every import that breaks the layers."""
    found = []
    mods = modules()
    for module, path in mods.items():
        if top_level(module) in SKIPPED:
            continue
        low = top_level(module)
        for target in sorted(imported(module, path, set(mods))):
            high = top_level(target)
            if low == high or high not in LAYERS or low not in LAYERS:
                continue  # within one package; unknown names fail test_every_module_is_placed
            if LAYERS[low] < LAYERS[high]:
                rule = (f"{NAMES[LAYERS[low]]} ({low}) may not import the higher layer "
                        f"{NAMES[LAYERS[high]]} ({high})")
            elif {low, high} <= APART:
                rule = "render and replay never import each other"
            else:
                continue
            found.append((module, target, rule))
    return tuple(found)


def report(found) -> str:
    return "\n".join(f"  {a} imports {b}: {rule}" for a, b, rule in found)


def test_every_module_is_placed():
    unplaced = sorted({top_level(m) for m in modules()} - set(LAYERS) - SKIPPED)
    assert not unplaced, (f"tracecli modules in no layer: {', '.join(unplaced)}; add each to "
                          "LAYERS in tests/test_layers.py at the level it belongs")


def test_no_layer_violations():
    found = violations()
    assert not found, "imports from a lower layer to a higher one:\n" + report(found)


def test_no_module_over_400_lines():
    """Small single-purpose modules (issue 14): none of the package's over 400 lines."""
    long = sorted((sum(1 for _ in path.open()), str(path.relative_to(PACKAGE.parent)))
                  for path in PACKAGE.rglob("*.py"))
    over = [f"{name} ({n} lines)" for n, name in long if n > 400]
    assert not over, "modules over 400 lines: " + ", ".join(over)


def test_the_walker_sees_what_it_must(tmp_path):
    """Relative imports resolve, function-level imports count, TYPE_CHECKING ones do not."""
    source = tmp_path / "tracecli" / "planning" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..render import jsonout\n"
        "from . import plan\n"
        "import tracecli.replay.jobs\n"
        "if TYPE_CHECKING:\n"
        "    from ..cli import cli\n"
        "else:\n"
        "    from ..session import Session\n"
        "def f():\n"
        "    from ..pipeline import plan_trace\n")
    known = {"tracecli.render.jsonout", "tracecli.planning.plan"}
    assert imported("tracecli.planning.x", source, known) == {
        "tracecli.render.jsonout", "tracecli.planning.plan", "tracecli.replay.jobs",
        "tracecli.session", "tracecli.pipeline"}
