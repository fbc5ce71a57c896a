"""Fitting the time model's constants (:mod:`.timing`) on measured tables, and choosing which
fitted constants answer for a topology.

A measured point is ``(table, class, multi-node?, features, measured µs)``; the model is
linear in its constants, so they are the weighted least squares of RELATIVE error
(``(predicted - measured) / measured``), each table weighing as much as any other whatever
its number of sizes. One node has its own constants (``local``). A network's constants are a
sum, shrunk toward each other by weak priors (:data:`PRIOR`): all networks' (``network``,
factors pulled toward 1, NCCL's own numbers; its LL share, ``ll_net``, toward 0 and never
below it), plus its family's share (``verbs``,
``libfabric``, ...: :mod:`.transports`), plus its own share, each share pulled toward 0, so a
transport measured at few sizes stays near its family and a floor is set by small sizes, not
by one large one; a transport that shares its family has no floor share (:func:`_no_floor`).
The NVLS latency factor is one for one node and one for all networks; the NVLS-on-sm100
bandwidth factor, the NVLS pipeline's fill, the channel-reduction factor, the ring's share on
a network (:mod:`.timing`) and the launch term of a thread driving several GPUs
(``Point.gpus_per_thread``, :func:`.timing.launch_us`) are one for all, the fill, the channel
factor and the ring's share pulled toward 0. Base constants that would go negative are held at 0.

:func:`resolve` answers a transport with its own constants where a table measured it, else its
family's, else all networks': a transport no table measured is timed from the others.

>>> pts = [Point("a", "local", False, (1.0, 0.0, 10.0, n / 100.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
...              30.0 + 2 * n / 100.0)
...        for n in (100, 1000, 10000, 100000)]
>>> p = fit(pts)["local"]   # 30 µs of floor and latency, twice NCCL's bandwidth term
>>> from .timing import time_us
>>> [round(time_us(p, q.feats) / q.measured_us, 2) for q in pts]  # the priors cost a little
[0.87, 0.9, 0.94, 0.95]
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from .timing import TimeParams
from .transports import EFA_CLASSES, family

__all__ = ["Point", "fit", "resolve", "loco", "PRIOR"]

PRIOR = 0.02  # weight of the pull of each constant toward its prior, in units of one table's error
# floors are pulled toward 0 on the scale of a kernel launch (10 µs) and of a network round
# trip through a proxy (100 µs), the launch term toward 0 on the scale of one kernel launch (5 µs):
# a floor is then set by small sizes, not by one large one
FLOOR_SCALE = {"floor": 10.0, "net_floor": 100.0, "launch": 5.0}
# the constants one for all classes (timing.TimeParams): floor, NVLS-on-sm100 bandwidth, launch,
# fill, channel reduction, the ring's share on a network
GLOBAL = ("floor", "bw_nvls_sm100", "launch", "fill", "chan", "ring_net")


class Point(NamedTuple):
    table: str
    net: str          # the transport, or "local" on one node
    multi_node: bool
    feats: tuple      # timing.features: (1, multi-node, latency, bandwidth, NVLS-sm100 bandwidth,
    #                   NVLS latency, fill, channel reduction, ring on a network, LL on a
    #                   network), µs
    measured_us: float
    cluster: str = ""  # the cluster measured: loco holds its tables out together (default: table)
    gpus_per_thread: int = 1  # GPUs one thread drove (nccl-tests -g): timing.launch_us


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


def _terms(net: str) -> list[str]:
    """The parameter groups a class's constants add up (``local`` stands alone)."""
    if net == "local":
        return ["local"]
    if family(net) == net:  # a transport alone in its family: no family share
        return ["network", "net:" + net]
    return ["network", "family:" + family(net), "net:" + net]


def _no_floor(group: str) -> bool:
    """Groups with no floor share of their own: one node (no network round trip) and a
    transport that shares its family (``ib``, ``roce``, ``ofi``): its floor is its family's,
    set by whichever of the family's tables measured small sizes (a transport whose tables all
    start at 8 MiB would otherwise take a floor from its large sizes' errors). aws-ofi-nccl's
    two EFA protocols (:data:`.transports.EFA_CLASSES`) each have theirs: the floor is the
    protocol's own round trip (SENDRECV through the provider's send and receive, RDMA through
    the plugin's writes), and each is measured from 8 B."""
    return group == "local" or (group.startswith("net:") and family(group[4:]) != group[4:]
                                and group[4:] not in EFA_CLASSES.values())


def fit(points: list[Point]) -> dict[str, TimeParams]:
    """The constants of every class the points measure (see the module): one node
    (``local``); networks as ``network`` + ``family:F`` + ``net:N`` shrunk toward each other.

    Returns ``{"local", "network", "<family>", "<net>": TimeParams}``: a family's constants
    are ``network`` + its family's share, a transport's add its own share."""
    groups = sorted({g for p in points for g in _terms(p.net)})
    names = list(GLOBAL) + [f"{k}|{g}" for g in groups
                                                    for k in ("net_floor", "lat", "bw", "ll")
                                                    if not (k == "net_floor" and _no_floor(g))
                                                    and not (k == "ll" and g == "local")]
    names += [f"lat_nvls|{g}" for g in ("local", "network") if g in groups]
    idx = {n: i for i, n in enumerate(names)}
    per_table: dict[str, int] = {}
    for p in points:
        per_table[p.table] = per_table.get(p.table, 0) + 1
    rows = []
    for p in points:
        x = [0.0] * len(names)
        one, multi, lat, bw, bw_nvls, lat_nvls, fill, chan, ring, ll = p.feats
        for k, f in zip(GLOBAL, (one, bw_nvls, max(0, p.gpus_per_thread - 1), fill, chan, ring)):
            x[idx[k]] = f / p.measured_us
        for g in _terms(p.net):
            if f"net_floor|{g}" in idx:
                x[idx[f"net_floor|{g}"]] = multi / p.measured_us
            x[idx[f"lat|{g}"]] = lat / p.measured_us
            x[idx[f"bw|{g}"]] = bw / p.measured_us
            if f"ll|{g}" in idx:  # LL on a network: no share on one node
                x[idx[f"ll|{g}"]] = ll / p.measured_us
            if f"lat_nvls|{g}" in idx:
                x[idx[f"lat_nvls|{g}"]] = lat_nvls / p.measured_us
        rows.append((x, 1.0, 1.0 / per_table[p.table]))
    for n in names:  # priors: base factors toward 1, shares and floors toward 0 (their scale)
        kind, _, g = n.partition("|")
        base = (g in ("local", "network") and kind in ("lat", "bw", "lat_nvls")) \
            or kind == "bw_nvls_sm100"
        x = [0.0] * len(names)
        x[idx[n]] = 1.0 / FLOOR_SCALE.get(kind, 1.0)
        rows.append((x, 1.0 if base else 0.0, PRIOR))
    theta = _nonnegative_lstsq(rows, len(names), {i for n, i in idx.items() if n in (
        "floor", "bw_nvls_sm100", "launch", "fill") or n.endswith(("|local", "|network"))})
    nvls, launch = theta[idx["bw_nvls_sm100"]], theta[idx["launch"]]
    fill, chan, ring = theta[idx["fill"]], theta[idx["chan"]], theta[idx["ring_net"]]
    val = lambda k, g: theta[idx[f"{k}|{g}"]] if f"{k}|{g}" in idx else 0.0  # noqa: E731
    out = {}
    if "local" in groups:
        out["local"] = TimeParams(theta[0], 0.0, val("lat", "local"), val("bw", "local"), nvls,
                                  launch, max(0.0, val("lat_nvls", "local")), fill, chan, ring)
    for g in groups:
        if g == "local":
            continue
        chain = ["network"] if g == "network" else ["network", g] if g.startswith("family:") \
            else _terms(g[4:])
        key = g.split(":", 1)[-1]
        out[key] = TimeParams(theta[0], max(0.0, sum(val("net_floor", c) for c in chain)),
                              max(0.0, sum(val("lat", c) for c in chain)),
                              max(0.0, sum(val("bw", c) for c in chain)), nvls, launch,
                              max(0.0, val("lat_nvls", "network")), fill, chan, ring,
                              sum(val("ll", c) for c in chain))
    return out


def _nonnegative_lstsq(rows, n: int, nonneg: set) -> list[float]:
    """Weighted least squares; the parameters of ``nonneg`` that come out negative are held at
    0 and the rest refitted (shares of a family or transport may be negative)."""
    free = set(range(n))
    theta = [0.0] * n
    for _ in range(n + 1):
        order = sorted(free)
        ata = [[sum(w * x[i] * x[j] for x, _, w in rows) for j in order] for i in order]
        atb = [sum(w * x[i] * y for x, y, w in rows) for i in order]
        theta = [0.0] * n
        for i, v in zip(order, _solve(ata, atb)):
            theta[i] = v
        negative = {i for i in order if i in nonneg and theta[i] < 0.0}
        if not negative:
            break
        free -= negative
    return theta


def resolve(fitted: dict[str, TimeParams], net: Optional[str]
            ) -> Optional[tuple[TimeParams, str]]:
    """``(constants, class)`` for a topology on transport ``net`` (``None``: one node): the
    transport's own where a table measured it, else its family's, else all networks'."""
    if net is None:
        hit = fitted.get("local")
        return None if hit is None else (hit, "local")
    for key in (net, "family:" + family(net), "network"):
        hit = fitted.get(key.split(":", 1)[-1] if key.startswith("family:") else key)
        if hit is not None:
            return hit, key.split(":", 1)[-1]
    return None


def loco(points: list[Point]) -> dict[str, list[tuple[Point, float, str]]]:
    """Leave-one-cluster-out: each table predicted by constants fitted on the tables of the
    OTHER clusters only (a point's ``cluster``, else its table, is its cluster).
    ``{table: [(point, predicted µs, class used), ...]}``."""
    from .timing import launch_us, time_us

    out: dict[str, list[tuple[Point, float, str]]] = {}
    group = lambda p: p.cluster or p.table  # noqa: E731
    for held in sorted({group(p) for p in points}):
        fitted = fit([p for p in points if group(p) != held])
        for p in (q for q in points if group(q) == held):
            hit = resolve(fitted, None if p.net == "local" else p.net)
            params, key = hit if hit is not None else (TimeParams(0.0, 0.0, 1.0, 1.0, 1.0), "nccl")
            out.setdefault(p.table, []).append(
                (p, time_us(params, p.feats) + launch_us(params, p.gpus_per_thread), key))
    return out
