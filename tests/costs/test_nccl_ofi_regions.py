"""aws-ofi-nccl 1.16.3's region tables (tracecli/costs/nccl/ofi_regions.py) against the tuner's
own code.

``tests/fixtures/ofi_tuner/regions_1.16.3.csv.gz`` is what aws-ofi-nccl's own
``src/tuner/nccl_ofi_regions.cpp`` (tag v1.16.3, compiled whole with the release build's flags
by ``make_fixture.sh``, driven by ``harness.cpp``) makes NCCL pick at the tables' vertices,
one byte either side, where each edge crosses each rank count, and on a grid: its v3 and v2
interfaces, the next region where NCCL disables the first pick, and the channels it sets.
The picks below it are read off the tables by hand, on both sides of a vertex or an edge.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from tracecli.costs.nccl import ofi_regions as regions
from tracecli.costs.nccl import ofi_tuner as ot
from tracecli.costs.nccl.model import NcclModel
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind

FIXTURE = Path(__file__).parent.parent / "fixtures" / "ofi_tuner" / "regions_1.16.3.csv.gz"
INSTANCE = {"p5": "p5.48xlarge", "p5en": "p5en.48xlarge", "p6": "p6-b200.48xlarge"}
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
ALL = {(a, p) for a in ALGOS for p in ("LL", "LL128", "Simple")}  # the harness's v3 table
MiB = 1 << 20


def _name(pair) -> str:
    return "-" if pair is None else "/".join(pair)


def _rows() -> list[dict]:
    with gzip.open(FIXTURE, "rt") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def test_every_pick_is_the_tuners_own():
    rows = _rows()
    assert len(rows) > 15000
    seen = {(r["instance"], r["per_node"], r["func"]) for r in rows if r["v3"] != "-"}
    assert len(seen) == 17  # every table of 1.16.3 holds points where it picks
    wrong = []
    for r in rows:
        nodes = int(r["nodes"])
        args = ("1.16.3", INSTANCE[r["instance"]], r["func"], int(r["nbytes"]),
                int(r["per_node"]) * nodes, nodes)
        v3 = ot.region_pick(*args, ALL)
        got = [_name(v3), "-" if v3 is None else _name(ot.region_pick(*args, ALL - {v3})),
               _name(ot.region_pick(*args, None, True)),
               _name(ot.region_pick(*args, None, False))]
        if got != [r["v3"], r["v3_next"], r["v2"], r["v2_nonvls"]]:
            wrong.append((r, got))
    assert wrong == []


def test_the_channels_p6_sets_are_the_tuners_own():
    rows = [r for r in _rows() if r["channels"] != "0"]
    assert len(rows) > 1000 and {r["channels"] for r in rows} == {"16", "24", "32"}
    for r in rows:  # only p6, 8 a node, a tree/LL128 pick of 4-32 MiB (v1.16.3:1397-1402)
        assert (r["instance"], r["per_node"], r["v3"]) == ("p6", "8", "Tree/LL128")
        assert 4 * MiB <= int(r["nbytes"]) <= 32 * MiB
        assert ot.best_channels(int(r["nbytes"]), int(r["nodes"])) == int(r["channels"])


# (instance, GPUs a node, collective, ranks, bytes, pick) read off the tables (v1.16.3 lines)
HAND = [
    # p5/p5e, 2 a node (708-817): Tree/LL128's vertex (5525504, 32), then Ring/LL128's polygon
    ("p5", 2, "AllReduce", 32, 5525504, "Tree/LL128"),
    ("p5", 2, "AllReduce", 32, 5525505, "Ring/LL128"),
    ("p5", 2, "AllReduce", 8, 1051648, "Tree/LL128"),      # the vertex (1051648, 8)
    ("p5", 2, "AllReduce", 8, 1051649, "Ring/LL128"),
    ("p5", 2, "AllReduce", 8, 41842688, "Ring/LL128"),     # Ring/LL128's vertex (41842688, 8)
    ("p5", 2, "AllReduce", 8, 41842689, "NVLSTree/Simple"),  # its edge to (275775488, 8)
    ("p5", 2, "AllReduce", 64, 296747008, "Ring/LL128"),   # the vertex (296747008, 64)
    ("p5", 2, "AllReduce", 64, 296747009, "Ring/Simple"),  # between it and x = 1073741824
    # p5/p5e, 1 a node (818-896)
    ("p5", 1, "AllReduce", 16, 2367488, "Tree/LL128"),     # the vertex (2367488, 16)
    ("p5", 1, "AllReduce", 16, 2367489, "Ring/LL128"),
    ("p5", 1, "AllReduce", 16, 34152448, "Ring/LL128"),    # (4736000,2)-(269484032,128) at 16
    ("p5", 1, "AllReduce", 16, 34152449, "Ring/Simple"),
    ("p5", 1, "AllGather", 8, 28 * MiB, "-"),              # left of (4194304,2)-(8589934592,2048)
    ("p5", 1, "AllGather", 8, 29 * MiB, "Ring/Simple"),
    ("p5", 1, "ReduceScatter", 4, 16777215, "-"),          # (8388608,2)-(4294967296,1024) at 4
    ("p5", 1, "ReduceScatter", 4, 16777216, "Ring/Simple"),
    # p5en, 8 a node (284-434)
    ("p5en", 8, "AllReduce", 32, 262144, "Tree/LL"),       # the edge x = 262144
    ("p5en", 8, "AllReduce", 32, 262145, "Tree/LL128"),
    ("p5en", 8, "AllReduce", 32, 34153618, "Tree/LL128"),  # (14680064,16)-(150994944,128) at 32
    ("p5en", 8, "AllReduce", 32, 34153619, "Ring/LL128"),
    ("p5en", 8, "AllReduce", 32, 536870912, "Ring/LL128"),  # the vertex (536870912, 32)
    ("p5en", 8, "AllReduce", 32, 536870913, "Ring/Simple"),
    ("p5en", 8, "AllGather", 32, 262144, "Ring/LL"),       # the vertex (262144, 32)
    ("p5en", 8, "AllGather", 32, 262145, "Ring/LL128"),
    ("p5en", 8, "ReduceScatter", 32, 536870912, "Ring/LL128"),  # (268435456,16)-(2147483648,128)
    ("p5en", 8, "ReduceScatter", 32, 536870913, "Ring/Simple"),
    # p5en, 1 a node (435-598)
    ("p5en", 1, "AllReduce", 8, 65536, "Tree/LL"),         # the edge x = 65536
    ("p5en", 1, "AllReduce", 8, 65537, "Tree/LL128"),
    ("p5en", 1, "AllReduce", 8, 524288, "Tree/LL128"),     # the vertex (524288, 8)
    ("p5en", 1, "AllReduce", 8, 524289, "Tree/Simple"),
    ("p5en", 1, "AllReduce", 8, 1887436, "Tree/Simple"),   # (262144,2)-(8388608,32) at 8
    ("p5en", 1, "AllReduce", 8, 1887437, "Ring/LL128"),
    ("p5en", 1, "AllGather", 4, 2097152, "PAT/Simple"),    # (1048576,2)-(16777216,32) at 4
    ("p5en", 1, "AllGather", 4, 2097153, "Ring/LL128"),
    # p6-b200, 8 a node (942-1024)
    ("p6", 8, "AllReduce", 32, 262144, "Tree/LL"),         # the edge x = 262144
    ("p6", 8, "AllReduce", 32, 262145, "Tree/LL128"),
    ("p6", 8, "AllReduce", 32, 67108864, "Tree/LL128"),    # the vertex (67108864, 32)
    ("p6", 8, "AllReduce", 32, 67108865, "Ring/LL128"),
    ("p6", 8, "AllReduce", 32, 562036736, "Ring/LL128"),   # the vertex (562036736, 32); 1 byte
    ("p6", 8, "AllReduce", 32, 562036737, "Ring/LL128"),   # past it the ray's crossing of the
    ("p6", 8, "AllReduce", 32, 562036738, "Ring/Simple"),  # edge lies within eps of its end:
    ("p6", 8, "AllGather", 32, 2729626, "Ring/LL"),        # not counted (intersect's 0)
    ("p6", 8, "AllGather", 32, 2729627, "Ring/LL128"),     # (1048576,16)-(106954752,1024) at 32
    ("p6", 8, "ReduceScatter", 32, 605044996, "Ring/LL128"),  # (268435456,16)-(21474836480,1024)
    ("p6", 8, "ReduceScatter", 32, 605044997, "Ring/Simple"),
    # p6-b200, 1 a node (1025-1166)
    ("p6", 1, "AllReduce", 8, 32768, "Tree/LL"),           # the edge x = 32768
    ("p6", 1, "AllReduce", 8, 32769, "Tree/LL128"),
    ("p6", 1, "AllReduce", 8, 524288, "Tree/LL128"),       # (131072,2)-(8388608,128) at 8
    ("p6", 1, "AllReduce", 8, 524289, "Ring/LL128"),
    ("p6", 1, "AllGather", 4, 65535, "PAT/Simple"),        # above (0,2)-(65536,4)
    ("p6", 1, "AllGather", 4, 65536, "Ring/LL"),           # Ring/LL's vertex (65536, 4)
    ("p6", 1, "AllGather", 4, 65537, "PAT/Simple"),        # PAT's edge (65536,4)-(1048576,4)
]


@pytest.mark.parametrize("platform,per_node,func,ranks,nbytes,pick", HAND)
def test_picks_read_off_the_tables(platform, per_node, func, ranks, nbytes, pick):
    got = ot.region_pick("1.16.3", INSTANCE[platform], func, nbytes, ranks, ranks // per_node,
                         ALL)
    assert _name(got) == pick
    if platform == "p5":  # p5e.48xlarge reads the same tables (nccl_ofi_tuner.cpp:100-101)
        assert _name(ot.region_pick("1.16.3", "p5e.48xlarge", func, nbytes, ranks,
                                    ranks // per_node, ALL)) == pick


def test_v2_skips_pat_and_nvlstree_without_nvls():
    # v1.16.3:1297-1303: on PAT's edge the v2 interface goes on to Ring/LL128's
    assert ot.region_pick("1.16.3", "p6-b200.48xlarge", "AllGather", 65537, 4, 4) \
        == ("Ring", "LL128")
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", 41842689, 8, 4, None,
                          False) is None


def test_releases_whose_tables_differ_are_refused():
    # p5en's table changed in 1.15.0 and 1.17.0, p6's came in 1.15.0 and changed in 1.16.0
    # and 1.17.0; p5/p5e's is the same from 1.13.0 to 1.18.0 (ofi_regions.SAME)
    for instance, release in (("p5en.48xlarge", "1.14.2"), ("p5en.48xlarge", "1.17.0"),
                              ("p6-b200.48xlarge", "1.15.0"), ("p6-b200.48xlarge", "1.17.3")):
        with pytest.raises(CostModelError, match="not 1.16.3's"):
            ot.region_pick(release, instance, "AllReduce", MiB, 32, 4)
    assert ot.region_pick("1.15.0", "p5en.48xlarge", "AllReduce", 262145, 32, 4) \
        == ("Tree", "LL128")
    assert ot.region_pick("1.18.0", "p5.48xlarge", "AllReduce", 2367489, 16, 16) \
        == ("Ring", "LL128")


def test_the_model_takes_the_channels_p6_sets():
    ar = CollectiveKind.ALL_REDUCE
    p6 = NcclModel.for_platform("aws-p6-b200", 4, "2.27.7")
    assert p6.choice(ar, 16 * MiB)[:2] == ("Tree", "LL128")
    assert ot.channels(p6, ar, "Tree", "LL128", 16 * MiB, 32) == 24
    assert ot.channels(p6, ar, "Tree", "LL128", 16 * MiB, 16) == 16  # NCCL's own cap
    assert ot.channels(p6, ar, "Tree", "LL128", 64 * MiB, 32) == 0  # past 32 MiB
    assert "channels of its tree/LL128" in p6.summary()
    chan = 7  # timing.features: what running on fewer channels adds to the bandwidth term
    assert p6.features(ar, 16 * MiB)[chan] > 0 and p6.features(ar, 32 * MiB)[chan] == 0
    # NCCL 2.21 runs the v2 interface, which sets no channels; p5 sets none
    assert ot.channels(NcclModel.for_platform("aws-p6-b200", 4, "2.21.5"), ar, "Tree",
                       "LL128", 16 * MiB, 32) == 0
    assert ot.channels(NcclModel.for_platform("aws-p5", 4, "2.27.7"), ar, "Tree",
                       "LL128", 16 * MiB, 32) == 0


def test_the_tables_hold_every_shape_of_the_source():
    # region_init_internal_p5_p5e: 8, 2, 1 a node; p5en and p6: 8 and 1 (v1.16.3:284, 435,
    # 615, 708, 818, 942, 1025)
    assert sorted(regions.TABLES) == [("p5", 1), ("p5", 2), ("p5", 8), ("p5en", 1),
                                      ("p5en", 8), ("p6", 1), ("p6", 8)]
    gather = {k for k, t in regions.TABLES.items() if "AllGather" in t}
    assert gather == {("p5", 1), ("p5en", 1), ("p5en", 8), ("p6", 1), ("p6", 8)}
    assert all(set(t) <= {"AllReduce", "AllGather", "ReduceScatter"}
               for t in regions.TABLES.values())
    assert all(len(vs) <= 20 for t in regions.TABLES.values() for rs in t.values()
               for _, _, vs in rs)  # TUNER_MAX_NUM_VERTICES (nccl_ofi_tuner_region.h:44)
