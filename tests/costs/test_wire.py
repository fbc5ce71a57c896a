"""The line rate (tracecli/costs/nccl/wire.py): a bound from physics, checked against the
training tables' own measurements, never binding on their held-out predictions, and binding
where a transport's fitted factor would beat the NICs (sockets)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nccl_training import TABLES
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.wire import line_rate_us
from tracecli.model import CollectiveKind as K

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import nccl_accuracy  # noqa: E402

FUNC = {K.ALL_REDUCE: "AllReduce", K.ALL_GATHER: "AllGather", K.BROADCAST: "Broadcast",
        K.REDUCE_SCATTER: "ReduceScatter"}
KINDS = tuple(FUNC)


def _bound(table, charged: int) -> float:
    m = table.nccl()
    return line_rate_us(FUNC[table.kind], charged, m.topology.nodes, m.nic_gbps)


def test_the_bytes_each_function_must_move():
    gib = 1 << 30
    # 25 Gb/s = 3,125 bytes a µs
    assert line_rate_us("AllReduce", gib, 2, 25.0) == gib / 3125.0
    assert line_rate_us("Broadcast", gib, 8, 25.0) == gib / 3125.0
    assert line_rate_us("AllGather", gib, 4, 25.0) == 0.75 * gib / 3125.0
    assert line_rate_us("ReduceScatter", gib, 2, 25.0) == 0.5 * gib / 3125.0
    # one node, no NICs, nothing charged, a function without a rule: no bound
    assert line_rate_us("AllReduce", gib, 1, 25.0) == 0.0
    assert line_rate_us("AllReduce", gib, 2, None) == line_rate_us("AllReduce", gib, 2, 0.0) == 0.0
    assert line_rate_us("AllReduce", 0, 2, 25.0) == 0.0
    assert line_rate_us("SendRecv", gib, 2, 25.0) == 0.0


def test_no_measured_table_beats_its_line_rate():
    # the bound is physics: a run faster than it would mean the rule or the stated NICs are wrong
    checked = 0
    for t in TABLES:
        for n, us in t.points():
            bound = _bound(t, n)
            assert bound < us, (t.name, n, bound, us)
            checked += bound > 0
    assert checked > 200  # the tables of several nodes with known NICs were all checked


def test_the_bound_never_binds_on_a_held_out_prediction():
    # so leave-one-cluster-out (which times features without it) scores the product's times
    held = nccl_accuracy.held_out()
    by_name = {t.name: t for t in TABLES}
    closest = max(_bound(by_name[name], n) / pred for name, rows in held.items()
                  for n, _, pred, _ in rows)
    assert 0.5 < closest < 1.0


def test_a_socket_model_never_beats_its_nics():
    m = NcclModel.for_topology("h100", 2, 1, True, 25.0, 1, "2.30.7", "socket")
    bound_hit = 0
    for kind in KINDS:
        for e in range(10, 35, 3):
            charged = m.charged_bytes(kind, 1 << e)
            t = m.timed_us(kind, charged)
            bound = line_rate_us(FUNC[kind], charged, 2, 25.0)
            assert t >= bound
            bound_hit += t == pytest.approx(bound)
    assert bound_hit > 0  # the socket constants (fitted on one machine) do reach it
    # and the curve's minorant stays under the time
    line = m.minorant(K.ALL_REDUCE)
    assert all(line.at(1 << e) <= m.time_ms(K.ALL_REDUCE, 1 << e) for e in range(10, 35))


def test_the_bound_leaves_a_platform_s_times_alone():
    for name, nodes in (("dgx-h100", 2), ("aws-p5", 4), ("gcp-a3", 2)):
        m = NcclModel.for_platform(name, nodes, "2.30.7")
        for kind in KINDS:
            for e in (20, 30):
                charged = m.charged_bytes(kind, 1 << e)
                bound = line_rate_us(FUNC[kind], charged, nodes, m.nic_gbps)
                assert m.timed_us(kind, charged) > 1.05 * bound


def _uncapped(m, kind, charged):
    """The band the error table holds for ``charged`` bytes, before the line rate's cap (with
    the note of a topology beyond its tables' scale, which the cap keeps)."""
    from tracecli.costs.nccl.accuracy import error_table

    band = error_table("network", m.time_class, m.time_params()[1]).at(kind, charged)
    note = m.beyond_scale()
    return band._replace(basis=f"{band.basis}; {note}", extrapolated=True) if note else band


def test_no_band_says_a_run_beats_the_line_rate():
    m = NcclModel.for_topology("h100", 2, 8, True, 100.0, 1, "2.30.7", "socket")
    assert "at 2 x 8" in m.beyond_scale()  # the socket tables ran 2 x 1
    capped = 0
    for kind in KINDS:
        for e in range(10, 35):
            charged = m.charged_bytes(kind, 1 << e)
            pred, line = m.timed_us(kind, charged), line_rate_us(FUNC[kind], charged, 2, 100.0)
            band, raw = m.error_charged(kind, charged), _uncapped(m, kind, charged)
            fastest = pred / (1.0 + band.high)  # the least time the band allows a run
            assert fastest >= line * (1 - 1e-9)
            assert band.low == raw.low or band.low == band.high  # only the upper edge moves
            if raw.high > band.high:
                capped += 1
                assert band.high == pytest.approx(pred / line - 1.0)
                assert "capped at" in band.basis
            else:
                assert band == raw
    assert capped > 0
    # at 1 GiB the prediction is the line rate: the band allows no run faster than it
    assert m.error(K.ALL_REDUCE, 1 << 30).high == 0.0
    # and a plan asks the same band (NcclModel.error is error_charged at time_ms)
    assert m.error(K.ALL_REDUCE, 1 << 27) == m.error_charged(K.ALL_REDUCE, 1 << 27)


def test_a_band_far_from_the_line_rate_is_left_alone():
    m = NcclModel.for_platform("dgx-h100", 2, "2.30.7")
    for e in (10, 20, 30):
        assert m.error_charged(K.ALL_REDUCE, 1 << e) == _uncapped(m, K.ALL_REDUCE, 1 << e)


def test_collective_shows_the_capped_band():
    import json

    from conftest import run

    args = ("collective", "allreduce", "--net", "socket", "--nodes", "2", "--gpus-per-node", "8",
            "--nic-gbps", "100", "--nics", "1", "--sizes", "1M:1G")
    doc = json.loads(run(*args, "--json").stdout)
    rows = {r["bytes"]: r for r in doc["rows"]}
    big = rows[1 << 30]
    line = line_rate_us("AllReduce", 1 << 30, 2, 100.0)
    assert big["predicted_us"] == pytest.approx(line)
    assert big["error_band"]["high_pct"] == 0.0 and "capped at +0%" in big["error_band"]["basis"]
    for r in doc["rows"]:  # no row's band lets a run beat the NICs
        fastest = r["predicted_us"] / (1 + r["error_band"]["high_pct"] / 100)
        assert fastest >= line_rate_us("AllReduce", r["bytes"], 2, 100.0) * (1 - 1e-5)
    text = run(*args).stdout
    assert "the band's upper edge is capped there" in " ".join(text.split())
    assert "capped there" not in " ".join(run("collective", "allreduce", "--platform", "dgx-h100",
                                              "--nodes", "2").stdout.split())
