"""NCCL's printed TUNING table, reproduced cell for cell from the graph values (fixtures/nccl/README.md)."""

from pathlib import Path

import pytest

from tracecli.costs.nccl.nccllog import read_nccl_log
from tracecli.costs.nccl.tuning import ALGOS, FUNCS, PROTOS, AlgoGraph, Comm, best, tune
from tracecli.costs.nccl.versions import constants_for

FIX = Path(__file__).parent / "fixtures" / "nccl"

# eunomia-bpf/nccl-eBPF docs/tmp/default-suboptimal-search.md: 2 ranks on 2 NCCL "hosts"
# (NCCL_HOSTID), one RTX 5090 (sm120), NET=Socket, P2P/SHM off. The log is TUNING only: the ring
# and tree graphs' nChannels x bw (2.4 and 4.8 GB/s) are solved from its Ring/Simple and
# PAT/Simple cells; every other cell is then a check.
RTX = Comm(2, 2, 120, ring=AlgoGraph(2, 1.2, 1.2, nvlink=False, ll128=False),
           tree=AlgoGraph(4, 1.2, 1.2, nvlink=False, ll128=False), tree_pattern_tree=True)


def test_every_cell_of_the_2_29_7_table_matches_to_its_printed_precision():
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    assert log.version.startswith("2.29.7") and len(log.table) == 105
    table = tune(RTX, constants_for(log.version))
    wrong = []
    for (f, a, p), (lat, bw, line) in log.table.items():
        i, j, k = FUNCS.index(f), ALGOS.index(a), PROTOS.index(p)
        ours = "%8.1f/%6.1f" % (table.lat[i][j][k], table.bw[i][j][k])
        if ours != "%8.1f/%6.1f" % (lat, bw):
            wrong.append((line, f, a, p, ours))
    assert wrong == []


def test_the_choices_nccl_logged_are_the_argmin():
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    table = tune(RTX, constants_for(log.version))
    choices = log.choices_of("Broadcast")
    assert choices
    for nbytes, algo, proto, _ in choices:
        _, a, p = best(table, "Broadcast", nbytes)
        assert (ALGOS[a].upper(), PROTOS[p].upper()) == (algo, proto)


def test_a_log_of_another_collective_is_refused():
    from tracecli.errors import CalibrationError
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    with pytest.raises(CalibrationError, match="for Broadcast, not AllReduce") as e:
        log.choices_of("AllReduce")
    assert e.value.line == 29


def test_versions_outside_the_modelled_range_are_refused():
    with pytest.raises(ValueError, match="2.23 to 2.30"):
        constants_for("2.21.5")
    assert constants_for("2.28.9").hw[2][5] == (0, 0, 20.9)
    assert constants_for("2.28.3").hw[2][5] == (0, 0, 14)
