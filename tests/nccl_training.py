"""The training set of tracecli's NCCL time model (tracecli/costs/nccl/timing.py): public nccl-tests tables, each with its topology as its
source states it (sources: tests/fixtures/nccl/README.md).

Each :class:`TrainingTable` names its fixture, its collective, its transport and how to build
NCCL's model of its topology from the stated hardware alone (nodes, GPUs, GPU, NICs, NCCL
version, or the graph solved from the run's own log): exactly what a user would pass. None of
the sources reserved for the independent check is here.

>>> [t.name for t in TABLES][:2]
['gcp-a3mega-2x8-h100-tcpxo', 'b300-1x8-nvls']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.tuning import AlgoGraph
from tracecli.costs.topology import Topology
from tracecli.model import CollectiveKind

__all__ = ["TrainingTable", "TABLES", "FIXTURES", "b300_rows"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nccl"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class TrainingTable:
    name: str
    fixture: str
    kind: CollectiveKind
    net: Optional[str]      # None: one node
    model: Callable[[], NcclModel]
    source: str

    def points(self) -> list[tuple[int, float]]:
        """``(bytes, measured µs)`` per size, ascending."""
        path = FIXTURES / self.fixture
        if self.fixture.endswith(".md"):
            return sorted((n, us) for n, (_, us) in b300_rows(path).items())
        from tracecli.costs.nccl.nccl_tests import read_nccl_tests

        run = read_nccl_tests(str(path))
        return sorted({r.bytes: r.time_us for r in run.rows if r.bytes > 0}.items())

    @property
    def multi_node(self) -> bool:
        return self.net is not None


def b300_rows(path: Path) -> dict[int, tuple[float, float]]:
    """The B300 table: ``{bytes: (busbw GB/s, µs)}``, µs = bytes x 2(n-1)/n / busbw (n = 8)."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip().strip("*") for c in line.split("|")]
        if len(cells) > 3 and cells[1][:-1].isdigit() and cells[1][-1:] in _UNITS:
            nbytes = int(cells[1][:-1]) * _UNITS[cells[1][-1]]
            busbw = float(cells[2])
            if not busbw > 0:
                raise ValueError(f"{path}: busbw {cells[2]} is not positive")
            rows[nbytes] = (busbw, nbytes * 2 * 7 / 8 / (busbw * 1e3))
    return rows


def _topo(gpu: str, nodes: int, per: int, nic_gbps: float, nics: int, version: str,
          net: Optional[str]) -> Callable[[], NcclModel]:
    def make() -> NcclModel:
        m = NcclModel.for_topology(gpu, nodes, per, True, nic_gbps, nics, version)
        return replace(m, net=net)
    return make


def _rtx() -> NcclModel:
    # 2 ranks sharing one RTX 5090 (sm120) as 2 nodes over sockets; the graphs solved from the
    # run's own TUNING log (tests/costs/test_nccl_tuning.py: 2 x 1.2 ring, 4 x 1.2 tree, pattern TREE)
    return NcclModel(Topology(2, 1), 120, AlgoGraph(2, 1.2, 1.2, nvlink=False, ll128=False),
                     AlgoGraph(4, 1.2, 1.2, nvlink=False, ll128=False), "2.29.7",
                     tree_pattern_tree=True, name="nccl", device="rtx5090", intra="pcie",
                     graph_source="solved from the run's TUNING log", net="socket")


AR, BC = CollectiveKind.ALL_REDUCE, CollectiveKind.BROADCAST
TABLES: tuple[TrainingTable, ...] = (
    TrainingTable("gcp-a3mega-2x8-h100-tcpxo", "gcp_a3mega_h100_2x8_all_reduce_perf.txt", AR,
                  "tcpxo", _topo("h100", 2, 8, 1600.0, 8, "2.30.7", "tcpxo"),
                  "lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result"),
    TrainingTable("b300-1x8-nvls", "ebpf_b300_1x8_allreduce_busbw_2.29.7.md", AR, None,
                  _topo("b200", 1, 8, 0.0, 0, "2.29.7", None),
                  "eunomia-bpf/nccl-eBPF docs/tmp/experiment-results-b300.md"),
    TrainingTable("cscs-gh200-2x1-slingshot", "cscs_gh200_2x1_all_reduce_perf.txt", AR, "ofi",
                  _topo("h100", 2, 1, 200.0, 1, "2.30.7", "ofi"),
                  "eth-cscs/cscs-docs docs/software/container-engine/sarus-suite/early-access.md"),
    TrainingTable("rtx5090-2x1-socket", "ebpf_rtx5090_2x1_broadcast_perf.txt", BC, "socket", _rtx,
                  "eunomia-bpf/nccl-eBPF docs/tmp/default-suboptimal-search.md"),
    TrainingTable("oci-h100-2x8-roce", "oci_h100_2x8_roce_all_reduce_perf_2.21.5.txt", AR,
                  "roce", _topo("h100", 2, 8, 3200.0, 16, "2.21.5", "roce"),
                  "oracle-japan/ocitutorials content/hpc/benchmark/run-nccltests-h100/index.md"),
    TrainingTable("oci-a100-1x8", "oci_a100_1x8_all_reduce_perf_2.26.5.txt", AR, None,
                  _topo("a100", 1, 8, 0.0, 0, "2.26.5", None),
                  "oracle-japan/ocitutorials content/hpc/benchmark/run-nccltests-ubuntu/index.md"),
    TrainingTable("oci-a100-2x8-roce", "oci_a100_2x8_roce_all_reduce_perf_2.26.5.txt", AR,
                  "roce", _topo("a100", 2, 8, 1600.0, 16, "2.26.5", "roce"),
                  "oracle-japan/ocitutorials content/hpc/benchmark/run-nccltests-ubuntu/index.md"),
)
