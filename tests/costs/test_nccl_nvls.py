"""When NCCL enables NVLS and the NVLS graph its search finds (tracecli/costs/nccl/nvls.py cites
NVIDIA/nccl v2.30.7-1 by file:line), checked against what real NCCL runs printed."""

from dataclasses import replace
from pathlib import Path

import pytest

from tracecli.costs.nccl.graph import GPUS
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.nccllog import read_nccl_log
from tracecli.costs.nccl.nvls import nvls_support, search_nvls
from tracecli.costs.nccl.algotime import best
from tracecli.costs.nccl.tuning import ALGOS, PROTOS, tune
from tracecli.costs.nccl.versions import constants_for
from tracecli.model import CollectiveKind as K

from test_nccl_tuning import H100_3X8

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def test_nvls_decision():
    # search.cc:1124: no NVLS graph below sm90 or without an NVSwitch -> nvlsSupport 0 (init.cc:1453)
    assert not nvls_support(GPUS["a100"], 8, True, "2.30.7")[0]
    assert not nvls_support(GPUS["v100"], 8, True, "2.30.7")[0]
    assert not nvls_support(GPUS["h100"], 8, False, "2.30.7")[0]          # PCIe node
    for gpu in ("h100", "h200", "b200"):
        assert nvls_support(GPUS[gpu], 8, True, "2.30.7")[0]
    # nvls.cc:262 gpuCount < 2 (2.28.7+); v2.28.3-1 nvls.cc:160 and earlier gpuCount <= 2
    assert not nvls_support(GPUS["h100"], 1, True, "2.30.7")[0]
    assert nvls_support(GPUS["h100"], 2, True, "2.30.7")[0]
    assert not nvls_support(GPUS["h100"], 2, True, "2.28.3")[0]
    assert not nvls_support(GPUS["h100"], 2, True, "2.22.3")[0]
    assert nvls_support(GPUS["h100"], 3, True, "2.22.3")[0]


def test_the_model_runs_nvls_only_where_nccl_would():
    one = NcclModel.for_topology("h100", 1, 8, True, 0, 0, version="2.30.7")
    assert one.choice(K.ALL_REDUCE, 1 << 30)[:2] == ("NVLS", "Simple")
    for m in (NcclModel.for_topology("a100", 1, 8, True, 0, 0, version="2.30.7"),
              NcclModel.for_topology("h100", 1, 8, False, 0, 0, version="2.30.7"),
              NcclModel.for_topology("h100", 16, 1, True, 3200, 8, version="2.30.7")):
        assert m.nvls is None
        assert all(m.choice(K.ALL_REDUCE, 1 << k)[0] not in ("NVLS", "NVLSTree") for k in range(3, 35))
    # several nodes: plain NVLS needs CollNet (tuning.cc:503-505), so NVLS_TREE
    two = NcclModel.for_platform("dgx-h100", 2, version="2.30.7")
    assert two.choice(K.ALL_REDUCE, 8 << 30)[0] == "NVLSTree"


def test_one_node_graph_is_what_nccl_printed():
    # NVIDIA/nccl#1197 (8 H100 on NVSwitch, one node, NCCL 2.19.4) prints for the NVLS graph
    # "Pattern 5, crossNic 0, nChannels 8, bw 40.000000/60.000000"; its NVLink is 18 x 20.0 GB/s
    # (2.19's SM90 figure), 2.30's 18 x 20.6 gives the same speeds.
    for lane in (20.0, 20.6):
        g = search_nvls(replace(GPUS["h100"], nvlink_lane_gbps=lane), 8, 1, True, 0, 0, "2.30.7")
        assert (g.n_channels, g.bw_intra, g.bw_inter) == (8, 40.0, 60.0)


def test_nccl1453_choices_still_match_with_nvls_on():
    # The #1453 run (3 x 8 H100, 8 x 200 Gb/s a node, 2.22.3) logged "NVLS multicast support is
    # available on dev 0" and NVLS heads: NVLS_TREE took part in the argmin and lost at every
    # size. With the estimated NVLS graph and NVLS on, the nine choices and times are unchanged.
    nv = search_nvls(GPUS["h100"], 8, 3, True, 1600, 8, "2.22.3")
    assert (nv.n_channels, nv.bw_intra, nv.bw_inter) == (8, 24.0, 24.0)
    comm = replace(H100_3X8, nvls=nv, nvls_support=True)
    table = tune(comm, constants_for("2.22.3"))
    log = read_nccl_log(str(FIX / "nccl1453_h100_3x8_2.22.3_choices.log"))
    for nbytes, algo, proto, printed in log.choices_of("AllReduce"):
        us, a, p = best(table, "AllReduce", nbytes)
        assert (ALGOS[a].upper(), PROTOS[p].upper()) == (algo, proto), nbytes
        assert "%f" % us == "%f" % printed, nbytes


@pytest.mark.parametrize("nic_gbps,nics,want", [(3200, 8, (8, 40.0, 48.0)), (1600, 8, (8, 24.0, 24.0)),
                                                (1600, 4, (4, 48.0, 48.0))])
def test_multi_node_graph_follows_the_nics(nic_gbps, nics, want):
    g = search_nvls(GPUS["h100"], 8, 2, True, nic_gbps, nics, "2.30.7")
    assert (g.n_channels, g.bw_intra, g.bw_inter) == want


def test_tree_graph_is_the_ring_on_one_node_and_wider_inside_on_several():
    from tracecli.costs.nccl.graph import search_graphs
    ring, tree = search_graphs(GPUS["h100"], 8, 1, True, 0, 0)
    assert ring == tree and (ring.n_channels, ring.bw_intra) == (12, 30.0)   # NVIDIA/nccl#1197
    ring, tree = search_graphs(GPUS["h100"], 8, 2, True, 1600, 8)
    assert (ring.n_channels, ring.bw_intra, ring.bw_inter) == (8, 24.0, 24.0)
    # search.cc:1278-1281: bwIntra rises while below 2 x 24 and 8 channels fit in 370.8 GB/s
    assert (tree.n_channels, tree.bw_intra, tree.bw_inter) == (8, 45.0, 24.0)
    m = NcclModel.for_topology("h100", 2, 8, True, 1600, 8, version="2.30.7")
    assert m.tree_pattern_tree and not NcclModel.for_topology("h100", 1, 8, True, 0, 0).tree_pattern_tree


def test_an_nvlink_mesh_has_the_switch_s_channels_and_no_nvls():
    """Four GPUs linked to each other without an NVSwitch (a 4-GPU board, CSCS Alps' GH200):
    the channels share a GPU's lanes as on a switch, NVLink for NCCL's latencies and LL128
    (typeIntra NVL <= NVB, tuning.cc), but no NVLS: it needs the switch (search.cc:1124)."""
    mesh = NcclModel.for_topology("h100", 1, 4, False, 0, 0, version="2.30.7", mesh=True)
    switch = NcclModel.for_topology("h100", 1, 4, True, 0, 0, version="2.30.7")
    pcie = NcclModel.for_topology("h100", 1, 4, False, 0, 0, version="2.30.7")
    assert mesh.nvls is None and switch.nvls is not None
    assert (mesh.ring.n_channels, mesh.ring.bw_intra) == (switch.ring.n_channels, switch.ring.bw_intra)
    assert mesh.ring.nvlink and mesh.ring.ll128 and not pcie.ring.nvlink
    assert mesh.intra == "nvlink" and mesh.ring.n_channels * mesh.ring.bw_intra > 4 * pcie.ring.n_channels * pcie.ring.bw_intra
    assert all(mesh.choice(K.ALL_REDUCE, 1 << k)[0] not in ("NVLS", "NVLSTree") for k in range(3, 35))
    alps = NcclModel.for_platform("cscs-alps-gh200", 4, version="2.30.7")
    assert (alps.topology.gpus_per_node, alps.intra, alps.net, alps.nvls) == (4, "nvlink", "ofi", None)


def test_an_nvlink_mesh_of_more_than_four_gpus_is_refused():
    from tracecli.errors import CostModelError
    with pytest.raises(CostModelError, match="4 GPUs at most"):
        NcclModel.for_topology("h100", 1, 8, False, 0, 0, version="2.30.7", mesh=True)


def test_an_nvlink_mesh_stays_one_on_more_nodes():
    """``on`` (plans at other scales) rebuilds the graphs for the node count: a mesh stays a
    mesh, never an NVSwitch with NVLS."""
    two = NcclModel.for_topology("h100", 2, 4, False, 800, 4, version="2.30.7", mesh=True)
    four = two.on(16)
    assert (four.topology.nodes, four.intra, four.nvls) == (4, "nvlink", None)
    alps = NcclModel.for_platform("cscs-alps-gh200", 2, version="2.30.7").on(32)
    assert (alps.topology.nodes, alps.intra, alps.nvls) == (8, "nvlink", None)


def test_fewer_gpus_of_a_mesh_board_use_fewer_links():
    """2 or 3 GPUs of a 4-GPU NVLink board have one or two of its links (a third of a GPU's
    lanes each), not all of its lanes as on an NVSwitch."""
    total = {g: (lambda r: r.n_channels * r.bw_intra)(
        NcclModel.for_topology("h100", 1, g, False, 0, 0, version="2.30.7", mesh=True).ring)
        for g in (2, 3, 4)}
    lane = 18 * 20.6 / 3
    assert total[2] <= lane and lane < total[3] <= 2 * lane and 2 * lane < total[4]
    alps = NcclModel.for_platform("cscs-alps-gh200", 1, version="2.30.7").on(2)
    assert alps.ring.n_channels * alps.ring.bw_intra == total[2]


def test_on_keeps_what_the_user_changed_of_a_platform():
    """Plans at other scales (FSDP groups, replays) rebuild the graphs: a platform whose fabric
    or network the user changed keeps the change, not the platform's defaults."""
    from tracecli.costs.nccl.request import TopologyRequest, topology_model
    pcie = topology_model(TopologyRequest(platform="dgx-h100", nodes=2, intra="pcie", nccl="2.30.7"))[0]
    assert (pcie.on(32).intra, pcie.on(32).ring.nvlink) == ("pcie", False)
    wide = topology_model(TopologyRequest(platform="cscs-alps-gh200", nodes=2, nic_gbps=1600, nccl="2.30.7"))[0]
    assert (wide.on(16).nic_gbps, wide.on(16).intra) == (1600, "nvlink")
    switch = topology_model(TopologyRequest(platform="cscs-alps-gh200", nodes=2, intra="nvswitch", nccl="2.30.7"))[0]
    assert switch.on(16).intra == "nvswitch"
    plain = topology_model(TopologyRequest(platform="dgx-h100", nodes=2, nccl="2.30.7"))[0]
    assert plain.on(64).ring == NcclModel.for_platform("dgx-h100", 8, version="2.30.7").ring
