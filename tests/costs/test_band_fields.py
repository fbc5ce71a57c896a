"""The error band's structured fields in ``collective --json`` (tracecli/costs/error.py
``ErrorBand``, tracecli/costs/nccl/accuracy.py): the scope it comes from, the scopes that
widened it, and whether the line rate capped it."""

from __future__ import annotations

import json

import pytest

from conftest import run
from tracecli.costs.nccl.accuracy import error_table
from tracecli.costs.nccl.fitted import ERROR_BANDS
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.wire import line_rate_us
from tracecli.model import CollectiveKind as K

KEYS = {"low_pct", "high_pct", "basis", "scope", "widened_by", "capped", "uncapped_high_pct", "extrapolated"}
SOCKET = ("--net", "socket", "--nodes", "2", "--gpus-per-node", "8", "--nic-gbps", "100",
          "--nics", "1")


def _rows(*args):
    doc = json.loads(run("collective", "allreduce", *args, "--json").stdout)
    return {r["bytes"]: r["error_band"] for r in doc["rows"]}


def _band_row(scope, nbytes):
    return next(r for r in ERROR_BANDS[scope] if r[0] <= nbytes and (r[1] is None or nbytes < r[1]))


def test_a_plain_band_says_its_scope_and_nothing_else():
    for band in _rows("--platform", "dgx-h100", "--nccl", "2.30.7", "--sizes", "8,1M,1G").values():
        assert set(band) == KEYS
        assert (band["scope"], band["widened_by"], band["capped"], band["uncapped_high_pct"],
                band["extrapolated"]) == ("local", [], False, None, False)
    # RoCE at 8 B: its own held-out errors and its constants' misses lie inside the
    # network band (ERROR_BANDS net:roce, fit:roce), so nothing widens it
    band = _rows("--platform", "dgx-h100", "--nodes", "2", "--net", "roce", "--nccl", "2.30.7",
                 "--sizes", "8")[8]
    _, _, low, high, _, _ = _band_row("network", 8)
    assert (band["scope"], band["widened_by"], band["capped"]) == ("network", [], False)
    assert (band["low_pct"], band["high_pct"]) == (pytest.approx(100 * low), pytest.approx(100 * high))


def test_a_band_widened_by_the_constants_own_misses_names_the_scopes():
    # Slingshot at 8 B: ofi's held-out errors reach above the pooled band (net:ofi) and the
    # shipped constants miss ofi's own tables further still (fit:ofi): the high edge is fit:ofi's
    band = _rows("--platform", "cscs-alps-gh200", "--nodes", "2", "--sizes", "8")[8]
    assert (band["scope"], band["widened_by"], band["capped"]) == ("network", ["net:ofi", "fit:ofi"],
                                                                   False)
    assert _band_row("net:ofi", 8)[3] > _band_row("network", 8)[3]
    assert band["high_pct"] == pytest.approx(100 * _band_row("fit:ofi", 8)[3])
    # p5 (EFA RDMA, one cluster's tables): only its constants' in-sample misses can widen it
    band = _rows("--platform", "aws-p5", "--nodes", "2", "--sizes", "8")[8]
    assert band["widened_by"] == ["fit:efa-rdma"]


def test_a_band_capped_at_the_line_rate_says_so_and_what_it_was():
    # one 100 Gb/s NIC a node: 1 GiB runs at the line rate, the band's upper edge is cut to 0
    rows = _rows(*SOCKET, "--sizes", "1M:1G")
    big = rows[1 << 30]
    assert big["capped"] is True and big["high_pct"] == 0.0
    uncut = error_table("network", "socket", "socket").at(K.ALL_REDUCE, 1 << 30)
    assert big["uncapped_high_pct"] == pytest.approx(100 * uncut.high)
    assert big["uncapped_high_pct"] > big["high_pct"]
    m = NcclModel.for_topology("h100", 2, 8, True, 100.0, 1, net="socket")
    for n, band in rows.items():  # the flag and the figure agree with the line rate
        predicted, line = m.timed_us(K.ALL_REDUCE, n), line_rate_us("AllReduce", n, 2, 100.0)
        top = predicted / line - 1.0
        assert band["capped"] == (band["uncapped_high_pct"] is not None)
        if band["capped"]:
            assert band["high_pct"] == pytest.approx(100 * max(top, 0.0), abs=1e-3)
            assert band["uncapped_high_pct"] / 100 > top
        else:  # left alone: the band never let a run beat the line rate
            assert band["high_pct"] / 100 <= top + 1e-5


@pytest.mark.parametrize("args", [
    ("--platform", "dgx-h100", "--nodes", "2"),
    ("--platform", "aws-p5", "--nodes", "2"),
    ("--platform", "aws-p4d", "--nodes", "2"),
    ("--platform", "dgx-h100", "--nodes", "2", "--net", "tcpx"),
    ("--platform", "dgx-h100", "--nodes", "2", "--net", "ofi"),
    SOCKET,
])
def test_the_fields_agree_with_the_basis_on_every_row(args):
    for band in _rows(*args).values():
        if band is None:
            continue
        basis = band["basis"]
        assert band["capped"] == ("; capped at " in basis)
        assert any(s.startswith("fit:") for s in band["widened_by"]) == \
            ("under the constants fitted on them" in basis)
        assert any(s.startswith("net:") for s in band["widened_by"]) == ("held out over" in basis)
        assert band["scope"] in ("network", "fallback")


def test_a_class_no_table_measured_is_the_fallback_scope_and_never_widened():
    table = error_table("network", "nowhere", "network")
    band = table.at(K.ALL_REDUCE, 8)
    assert (band.scope, band.widened_by, band.capped) == ("fallback", (), False)
    assert band.to_json()["scope"] == "fallback"


def test_a_band_beyond_the_tables_scale_says_it_is_extrapolated():
    from tracecli.costs.nccl import fitted

    most = fitted.SCALE["ib"][0]
    near = _rows("--platform", "dgx-h100", "--nodes", str(most), "--nccl", "2.30.7", "--sizes", "1M")
    far = _rows("--platform", "dgx-h100", "--nodes", str(4 * most), "--nccl", "2.30.7", "--sizes", "1M")
    assert near[1 << 20]["extrapolated"] is False and "extrapolated" not in near[1 << 20]["basis"]
    assert far[1 << 20]["extrapolated"] is True
    assert f"no ib table ran on more than {most} nodes" in far[1 << 20]["basis"]
