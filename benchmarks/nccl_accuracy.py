"""How far tracecli's NCCL time model lands from real nccl-tests tables it was NOT fitted on.

The training set is tests/nccl_training.py (sources: tests/fixtures/nccl/README.md). For each
table, the time model's constants are fitted on the OTHER tables only (leave-one-cluster-out,
tracecli/costs/nccl/fit_time.py) and the held-out table is predicted from its topology alone.
Per table: the geometric mean of |error| at sizes >= 1 MiB and the worst ratio (max of
predicted/measured, measured/predicted) below 1 MiB (and, apart, that worst ratio without the
rows whose out-of-place and in-place times in the same run are more than 1.5x apart), BEFORE (NCCL's own model time, what
tracecli printed before issue 23) and AFTER (the time model). Goal: <= 20 % and within 2x.

    PYTHONPATH=. python benchmarks/nccl_accuracy.py            # the table
    PYTHONPATH=. python benchmarks/nccl_accuracy.py --sizes    # and every size
    PYTHONPATH=. python benchmarks/nccl_accuracy.py --write    # refit: tracecli/costs/nccl/fitted.py

``--write`` fits the shipped constants on ALL tables and stores them with the cross-validated
error bands (10th-90th percentile of the held-out errors per size band, one node and networks
apart) that NcclModel.error reports.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from nccl_training import TABLES  # noqa: E402

from tracecli.costs.nccl.fit_time import Point, fit, loco  # noqa: E402

BANDS = ((0, 64 << 10), (64 << 10, 1 << 20), (1 << 20, 16 << 20), (16 << 20, 256 << 20),
         (256 << 20, None))
OUT = ROOT / "tracecli" / "costs" / "nccl" / "fitted.py"


def points() -> tuple[list[Point], dict[str, list[tuple[int, float, float, str]]]]:
    """The training points, and per table ``(bytes, measured, NCCL's own µs, pick)``."""
    pts, before = [], {}
    for t in TABLES:
        m = t.nccl()
        for n, us in t.points():
            pts.append(Point(t.name, m.time_class or "local", t.multi_node, m.features(t.kind, n), us,
                             t.group, t.gpus_per_thread))
            a, p, nccl = m.pick(t.kind, n)
            before.setdefault(t.name, []).append((n, us, nccl, f"{a}/{p}"))
    return pts, before


def summary(rows: list[tuple[int, float, float]]) -> tuple:
    """``(geomean |error| >= 1 MiB or None, worst ratio < 1 MiB or None)``."""
    big = [abs(p / m - 1) for n, m, p in rows if n >= 1 << 20]
    small = [max(p / m, m / p) for n, m, p in rows if n < 1 << 20]
    geo = math.exp(sum(math.log(max(x, 1e-9)) for x in big) / len(big)) if big else None
    return geo, max(small) if small else None


def held_out() -> dict[str, list[tuple[int, float, float, str]]]:
    pts, before = points()
    res = loco(pts)
    return {t: [(b[0], p.measured_us, pred, key) for b, (p, pred, key) in zip(before[t], rows)]
            for t, rows in res.items()}


def in_sample() -> dict[str, list[tuple[int, float, float, str]]]:
    """Per table, as :func:`held_out`, the predictions of the constants fitted on ALL tables
    (the shipped ones): how far the model lands on the tables it was fitted on."""
    from tracecli.costs.nccl.fit_time import resolve
    from tracecli.costs.nccl.timing import launch_us, time_us

    pts, before = points()
    fitted = fit(pts)
    per_table: dict[str, list[Point]] = {}
    for p in pts:
        per_table.setdefault(p.table, []).append(p)
    out: dict[str, list[tuple[int, float, float, str]]] = {}
    for table, rows in per_table.items():
        params, key = resolve(fitted, None if rows[0].net == "local" else rows[0].net)
        out[table] = [(b[0], p.measured_us,
                       time_us(params, p.feats) + launch_us(params, p.gpus_per_thread), key)
                      for b, p in zip(before[table], rows)]
    return out


OWN_MIN_POINTS = 3  # a transport's own held-out sizes in a band before they widen it


def bands(after, inside=None) -> dict[str, list[tuple]]:
    """Per scope and size band: the 10th-90th percentile of held-out errors, with how many
    points and tables. Scopes: ``local`` (one node); ``network``, the tables of several nodes
    held out against their own transport class's constants (fitted on its other clusters);
    ``net:T``, those over class T alone (in bands where they have at least
    :data:`OWN_MIN_POINTS` sizes), which widens the network band for a model on T
    (:func:`tracecli.costs.nccl.accuracy.error_table`); ``fallback``, the tables of a class
    measured by one cluster only, held out against their family's or all networks' constants:
    how far another class's constants land, the band of a model on a class no table measured;
    ``fit:T``, class T's tables under the constants fitted on all tables, ``inside``
    (:func:`in_sample`): no held-out error is smaller, so they widen T's band where they reach
    further (a class one cluster measured, whose band is otherwise other classes').
    """
    inside = in_sample() if inside is None else inside
    multi = {t.name: t.multi_node for t in TABLES}
    nets = {t.name: t.nccl().time_class for t in TABLES}
    scopes = {"local": lambda n: not multi[n], "network": lambda n: multi[n],
              "fallback": lambda n: multi[n]}
    for net in sorted({nets[t.name] for t in TABLES if t.multi_node and nets[t.name]}):
        scopes["net:" + net] = lambda n, net=net: multi[n] and nets[n] == net
        scopes["fit:" + net] = scopes["net:" + net]
    out: dict[str, list[tuple]] = {}
    for scope, member in scopes.items():
        out[scope] = []
        least = OWN_MIN_POINTS if scope.startswith(("net:", "fit:")) else 1
        for lo, hi in BANDS:
            errs, tables = [], set()
            for name, rows in (inside if scope.startswith("fit:") else after).items():
                if not member(name):
                    continue
                for n, meas, pred, used in rows:
                    if scope in ("network", "fallback") or scope.startswith("net:"):
                        if (used == nets[name]) != (scope != "fallback"):
                            continue
                    if lo <= n and (hi is None or n < hi):
                        errs.append(pred / meas - 1)
                        tables.add(name)
            if len(errs) >= least:
                errs.sort()
                q = lambda f: errs[min(len(errs) - 1, max(0, round(f * (len(errs) - 1))))]  # noqa: E731
                out[scope].append((lo, hi, round(q(0.1), 4), round(q(0.9), 4), len(errs),
                                   len(tables)))
    return {scope: rows for scope, rows in out.items() if rows}


def scale() -> dict[str, tuple[int, int]]:
    """The scale the training tables measured, ``(most nodes, most GPUs a node)``: per
    transport class, its family and all networks, over the tables of several nodes;
    ``local``, over one node's. A topology beyond either is timed and banded by
    extrapolation (``NcclModel.beyond_scale``)."""
    from tracecli.costs.nccl.transports import family

    out: dict[str, tuple[int, int]] = {}
    for t in TABLES:
        m = t.nccl()
        keys = (m.time_class, family(m.time_class), "network") if t.multi_node else ("local",)
        for key in keys:
            nodes, per = out.get(key, (0, 0))
            out[key] = (max(nodes, m.topology.nodes), max(per, m.topology.gpus_per_node))
    return dict(sorted(out.items()))


def write(path: Path = OUT) -> str:
    pts, _ = points()
    fitted = fit(pts)
    lines = ['"""The NCCL time model\'s fitted constants and cross-validated error bands.',
             "", "GENERATED by ``PYTHONPATH=. python benchmarks/nccl_accuracy.py --write`` from the",
             "training tables of tests/nccl_training.py; tests/costs/test_nccl_time.py refits them and",
             'checks they are these. Do not edit by hand."""', "",
             "from .timing import TimeParams", "", "TRAINING = " + repr(tuple(t.name for t in TABLES)),
             "", "# class -> TimeParams(floor µs, net_floor µs, latency factor, bandwidth factor, "
             "NVLS-on-sm100 bandwidth factor, µs per more GPU a thread launches, NVLS latency factor, "
             "NVLS fill factor, channel-reduction factor, ring-on-a-network share, "
             "LL-on-a-network share)",
             "FITTED = {"]
    for c, p in fitted.items():
        lines.append(f"    {c!r}: TimeParams({p.floor!r}, {p.net_floor!r}, {p.lat!r}, {p.bw!r}, "
                     f"{p.bw_nvls_sm100!r}, {p.launch!r}, {p.lat_nvls!r}, {p.fill!r}, {p.chan!r}, "
                     f"{p.ring_net!r}, {p.ll_net!r}),")
    lines += ["}", "", "# scope -> (lo bytes, hi bytes or None, p10 error, p90 error, points, tables)",
              "ERROR_BANDS = " + repr(bands(held_out())), "",
              "# class -> (the most nodes, the most GPUs a node) its tables ran on",
              "SCALE = " + repr(scale()), ""]
    text = "\n".join(lines)
    path.write_text(text)
    return text


def main(argv: list[str]) -> None:
    if "--write" in argv:
        write()
        print(f"wrote {OUT.relative_to(ROOT)}")
    _, before = points()
    after = held_out()
    print(f"{'table (held out)':30} {'pts':>4} {'before >=1MiB':>14} {'before <1MiB':>13} "
          f"{'after >=1MiB':>13} {'after <1MiB':>12} {'<1MiB*':>7}  constants")
    contradicted = {}
    for t in TABLES:
        b = summary([(n, m, p) for n, m, p, _ in before[t.name]])
        a = summary([(n, m, p) for n, m, p, _ in after[t.name]])
        contradicted[t.name] = t.contradicted()
        kept = summary([(n, m, p) for n, m, p, _ in after[t.name]
                        if n not in contradicted[t.name]])
        pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        rat = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
        print(f"{t.name:30} {len(before[t.name]):>4} {pct(b[0]):>14} {rat(b[1]):>13} "
              f"{pct(a[0]):>13} {rat(a[1]):>12} {rat(kept[1]):>7}  {after[t.name][0][3]}")
    print("\n* worst ratio below 1 MiB without the rows the run contradicts itself on (its "
          "out-of-place and in-place times of one size more than 1.5x apart):")
    for name, rows in contradicted.items():
        if rows:
            print(f"  {name}: " + ", ".join(f"{n} B {o:g} vs {i:g} us" for n, (o, i) in
                                             sorted(rows.items())))
    if "--sizes" in argv:
        for t in TABLES:
            print(f"\n{t.name}\n{'bytes':>12} {'measured us':>12} {'NCCL us':>10} {'err':>8} "
                  f"{'time model us':>14} {'err':>8}  pick")
            for (n, m, nccl, pick), (_, _, pred, _) in zip(before[t.name], after[t.name]):
                print(f"{n:>12} {m:>12.2f} {nccl:>10.2f} {100 * (nccl / m - 1):>+7.1f}% "
                      f"{pred:>14.2f} {100 * (pred / m - 1):>+7.1f}%  {pick}")


if __name__ == "__main__":
    main(sys.argv[1:])
