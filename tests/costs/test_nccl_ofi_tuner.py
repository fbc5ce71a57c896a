"""aws-ofi-nccl's region tuner (tracecli/costs/nccl/ofi_tuner.py) against its own source.

The geometry cases are aws-ofi-nccl's own unit test (``tests/unit/region_based_tuner.cpp`` at
v1.16.3: ``test_extend_region`` and ``test_is_inside_region``). The picks are read off the
region table ``region_init_internal_p5_p5e`` (``src/tuner/nccl_ofi_regions.cpp`` v1.16.3:615-706)
by hand: each row names the vertices that put the point where it is. The other tables, and
every table against the tuner's compiled code, are in ``test_nccl_ofi_regions.py``.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tracecli.cli import cli
from tracecli.costs.nccl import ofi_tuner as ot
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.request import TopologyRequest, topology_model
from tracecli.costs.nccl.algotime import candidates
from tracecli.costs.nccl.versions import ALGOS, PROTOS
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind

MAX_SIZE, MAX_RANKS = ot.MAX_SIZE, ot.MAX_RANKS
MiB = 1024 * 1024
AR = CollectiveKind.ALL_REDUCE


def test_extend_region_as_the_tuner_unit_test():
    top = (MAX_SIZE, MAX_RANKS)
    assert ot.extend((2, 8), (4, 8), top) == (MAX_SIZE, 8)
    assert ot.extend((8, 2), (8, 4), top) == (8, MAX_RANKS)
    slope = (72.0 - 64.0) / (8290304.0 - 8.0)
    assert ot.extend((8, 64), (8290304, 72), top) == (MAX_SIZE,
                                                      72.0 + slope * (MAX_SIZE - 8290304.0))
    slope = (1024.0 - 64.0) / (16.0 - 8.0)
    assert ot.extend((8, 64), (16, 1024), top) == ((MAX_RANKS - 1024.0) / slope + 16, MAX_RANKS)


def test_is_inside_region_as_the_tuner_unit_test():
    e = ot.extend((48.0 * MiB, 16), (288.0 * MiB, 128), (MAX_SIZE, MAX_RANKS))
    region = [e, (288.0 * MiB, 128), (48.0 * MiB, 16), (4.0 * MiB, 2), (MAX_SIZE, 2)]
    assert all(ot.inside(v, region) == 0 for v in region)
    walked = 0
    for i, a in enumerate(region):  # points on the edges, as the C test walks them (its loop
        b = region[(i + 1) % len(region)]  # runs only where x grows along the edge)
        if not a[0] < b[0]:
            continue
        slope = (b[1] - a[1]) / (b[0] - a[0])
        c = b[1] - slope * a[0]
        x = a[0]
        while x < b[0]:
            assert ot.inside((x, slope * x + c), region) == 0
            x, walked = x * 2, walked + 1
    assert walked == 15  # 4 MiB to 64 GiB along (4M, 2)-(MAX, 2)
    G = 1024 * MiB
    inside = [(16 * MiB, 4), (128 * MiB, 4), (G, 4), (4 * G, 4), (16 * G, 4), (32 * G, 4),
              (64 * MiB, 16), (G, 16), (4 * G, 16), (16 * G, 16), (32 * G, 16), (64 * G, 16),
              (512 * MiB, 128), (4 * G, 128), (16 * G, 128), (32 * G, 128), (64 * G, 128),
              (64 * G, 256), (MAX_SIZE - 1.0, 128), (e[0] - 1.0, e[1] - 1.0)]
    assert [p for p in inside if ot.inside(p, region) != 1] == []
    outside = [(8 * MiB, 4), (8 * MiB, 32), (8 * MiB, 128), (8 * MiB, 512), (8 * MiB, MAX_RANKS),
               (16 * MiB, 8), (16 * MiB, 32), (16 * MiB, 128), (16 * MiB, 512),
               (16 * MiB, MAX_RANKS), (32 * MiB, 16), (32 * MiB, 32), (32 * MiB, 64),
               (32 * MiB, 128), (32 * MiB, 256), (64 * MiB, 32), (64 * MiB, 64),
               (64 * MiB, 256), (64 * MiB, 1024), (256 * MiB, 256),
               (2 * MiB, 2), (200 * MiB, 128), (G, 1024), (G, 2048)]
    assert [p for p in outside if ot.inside(p, region) != -1] == []


# (ranks, bytes, pick) read off region_init_internal_p5_p5e (v1.16.3:615-706), 8 ranks a node
P5 = [
    # Tree/LL128 from x = 0 up to its lower edge (31457280,16)-(37748736,32)-(117440512,64)-...
    (32, 8, ("Tree", "LL128")),
    (32, 1 * MiB, ("Tree", "LL128")),
    (32, 37748736, ("Tree", "LL128")),          # the vertex (37748736, 32): on the edge
    (32, 37748737, ("Ring", "LL128")),          # past it: Ring/LL128's polygon
    (32, 1073741824, ("Ring", "LL128")),        # below (2147483648, 64)-(1073741824, 17) edge
    (32, 2 * 1024 * MiB, ("Ring", "Simple")),   # right of Ring/LL128: Ring/Simple's polygon
    (64, 117440512, ("Tree", "LL128")),         # the vertex (117440512, 64)
    (64, 117440513, ("Ring", "LL128")),
    (128, 301989888, ("Tree", "LL128")),        # the vertex (301989888, 128)
    (128, 301989889, ("Ring", "LL128")),
    (128, 4 * 1024 * MiB, ("NVLSTree", "Simple")),  # (2147483648,128)-(6442450944,128) edge
    (128, 8 * 1024 * MiB, ("Ring", "Simple")),  # right of (6442450944,128)-(8053063680,160)
    (256, 1024 * MiB, ("NVLSTree", "Simple")),  # between (1074790400,256) and (2684354560,256)
    (256, 301989888, ("Tree", "LL128")),        # the vertex (301989888, 256)
]


@pytest.mark.parametrize("ranks,nbytes,pick", P5)
def test_p5_picks_read_off_the_region_table(ranks, nbytes, pick):
    for release in ("1.14.0", "1.16.3", "1.18.0"):  # the same table and geometry to 1.18
        assert ot.region_pick(release, "p5.48xlarge", "AllReduce", nbytes, ranks,
                              ranks // 8) == pick
    assert ot.region_pick("1.16.3", "p5e.48xlarge", "AllReduce", nbytes, ranks,
                          ranks // 8) == pick


def test_releases_from_1_19_test_in_log2_space_and_are_refused():
    # transform_log2 (nccl_ofi_regions.cpp v1.21.1:205,242,258): a geometry not ported
    for release in ("1.19.0", "1.21.1"):
        with pytest.raises(CostModelError, match="log2"):
            ot.region_pick(release, "p5.48xlarge", "AllReduce", MiB, 32, 4)


def test_two_nodes_are_left_to_nccl_from_1_14_but_not_in_1_13():
    # v1.14.0+ return before the regions on <= 2 nodes (nccl_ofi_regions.cpp v1.16.3:1352-1357);
    # v1.13.x has no such test (nccl_ofi_regions.c v1.13.2-aws:975-1033)
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 * MiB, 16, 2) is None
    assert ot.region_pick("1.13.2-aws", "p5.48xlarge", "AllReduce", 31457280, 16, 2) \
        == ("Tree", "LL128")  # the vertex (31457280, 16)
    assert ot.region_pick("1.13.2-aws", "p5.48xlarge", "AllReduce", 31457281, 16, 2) \
        == ("NVLSTree", "Simple")  # the segment (31457281,16)-(MAX,16)
    assert ot.region_pick("1.13.2-aws", "p5.48xlarge", "AllReduce", 31457281, 16, 2,
                          nvls=False) is None  # the v2 interface skips NVLSTree: none left


def test_what_the_tuner_does_not_cover():
    # p4d: not among the instance types nccl_ofi_tuner.c names (v1.13.2-aws:84-90)
    assert ot.region_pick("1.13.2-aws", "p4d.24xlarge", "AllReduce", MiB, 16, 2) is None
    # p5/p5e at 8 a node: all-reduce only; 4 a node: no table; broadcast: none anywhere
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllGather", MiB, 32, 4) is None
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", MiB, 16, 4) is None  # 4 a node
    assert ot.region_pick("1.16.3", "p6-b200.48xlarge", "Broadcast", MiB, 32, 4) is None
    assert ot.region_pick("1.16.3", "p5en.48xlarge", "AllReduce", MiB, 8, 4) is None  # 2 a node
    # 2 and 1 ranks a node have tables of their own (v1.16.3:708, 818), ported
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", MiB, 8, 4) == ("Tree", "LL128")
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", MiB, 4, 4) == ("Ring", "LL128")
    # v3: a pair NCCL's table ignores is skipped, the next region that holds the point wins
    enabled = {("Ring", "LL128"), ("Ring", "Simple"), ("Tree", "LL")}
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", MiB, 32, 4, enabled) is None
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 * MiB, 32, 4, enabled) \
        == ("Ring", "LL128")


def test_who_runs_the_tuner():
    on = ot.active("aws-p5", "2.27.7", 4, {})
    assert on == "p5.48xlarge"
    assert ot.active("dgx-h100", "2.27.7", 4, {}) is None
    # 2.19-2.20 open only NCCL_TUNER_PLUGIN's library, which 1.16's net plugin sets, where it
    # is unset, to its own (configure_tuner, platform-aws.cpp v1.16.3:475-531): loaded
    assert ot.active("aws-p5", "2.20.5", 4, {}) == on
    assert ot.active("aws-p5", "2.20.5", 4, {"NCCL_TUNER_PLUGIN": "none"}) is None
    assert ot.active("aws-p5", "2.20.5", 4, {"NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so"}) == on
    assert ot.active("aws-p5", "2.20.5", 4, {"NCCL_TUNER_PLUGIN": "/opt/lib/libnccl-net.so"}) \
        == on
    # 2.19-2.20 dlopen the name as given (misc/tuner.cc v2.20.5-1:29-32): "ofi" opens nothing
    assert ot.active("aws-p5", "2.20.5", 4, {"NCCL_TUNER_PLUGIN": "ofi"}) is None
    assert ot.active("aws-p5", "2.21.5", 4, {"NCCL_TUNER_PLUGIN": "ofi"}) == on
    # 2.21+: an empty name is unset (strlen, v2.21.5-1:61); 2.19-2.20: opens no tuner
    assert ot.active("aws-p5", "2.27.7", 4, {"NCCL_TUNER_PLUGIN": ""}) == on
    assert ot.active("aws-p5", "2.20.5", 4, {"NCCL_TUNER_PLUGIN": ""}) is None
    assert ot.active("aws-p5", "2.18.6", 4, {"NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so"}) \
        is None
    # "none": no tuner from 2.28 (tuner.cc v2.28.9-1:56-59); before, a name that opens nothing
    assert ot.active("aws-p5", "2.28.9", 4, {"NCCL_TUNER_PLUGIN": "none"}) is None
    assert ot.active("aws-p5", "2.27.7", 4, {"NCCL_TUNER_PLUGIN": "none"}) == on
    assert ot.active("aws-p5", "2.27.7", 4, {"OFI_NCCL_TUNER_TYPE": "internal"}) is None
    # any other value but Model runs the Region tuner (nccl_ofi_tuner.cpp v1.16.3:72-80)
    ot.check_env({"OFI_NCCL_TUNER_TYPE": "Region2"})
    assert ot.active("aws-p5", "2.27.7", 4, {"OFI_NCCL_TUNER_TYPE": "Region2"}) == on
    assert ot.active("aws-p5", "2.27.7", 4, {"OFI_NCCL_FORCE_NUM_RAILS": "16"}) is None
    # only 1.16.x's loading is modelled: a library of its own before 1.16.0 (Makefile.am
    # v1.13.2-aws:96-100), no ncclTunerPlugin_v1 from 1.20.0
    for release in ("1.14.2", "1.20.0"):
        with pytest.raises(CostModelError, match="1.16.x only"):
            ot.active("aws-p5", "2.27.7", 4, {}, release=release)
    assert ot.active("aws-p5", "2.27.7", 4, {}, release="1.16.0") == on
    # p4d, p4de: no region table (nccl_ofi_tuner.cpp v1.16.3:100-115): no tuner, json null
    assert ot.active("aws-p4d", "2.27.7", 4, {}) is None
    assert ot.active("aws-p4de", "2.27.7", 4, {}) is None
    p4d = NcclModel.for_platform("aws-p4d", 4, "2.27.7")
    assert p4d.describe()["tuner"] is None and "tuner" not in p4d.summary()
    # 2.19-2.20 + aws-ofi-nccl's library named + NCCL_ALGO/NCCL_PROTO: its v1 init returns
    # ncclInvalidArgument (v1.16.3:269-276), NCCL fails the communicator (init.cc v2.20.5-1:1505)
    algo = {"NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so", "NCCL_PROTO": "Simple"}
    with pytest.raises(CostModelError, match="fails communicator init"):
        ot.check_env(algo, "2.20.5")
    ot.check_env(algo, "2.21.5")  # the v2 interface's init takes no such test
    ot.check_env({**algo, "NCCL_TUNER_PLUGIN": "ofi"}, "2.20.5")  # opens nothing
    # unset on an AWS preset: the net plugin names its own library, whose v1 init refuses
    unset = {"NCCL_ALGO": "Ring"}
    with pytest.raises(CostModelError, match=r"\(libnccl-net.so\).*fails communicator init"):
        ot.check_env(unset, "2.20.5", "aws-p4d")
    ot.check_env(unset, "2.20.5", "dgx-h100")  # no aws-ofi-nccl: no tuner
    ot.check_env({**unset, "NCCL_TUNER_PLUGIN": "none"}, "2.20.5", "aws-p5")
    # OFI_NCCL_TUNER_TYPE=Model: p6-b200 has no Model tuner (is_model_supported,
    # nccl_ofi_model.cpp v1.16.3:130-137), so its Region tuner runs (nccl_ofi_tuner.cpp:138)
    ot.check_env({"OFI_NCCL_TUNER_TYPE": "Model"}, "2.27.7", "aws-p6-b200")
    assert ot.active("aws-p6-b200", "2.27.7", 4, {"OFI_NCCL_TUNER_TYPE": "Model"}) \
        == "p6-b200.48xlarge"
    with pytest.raises(CostModelError, match="Model tuner"):
        ot.check_env({"OFI_NCCL_TUNER_TYPE": "model"}, "2.27.7", "aws-p5en")
    with pytest.raises(CostModelError, match="Model tuner"):
        ot.check_env({"OFI_NCCL_TUNER_TYPE": "Model"})
    with pytest.raises(CostModelError, match="not modelled"):
        ot.check_env({"NCCL_TUNER_PLUGIN": "libnccl-tuner-example.so"})


def test_the_model_takes_the_tuners_pick_on_aws_p5():
    own = NcclModel.for_topology("h100", 4, 8, True, 3200.0, 32, "2.27.7", "efa")
    p5 = NcclModel.for_platform("aws-p5", 4, "2.27.7")
    for n in (8, MiB, 64 * MiB, 1 << 30):
        want = ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", n, 32, 4)
        assert p5.choice(AR, n)[:2] == want
    # where NCCL's own model differs (64 MiB at 32 ranks: NCCL's NVLSTree is not the tuner's)
    assert any(own.choice(AR, n)[:2] != p5.choice(AR, n)[:2] for n in (8, 64 * MiB, 1 << 30))
    off = NcclModel.for_platform("aws-p5", 4, "2.27.7").on(32)
    from tracecli.costs.nccl.forced import restrict
    internal = restrict(off, {"OFI_NCCL_TUNER_TYPE": "Internal"})
    assert [internal.choice(AR, n)[:2] for n in (8, 64 * MiB)] == \
        [own.choice(AR, n)[:2] for n in (8, 64 * MiB)]
    assert p5.describe()["tuner"]["tunes"] is True and internal.describe()["tuner"] is None
    two = NcclModel.for_platform("aws-p5", 2, "2.27.7")
    assert two.describe()["tuner"]["tunes"] is False
    assert "leaves 2 nodes to NCCL's own pick" in two.summary()


def test_every_shape_with_a_table_takes_the_tuners_pick():
    # p5/p5e at 2 and 1 a node (region_init_internal_p5_p5e, v1.16.3:708, 818), p5en and
    # p6-b200 at 8 and 1 (v1.16.3:284, 435, 942, 1025): the tuner tunes, tracecli models it
    cases = [("aws-p5", 2, "p5.48xlarge"), ("aws-p5e", 1, "p5e.48xlarge"),
             ("aws-p5en", 8, "p5en.48xlarge"), ("aws-p5en", 1, "p5en.48xlarge"),
             ("aws-p6-b200", 8, "p6-b200.48xlarge"), ("aws-p6-b200", 1, "p6-b200.48xlarge")]
    run = CliRunner().invoke
    for platform, per_node, instance in cases:
        args = ["collective", "allreduce", "--platform", platform, "--nodes", "4",
                "--gpus-per-node", str(per_node), "--nccl", "2.27.7", "--sizes", "1M,64M"]
        got = run(cli, args + ["--json"])
        assert got.exit_code == 0, got.output
        assert f'"instance": "{instance}", "modelled": true, "tunes": true' in got.output
        text = run(cli, args, env={"COLUMNS": "1000"}).output
        assert f"picks by aws-ofi-nccl 1.16.3's region tuner for {instance}" in text
        model = topology_model(TopologyRequest(nodes=4, gpus_per_node=per_node, nccl="2.27.7",
                                               platform=platform))[0]
        for n in (8, MiB, 64 * MiB):
            want = ot.region_pick("1.16.3", instance, "AllReduce", n, 4 * per_node, 4,
                                  _enabled(model))
            assert want is None or model.choice(AR, n)[:2] == want
        assert any(ot.region_pick("1.16.3", instance, "AllReduce", n, 4 * per_node, 4,
                                  _enabled(model)) for n in (8, MiB))
    # p5 at 2 a node, 64 MiB on 8 ranks: NVLSTree/Simple's region (v1.16.3:763-771), which
    # NCCL's table disables (no NVLS at 2 GPUs a node): the v3 interface skips it, no other
    # region holds the point, NCCL's own pick
    p5 = topology_model(TopologyRequest(nodes=4, gpus_per_node=2, nccl="2.27.7",
                                        platform="aws-p5"))[0]
    assert ot.region_pick("1.16.3", "p5.48xlarge", "AllReduce", 64 * MiB, 8, 4) \
        == ("NVLSTree", "Simple")
    assert ("NVLSTree", "Simple") not in _enabled(p5)
    assert p5.choice(AR, 64 * MiB)[:2] == ("Ring", "LL128")
    # all-gather and reduce-scatter on p5en at 8 a node: the tuner's Ring/LL up to 262144 at 32
    p5en = NcclModel.for_platform("aws-p5en", 4, "2.27.7")
    ag, rs = CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER
    assert p5en.pick(ag, 262144)[:2] == ("Ring", "LL") and p5en.pick(rs, 262145)[:2] == \
        ("Ring", "LL128")
    # 4 ranks a node: no table, the tuner leaves NCCL's own pick, which tracecli shows
    four = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                     "--gpus-per-node", "4", "--nccl", "2.27.7", "--sizes", "1M", "--json"])
    assert '"modelled": true, "tunes": false' in four.output


def _enabled(model) -> set:
    return {(ALGOS[a], PROTOS[p]) for a, p in candidates(model._table(), "AllReduce")}


def test_cli_switches_and_bad_values():
    run = CliRunner().invoke
    ok = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4", "--json"])
    assert ok.exit_code == 0, ok.output
    assert '"tuner"' in ok.output and "p5.48xlarge" in ok.output
    bad = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                    "--nccl-env", "OFI_NCCL_TUNER_TYPE=Model"])
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1 and "Model tuner" in bad.output
    for var in ("NCCL_PROTO=Simple", "NCCL_ALGO=Ring"):
        bad = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                        "--nccl", "2.20.5", "--nccl-env", "NCCL_TUNER_PLUGIN=libnccl-net.so",
                        "--nccl-env", var])
        assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
        assert "fails communicator init" in bad.output
    # NCCL 2.20 on an AWS preset loads the tuner unasked (the net plugin names itself as
    # NCCL_TUNER_PLUGIN, platform-aws.cpp v1.16.3:475-531): NCCL_ALGO fails the communicator
    bad = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                    "--nccl", "2.20.5", "--nccl-env", "NCCL_ALGO=Ring"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
    assert "(libnccl-net.so)" in bad.output and "NCCL_TUNER_PLUGIN=none" in bad.output
    ok = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                   "--nccl", "2.20.5", "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env",
                   "NCCL_TUNER_PLUGIN=none", "--sizes", "1M"])
    assert ok.exit_code == 0, ok.output
    # tuner settings are listed apart from what restricts NCCL's choice
    ok = run(cli, ["collective", "allreduce", "--platform", "aws-p5", "--nodes", "4",
                   "--nccl", "2.27.7", "--nccl-env", "NCCL_TUNER_PLUGIN=none", "--sizes", "1M"],
             env={"COLUMNS": "1000"})
    assert "tuner settings NCCL_TUNER_PLUGIN=none" in ok.output
    assert "restricted by" not in ok.output
    assert "aws-ofi-nccl's tuner makes NCCL take" in ok.output  # the footer: whose pick


def test_the_double_fast_path_gives_the_exact_answer(monkeypatch):
    from tracecli.costs.nccl.ofi_regions import TABLES
    cases = []  # each table's vertices, a byte either side, and a grid, against its regions
    for (_, per_node), table in sorted(TABLES.items()):
        for func, regions in sorted(table.items()):
            points = {(float(x), float(y)) for _, _, vs in regions for x, y in vs
                      if x < MAX_SIZE and y < MAX_RANKS}
            points |= {(x + dx, y) for x, y in points for dx in (-1.0, 1.0)}
            points |= {(float(1 << k), float(per_node * n)) for k in range(3, 37, 3)
                       for n in (3, 4, 32)}
            cases += [(p, vs) for p in sorted(points) for _, _, vs in regions]
    fast = [ot.inside(p, vs) for p, vs in cases]
    real = ot._intersect
    monkeypatch.setattr(ot, "_intersect", lambda *a: real(*a[:5], True))
    assert [ot.inside(p, vs) for p, vs in cases] == fast
