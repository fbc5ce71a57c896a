"""Fitting the time model's constants (:mod:`.timing`) on measured tables, and choosing which
fitted constants answer for a topology.

A measured point is ``(table, class, multi-node?, features, measured µs)``; the model is
linear in its constants, so they are the weighted least squares of RELATIVE error
(``(predicted - measured) / measured``), each table weighing as much as any other whatever
its number of sizes, with a weak pull (:data:`PRIOR`) of the latency and bandwidth factors
toward 1 (NCCL's own numbers) so a class seen at one size stays determined; constants that
would go negative are held at 0. Three fits, one per LEVEL of grouping the networks:

- ``net``: each transport its own constants (``ib``, ``roce``, ``tcpxo`` ...);
- ``family``: transports grouped (``rdma``, ``plugin``, ``socket``, :mod:`.transports`);
- ``all``: every network one class.

:func:`resolve` answers a transport from the finest level whose fit saw it: a transport no
table measured takes its family's, else all networks' constants.

>>> pts = [Point("a", "local", False, (1.0, 0.0, 10.0, n / 100.0), 30.0 + 2 * n / 100.0)
...        for n in (100, 1000, 10000)]
>>> p = fit(pts)["local"]
>>> round(p.floor + p.lat * 10, 1), round(p.bw, 2)
(30.0, 2.0)
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from .timing import TimeParams
from .transports import family

__all__ = ["Point", "fit", "fit_levels", "resolve", "loco", "LEVELS", "PRIOR", "class_key"]

LEVELS = ("net", "family", "all")
PRIOR = 0.02  # weight of the pull of each constant toward its prior, in units of one table's error
# floors are pulled toward 0 on the scale of a kernel launch (10 µs) and of a network round
# trip through a proxy (100 µs): a floor is then set by small sizes, not by one large one
FLOOR_SCALE = {"floor": 10.0, "net_floor": 100.0}


class Point(NamedTuple):
    table: str
    net: str          # the transport, or "local" on one node
    multi_node: bool
    feats: tuple      # (1, multi-node, NCCL latency µs, NCCL bandwidth µs): timing.features
    measured_us: float


def class_key(net: str, level: str) -> str:
    """The class a transport falls in at ``level`` (``local`` stays ``local``)."""
    if net == "local" or level == "net":
        return net
    return family(net) if level == "family" else "network"


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a small dense system)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        if abs(m[c][c]) < 1e-300:
            continue
        for r in range(n):
            if r != c and m[r][c] != 0.0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > 1e-300 else 0.0 for i in range(n)]


def fit(points: list[Point], level: str = "net") -> dict[str, TimeParams]:
    """The constants of each class the points measure, at ``level`` (see the module)."""
    classes = sorted({class_key(p.net, level) for p in points})
    names = ["floor"] + [f"net_floor:{c}" for c in classes if c != "local"] + \
        [f"{k}:{c}" for c in classes for k in ("lat", "bw")]
    idx = {n: i for i, n in enumerate(names)}
    per_table: dict[str, int] = {}
    for p in points:
        per_table[p.table] = per_table.get(p.table, 0) + 1
    rows = []
    for p in points:
        c = class_key(p.net, level)
        x = [0.0] * len(names)
        one, multi, lat, bw = p.feats
        x[idx["floor"]] = one / p.measured_us
        if c != "local":
            x[idx[f"net_floor:{c}"]] = multi / p.measured_us
        x[idx[f"lat:{c}"]] = lat / p.measured_us
        x[idx[f"bw:{c}"]] = bw / p.measured_us
        rows.append((x, 1.0, 1.0 / per_table[p.table]))
    for n in names:  # the priors: factors toward 1, floors toward 0 on their own scale
        x = [0.0] * len(names)
        x[idx[n]] = 1.0 / FLOOR_SCALE.get(n.split(":")[0], 1.0)
        rows.append((x, 1.0 if n.startswith(("lat:", "bw:")) else 0.0, PRIOR))
    free = set(range(len(names)))
    theta = [0.0] * len(names)
    for _ in range(len(names) + 1):  # hold negative constants at 0 and refit the rest
        order = sorted(free)
        ata = [[sum(w * x[i] * x[j] for x, _, w in rows) for j in order] for i in order]
        atb = [sum(w * x[i] * y for x, y, w in rows) for i in order]
        sol = _solve(ata, atb)
        theta = [0.0] * len(names)
        for i, v in zip(order, sol):
            theta[i] = v
        negative = {i for i in order if theta[i] < 0.0}
        if not negative:
            break
        free -= negative
    return {c: TimeParams(theta[idx["floor"]],
                          theta[idx[f"net_floor:{c}"]] if c != "local" else 0.0,
                          theta[idx[f"lat:{c}"]], theta[idx[f"bw:{c}"]]) for c in classes}


def fit_levels(points: list[Point]) -> dict[str, dict[str, TimeParams]]:
    """``{level: {class: constants}}`` for the three levels."""
    return {level: fit(points, level) for level in LEVELS}


def resolve(levels: dict[str, dict[str, TimeParams]], net: Optional[str]
            ) -> Optional[tuple[TimeParams, str]]:
    """``(constants, class)`` for a topology on transport ``net`` (``None``: one node): the
    finest level whose fit measured that class; ``None`` where no fit did."""
    want = "local" if net is None else net
    for level in LEVELS:
        key = class_key(want, level)
        hit = levels.get(level, {}).get(key)
        if hit is not None:
            return hit, key
    return None


def loco(points: list[Point]) -> dict[str, list[tuple[Point, float, str]]]:
    """Leave-one-cluster-out: each table predicted by constants fitted on the OTHER tables
    only. ``{table: [(point, predicted µs, class used), ...]}``."""
    from .timing import time_us

    out: dict[str, list[tuple[Point, float, str]]] = {}
    for held in sorted({p.table for p in points}):
        levels = fit_levels([p for p in points if p.table != held])
        for p in (q for q in points if q.table == held):
            hit = resolve(levels, None if p.net == "local" else p.net)
            params, key = hit if hit is not None else (TimeParams(0.0, 0.0, 1.0, 1.0), "nccl")
            out.setdefault(held, []).append((p, time_us(params, p.feats), key))
    return out
