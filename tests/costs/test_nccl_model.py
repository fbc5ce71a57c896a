"""NcclModel as a CostModel, and how far NCCL's model lands from a real nccl-tests run."""

from pathlib import Path

import pytest

from tracecli.costs.model import CostModel
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.nccl_tests import read_nccl_tests
from tracecli.costs.nccl.algotime import best
from tracecli.costs.nccl.tuning import tune
from tracecli.costs.nccl.versions import constants_for
from tracecli.errors import CostModelError
from tracecli.model import CollectiveKind as K

from test_nccl_tuning import RTX

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def test_protocol_and_choices():
    m = NcclModel.for_platform("dgx-h100", 8, version="2.30.7")
    assert isinstance(m, CostModel) and m.gpus == 64
    assert m.choice(K.ALL_REDUCE, 1024)[:2] == ("Tree", "LL")
    assert m.choice(K.ALL_REDUCE, 1 << 30)[:2] == ("NVLSTree", "Simple")  # NVLS on: sm90 NVSwitch
    line = m.linear(K.ALL_REDUCE)
    for n in (1 << 20, 256 << 20):  # the secant is exact at both ends
        assert line.at(n) == pytest.approx(m.time_ms(K.ALL_REDUCE, n))
    assert m.on(16).topology.nodes == 2 and m.on(4).topology.nodes == 1
    doc = m.describe()
    assert doc["constants"] == "v2.30.3-1" and doc["algorithm"]["allreduce"][0][1:] == ["Tree", "LL"]
    # all-gather charges the gathered buffer: 64 shares
    assert m.charged_bytes(K.ALL_GATHER, 1000) == 64_000


def test_impossible_topologies():
    with pytest.raises(CostModelError, match="need a network"):
        NcclModel.for_topology("h100", 2, 8, True, nic_gbps=0, nics=0)
    with pytest.raises(CostModelError, match="do not fill nodes"):
        NcclModel.for_platform("dgx-h100", 2).on(10)
    with pytest.raises(CostModelError, match="not modelled"):
        NcclModel.for_topology("h100", 1, 8, True, 0, 0, version="2.17.1")  # 2.18+ modelled (issue 23)


# Prediction / measurement per size, broadcast_perf on the 2 x 1 RTX 5090 Socket run
# (fixtures/nccl/README.md), with the graph of that run's own TUNING log. Small sizes: NCCL's
# model has no launch floor and this run is noisy (oversubscribed MPI, one GPU shared), so the
# model is 4-14x below; large sizes: the model's 2.4 GB/s Socket bus vs the measured 3.77.
MEASURED_RATIO = {1024: 0.071, 4096: 0.215, 65536: 0.680, 1048576: 1.015, 16777216: 1.504,
                  134217728: 1.573}


def test_prediction_against_nccl_tests_figures():
    run = read_nccl_tests(str(FIX / "ebpf_rtx5090_2x1_broadcast_perf.txt"), "broadcast")
    table = tune(RTX, constants_for("2.29.7"))
    for row in run.rows:
        us, a, p = best(table, "Broadcast", row.bytes)
        assert (a, p) == ((1, 0) if row.bytes <= 16384 else (1, 2))  # Ring LL -> Ring Simple at 32 KiB
        if row.bytes in MEASURED_RATIO:
            assert us / row.time_us == pytest.approx(MEASURED_RATIO[row.bytes], abs=0.001)


def test_cached_per_size_and_cheap():
    m = NcclModel.for_platform("dgx-h100", 128)
    first = m.time_ms(K.ALL_REDUCE, 25 << 20)
    assert m.time_ms(K.ALL_REDUCE, 25 << 20) == first and (K.ALL_REDUCE, 25 << 20) in m._cache


def test_a_model_on_another_node_count_is_that_topology_s_model():
    """The graphs NCCL's search picks depend on the nodes (NVLS on one node, NVLS_TREE over
    the network): ``on()`` estimates them again, and says the NVLS graph in its JSON."""
    eight = NcclModel.for_platform("dgx-h100", 8, "2.30.7")
    one = NcclModel.for_platform("dgx-h100", 1, "2.30.7")
    for n in (8, 1 << 20, 1 << 30):
        assert eight.on(8).choice(K.ALL_REDUCE, n) == one.choice(K.ALL_REDUCE, n)
        assert one.on(64).choice(K.ALL_REDUCE, n) == eight.choice(K.ALL_REDUCE, n)
    assert one.describe()["graph"]["nvls"] is not None
    assert NcclModel.for_platform("dgx-a100", 1, "2.30.7").describe()["graph"]["nvls"] is None
