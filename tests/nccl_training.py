"""The training set of tracecli's NCCL time model (tracecli/costs/nccl/timing.py): public nccl-tests tables, each with its topology as its
source states it (sources: tests/fixtures/nccl/README.md).

Each :class:`TrainingTable` names its fixture, its collective, its transport, the cluster it
was measured on (leave-one-cluster-out holds out every table of a cluster together) and how to
build NCCL's model of its topology from the stated hardware alone (nodes, GPUs, GPU, NICs, NCCL
version, or the graph solved from the run's own log): exactly what a user would pass. None of
the sources reserved for the independent check is here.

Fixtures are the source's own text. Where a page shows nccl-tests' rows without its ``#``
header or closing line (documentation sites render the console block), :func:`table_rows`
reads the rows themselves and checks each one as it reads it: ``algbw = size / time`` and
``busbw = algbw x`` the bus factor of the collective on the table's rank count (a copying
error or a table of another rank count fails here, not in the fit).

>>> [t.name for t in TABLES][:2]
['gcp-a3mega-2x8-h100-tcpxo', 'b300-1x8-nvls']
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tracecli.costs.collectives import kind_cost
from tracecli.costs.nccl.forced import restrict
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.nccl_tests import TYPE_BYTES
from tracecli.costs.nccl.tuning import AlgoGraph
from tracecli.costs.topology import Topology
from tracecli.model import CollectiveKind

__all__ = ["TrainingTable", "TABLES", "FIXTURES", "b300_rows", "busbw_rows", "csv_rows", "table_rows",
           "inplace_rows"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nccl"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_REDOPS = {"sum", "none", "prod", "min", "max", "avg"}


@dataclass(frozen=True)
class TrainingTable:
    name: str
    fixture: str
    kind: CollectiveKind
    net: Optional[str]      # None: one node
    model: Callable[[], NcclModel]
    source: str
    cluster: str = ""       # leave-one-cluster-out group (default: the table alone)
    gpus_per_thread: int = 1  # nccl-tests -g: GPUs one thread drove (timing.launch_us)
    # NCCL settings the run forced (NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS), as its
    # source states them: the model is restricted to them (tracecli/costs/nccl/forced.py)
    forced: tuple[tuple[str, str], ...] = ()
    # rows below it left out: sizes where the run's pick is known not to be NCCL's own
    min_bytes: int = 0

    def nccl(self) -> NcclModel:
        """The table's NCCL model: its topology, restricted to what the run forced."""
        return restrict(self.model(), dict(self.forced)) if self.forced else self.model()

    def points(self) -> list[tuple[int, float]]:
        """``(bytes, measured µs)`` per size from :attr:`min_bytes`, ascending."""
        path = FIXTURES / self.fixture
        if self.fixture.endswith(".md"):
            rows = b300_rows(path) or busbw_rows(path, self.kind, self.nccl().gpus)
            found = sorted((n, us) for n, (_, us) in rows.items())
        elif self.fixture.endswith(".csv"):
            m = self.nccl()
            found = csv_rows(path, self.kind, m.gpus, nodes=m.topology.nodes)
        else:
            found = table_rows(path, self.kind, self.nccl().gpus)
        return [(n, us) for n, us in found if n >= self.min_bytes]

    def contradicted(self, factor: float = 1.5) -> dict[int, tuple[float, float]]:
        """``{bytes: (out-of-place µs, in-place µs)}`` of the rows whose two times, measured in
        the same run, differ by more than ``factor``: a hiccup of the run, not of the
        collective (reported apart by benchmarks/nccl_accuracy.py, still scored and fitted)."""
        if self.fixture.endswith(".md"):
            return {}
        if self.fixture.endswith(".csv"):
            both = dict(csv_rows(FIXTURES / self.fixture, self.kind, self.nccl().gpus, "in",
                                 nodes=self.nccl().topology.nodes))
        else:
            both = dict(inplace_rows(FIXTURES / self.fixture))
        return {n: (us, both[n]) for n, us in self.points()
                if n in both and max(us / both[n], both[n] / us) > factor}

    @property
    def multi_node(self) -> bool:
        return self.net is not None

    @property
    def group(self) -> str:
        return self.cluster or self.name


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


_SPACED_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def busbw_rows(path: Path, kind: CollectiveKind, ranks: int,
               least: float = 1.0) -> dict[int, tuple[float, float]]:
    """A Markdown table of busbw per size (``| 1 MB | 1.33 | ...``, sizes in nccl-tests' binary
    units): ``{bytes: (busbw GB/s, µs)}``, µs = bytes x the bus factor of ``kind`` on ``ranks``
    / busbw. Rows under ``least`` GB/s are left out: printed to 2 decimals, their time is
    known to no better than 0.5% (0.01 GB/s is anything from 0.005 to 0.015)."""
    factor = kind_cost(kind).bus(ranks)
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        size = cells[1].split() if len(cells) > 3 else []
        if len(size) != 2 or not size[0].isdigit() or size[1] not in _SPACED_UNITS:
            continue
        nbytes, busbw = int(size[0]) * _SPACED_UNITS[size[1]], float(cells[2])
        if not (math.isfinite(busbw) and busbw >= 0):
            raise ValueError(f"{path}: busbw {cells[2]} is not a bandwidth")
        if busbw >= least:
            rows[nbytes] = (busbw, nbytes * factor / (busbw * 1e3))
    return rows


def csv_rows(path: Path, kind: CollectiveKind, ranks: int, place: str = "out",
             nodes: Optional[int] = None) -> list[tuple[int, float]]:
    """``(bytes, µs)`` of the rows of ``ranks`` GPUs of a CSV of nccl-tests results (``#`` lines
    skipped; columns ``Nodes,GPUs,size(MB),...,out algbw(GB/s),out busbw(GB/s),in algbw(GB/s),
    in busbw(GB/s)``, sizes in MiB): µs = bytes / algbw of ``place`` (``out`` or ``in``), each row's
    busbw checked against its algbw x the bus factor of ``kind`` on ``ranks``, and its node
    count against ``nodes``; any cell that is not a finite number in range is its line's error."""
    factor = kind_cost(kind).bus(ranks)
    lines = [(no, raw) for no, raw in enumerate(path.read_text().splitlines(), 1)
             if raw.strip() and not raw.startswith("#")]
    if not lines:
        raise ValueError(f"{path}: no CSV rows")
    head = [c.strip() for c in lines[0][1].split(",")]
    want = [f"{place} algbw(GB/s)", f"{place} busbw(GB/s)"]
    if not {"Nodes", "GPUs", "size(MB)", *want} <= set(head):
        raise ValueError(f"{path}:{lines[0][0]}: not a header with Nodes, GPUs, size(MB) and {want}")
    col = {name: i for i, name in enumerate(head)}
    rows: dict[int, float] = {}
    for no, raw in lines[1:]:
        cells = [c.strip() for c in raw.split(",")]
        if len(cells) != len(head):
            raise ValueError(f"{path}:{no}: {len(cells)} cells, the header has {len(head)}")

        def number(name: str, cast, low: float, high: float):
            try:
                value = cast(cells[col[name]])
            except ValueError:
                raise ValueError(f"{path}:{no}: {name} {cells[col[name]]!r} is not a number") from None
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError(f"{path}:{no}: {name} {value} is out of [{low:g}, {high:g}]")
            return value

        if number("GPUs", int, 1, 1 << 20) != ranks:
            continue
        if nodes is not None and number("Nodes", int, 1, 1 << 20) != nodes:
            raise ValueError(f"{path}:{no}: {ranks} GPUs on {cells[col['Nodes']]} nodes, not {nodes}")
        size = number("size(MB)", int, 1, 1 << 20) << 20
        algbw = number(want[0], float, 1e-6, 1e5)
        busbw = number(want[1], float, 0.0, 1e5)
        if abs(busbw - algbw * factor) > max(0.011, 0.006 * busbw):
            raise ValueError(f"{path}:{no}: busbw/algbw {busbw / algbw:.3f} is not "
                             f"{factor:.3f} ({kind.value} on {ranks} ranks)")
        if size in rows:
            raise ValueError(f"{path}:{no}: size {size} twice for {ranks} GPUs")
        rows[size] = size / (algbw * 1e3)
    if not rows:
        raise ValueError(f"{path}: no rows of {ranks} GPUs")
    return sorted(rows.items())


def table_rows(path: Path, kind: CollectiveKind, ranks: int) -> list[tuple[int, float]]:
    """``(bytes, out-of-place µs)`` of every nccl-tests row in ``path`` (MPI prefixes, ``#``
    lines and log lines skipped), each checked against its own algbw and busbw columns."""
    factor = kind_cost(kind).bus(ranks)
    rows: dict[int, float] = {}
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        words = raw.split(":", 1)[-1].split() if "<stdout>" in raw else raw.split()
        if len(words) < 9 or not (words[0].isdigit() and words[1].isdigit()) \
                or words[2] not in TYPE_BYTES or words[3] not in _REDOPS:
            continue
        size, us, algbw, busbw = int(words[0]), float(words[5]), float(words[6]), float(words[7])
        if not (size > 0 and us > 0):
            continue
        expect = size / us / 1e3
        if abs(algbw - expect) > max(0.011, 0.006 * expect):
            raise ValueError(f"{path}:{no}: algbw {algbw} is not size/time = {expect:.3f}: "
                             "the row is not copied right")
        if algbw >= 1.0 and abs(busbw - algbw * factor) > max(0.011, 0.006 * busbw):
            raise ValueError(f"{path}:{no}: busbw/algbw {busbw / algbw:.3f} is not "
                             f"{factor:.3f} ({kind.value} on {ranks} ranks)")
        if size in rows:
            raise ValueError(f"{path}:{no}: size {size} twice: two runs in one fixture")
        rows[size] = us
    if not rows:
        raise ValueError(f"{path}: no nccl-tests rows")
    return sorted(rows.items())


def inplace_rows(path: Path) -> list[tuple[int, float]]:
    """``(bytes, in-place µs)`` of the nccl-tests rows of ``path`` that have an in-place time
    (read as :func:`table_rows` reads the out-of-place one)."""
    out = []
    for raw in path.read_text().splitlines():
        words = raw.split(":", 1)[-1].split() if "<stdout>" in raw else raw.split()
        if len(words) < 10 or not (words[0].isdigit() and words[1].isdigit()) \
                or words[2] not in TYPE_BYTES or words[3] not in _REDOPS:
            continue
        try:
            us = float(words[9])
        except ValueError:
            continue
        if int(words[0]) > 0 and us > 0:
            out.append((int(words[0]), us))
    return out


def _topo(gpu: str, nodes: int, per: int, nic_gbps: float, nics: int, version: str,
          net: Optional[str]) -> Callable[[], NcclModel]:
    def make() -> NcclModel:
        return NcclModel.for_topology(gpu, nodes, per, True, nic_gbps, nics, version, net)
    return make


def _platform(name: str, nodes: int, version: str) -> Callable[[], NcclModel]:
    def make() -> NcclModel:
        return NcclModel.for_platform(name, nodes, version)
    return make


def _mesh(gpu: str, nodes: int, per: int, nic_gbps: float, nics: int, version: str,
          net: str, nic_path: Optional[str] = None) -> Callable[[], NcclModel]:
    """A topology whose GPUs are linked by NVLink to each other, no NVSwitch (no NVLS);
    ``nic_path``: a GPU's PCIe path to its NIC as the source states it (``--nic-path``)."""
    def make() -> NcclModel:
        return NcclModel.for_topology(gpu, nodes, per, False, nic_gbps, nics, version, net,
                                      mesh=True, nic_path=nic_path)
    return make


def _rtx() -> NcclModel:
    # 2 ranks sharing one RTX 5090 (sm120) as 2 nodes over sockets; the graphs solved from the
    # run's own TUNING log (tests/costs/test_nccl_tuning.py: 2 x 1.2 ring, 4 x 1.2 tree, pattern TREE)
    return NcclModel(Topology(2, 1), 120, AlgoGraph(2, 1.2, 1.2, nvlink=False, ll128=False),
                     AlgoGraph(4, 1.2, 1.2, nvlink=False, ll128=False), "2.29.7",
                     tree_pattern_tree=True, name="nccl", device="rtx5090", intra="pcie",
                     graph_source="solved from the run's TUNING log", net="socket")


AR, AG, BC = CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.BROADCAST
DSTACK = "dstackai/dstack mkdocs/docs/examples/clusters/"
TABLES: tuple[TrainingTable, ...] = (
    TrainingTable("gcp-a3mega-2x8-h100-tcpxo", "gcp_a3mega_h100_2x8_all_reduce_perf.txt", AR,
                  "tcpxo", _topo("h100", 2, 8, 1600.0, 8, "2.21.5", "tcpxo"),
                  "lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result", "gcp-a3mega"),
    TrainingTable("b300-1x8-nvls", "ebpf_b300_1x8_allreduce_busbw_2.29.7.md", AR, None,
                  _topo("b200", 1, 8, 0.0, 0, "2.29.7", None),
                  "eunomia-bpf/nccl-eBPF docs/tmp/experiment-results-b300.md", gpus_per_thread=8),
    TrainingTable("cscs-gh200-2x1-slingshot", "cscs_gh200_2x1_all_reduce_perf.txt", AR, "ofi",
                  _topo("h100", 2, 1, 200.0, 1, "2.30.7", "ofi"),
                  "eth-cscs/cscs-docs docs/software/container-engine/sarus-suite/early-access.md",
                  "cscs-alps"),
    # 2 x 4 GH200 of CSCS Alps again (cluster cscs-alps: held out with the table above), 8 B-128 MiB,
    # NCCL 2.25.1: the page's Containerfile starts from nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04;
    # NCCL_PROTO=^LL128: the page says the container engine's NCCL hook sets its nccl_env_vars
    TrainingTable("cscs-gh200-2x4-slingshot", "cscs_gh200_2x4_all_reduce_perf.txt", AR, "ofi",
                  _platform("cscs-alps-gh200", 2, "2.25.1"),
                  "eth-cscs/cscs-docs docs/software/communication/nccl.md", "cscs-alps",
                  forced=(("NCCL_PROTO", "^LL128"),)),
    # 2 x 4 GH200 of Sigma2's Olivia (HPE Cray EX, 4 x 200 Gb/s Slingshot a node), 1 B-128 MiB, NCCL
    # 2.30.4 (printed): a second Slingshot cluster; HPE's variables from the NCCL module, nothing forced
    TrainingTable("olivia-gh200-2x4-slingshot", "sigma2_olivia_gh200_2x4_all_reduce_perf_2.30.4.txt", AR,
                  "ofi", _mesh("gh200", 2, 4, 800.0, 4, "2.30.4", "ofi"),
                  "UNINETTSigma2/documentation hpc_machines/olivia/nccl_apptainer.md", "olivia"),
    # 2 x 4 A100 of ALCF Polaris (NVLink mesh, 2 x 200 Gb/s Slingshot 11 a node), 4 B-1 GiB, NCCL 2.18.3
    # (NVIDIA HPC SDK 23.9's), aws-ofi-nccl 1.9.1: a third Slingshot cluster; nothing forced. Each NIC
    # is PHB to its nearest GPU (ALCF's affinity table): NCCL 2.18 allows no LL128 on sm80 there
    TrainingTable("polaris-a100-2x4-slingshot", "alcf_polaris_a100_2x4_all_reduce_perf_2.18.3.txt", AR,
                  "ofi", _mesh("a100", 2, 4, 400.0, 2, "2.18.3", "ofi", nic_path="phb"),
                  "argonne-lcf/alcf-nccl-tests results_polaris/nccl_2_18/n2.g4.2024-04-29-18-41-24/"
                  "all_reduce_output.dat.4", "alcf-polaris"),
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
    TrainingTable("aws-p4d-2x8-a100-efa", "aws_dlami_p4d_2x8_efa_all_reduce_perf_2.23.4.txt", AR,
                  "efa", _topo("a100", 2, 8, 400.0, 4, "2.23.4", "efa"),
                  "AWS Deep Learning AMI developer guide, tutorial-efa-using"),
    # 2 x p5.48xlarge: the 16-rank rows of a CSV that also holds 4-32 nodes (left out: see README)
    # all of them, 32 MiB up: the run loads aws-ofi-nccl 1.16.3's region tuner, which leaves a
    # communicator of 2 nodes or fewer to NCCL's own choice (src/tuner/nccl_ofi_regions.cpp
    # v1.16.3:1352-1357; tracecli/costs/nccl/ofi_tuner.py)
    TrainingTable("aws-p5-2x8-h100-efa", "crazyguitar_aws_p5_h100_efa_all_reduce_perf_2.27.7.csv", AR,
                  "efa", _topo("h100", 2, 8, 3200.0, 32, "2.27.7", "efa"),
                  "crazyguitar/aws-gpu-communication-benchmark data/nccl_all_reduce.csv", "aws-p5"),
    # 2 x p5.48xlarge again (cluster aws-p5: held out with the table above), 8 B-16 GiB: aws-ofi-nccl
    # 1.9.2's tuner fails to load in NCCL 2.22.3 ("using internal tuner instead", the log): NCCL's own
    TrainingTable("aws-p5-2x8-h100-efa-small", "keitaw_aws_p5_h100_2x8_efa_all_reduce_perf_2.22.3.txt",
                  AR, "efa", _topo("h100", 2, 8, 3200.0, 32, "2.22.3", "efa"),
                  "KeitaW/p5-nccl-test-2024-07-19 nccl-test-output-v2.22.3-1.log", "aws-p5"),
    TrainingTable("dgx-h100-1x8-nvls", "nvidia_dgxc_h100_1x8_all_reduce_perf.txt", AR, None,
                  _topo("h100", 1, 8, 0.0, 0, "2.30.7", None),
                  "NVIDIA/dgxc-benchmarking nccl/README.md"),
    TrainingTable("nebius-h100-2x8-ib", "dstack_nebius_h100_2x8_ib_all_reduce_perf.txt", AR, "ib",
                  _topo("h100", 2, 8, 3200.0, 8, "2.26.2", "ib"), DSTACK + "nebius.md",
                  "nebius-h100"),
    TrainingTable("nebius-h100-2x8-ib-large", "skypilot_nebius_h100_2x8_ib_all_reduce_perf_2.23.4.txt",
                  AR, "ib", _topo("h100", 2, 8, 3200.0, 8, "2.23.4", "ib"),
                  "skypilot-org/skypilot examples/nebius_infiniband/README.md", "nebius-h100"),
    TrainingTable("voltagepark-h100-4x8-ib", "voltagepark_h100_4x8_ib_all_reduce_perf_2.24.3.txt", AR,
                  "ib", _topo("h100", 4, 8, 3200.0, 8, "2.24.3", "ib"),
                  "ZiyanIshani/vpbenchmarking results/nccl/nccl_multinode/nccl_allreduce_20260224_225706.txt"),
    TrainingTable("lambda-b200-2x8-ib", "dstack_lambda_b200_2x8_ib_all_reduce_perf_2.26.2.txt", AR,
                  "ib", _topo("b200", 2, 8, 3200.0, 8, "2.26.2", "ib"), DSTACK + "lambda.md"),
    TrainingTable("crusoe-a100-2x8-ib", "dstack_crusoe_a100_2x8_ib_all_reduce_perf.txt", AR, "ib",
                  _topo("a100", 2, 8, 1600.0, 8, "2.26.2", "ib"),
                  "dstackai/dstack examples/clusters/crusoe/README.md"),
    TrainingTable("gcp-a4-2x8-b200-roce", "dstack_gcp_a4_b200_2x8_roce_all_reduce_perf.txt", AR,
                  "roce", _topo("b200", 2, 8, 3200.0, 8, "2.26.2", "roce"), DSTACK + "gcp.md"),
    # --platform gcp-a3ultra: Google's stated hardware (8 x H200, 8 ConnectX-7, 3,200 Gbps,
    # RoCE v2), the figures this table was modelled on by hand before the preset
    TrainingTable("gcp-a3ultra-2x8-h200-roce-ag",
                  "skypilot_gcp_a3ultra_h200_2x8_gib_all_gather_perf_2.26.6.txt", AG, "roce",
                  _platform("gcp-a3ultra", 2, "2.26.6"),
                  "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md"),
    TrainingTable("gcp-a3high-2x8-h100-tcpx-ag", "dstack_gcp_a3high_h100_2x8_tcpx_all_gather_perf.txt",
                  AG, "tcpx", _topo("h100", 2, 8, 800.0, 4, "2.19.3", "tcpx"), DSTACK + "gcp.md",
                  forced=(("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple"),
                          ("NCCL_MIN_NCHANNELS", "8"), ("NCCL_MAX_NCHANNELS", "8"))),
    TrainingTable("modal-a100-1x8-g8", "modal_a100_1x8_g8_all_reduce_perf_2.29.3.txt", AR, None,
                  _topo("a100", 1, 8, 0.0, 0, "2.29.3", None),
                  "yumibyte/CS244C-Research phase1-baseline/a100-8gpu-new/results/results_8gpu_allreduce.txt",
                  gpus_per_thread=8),
    TrainingTable("gcp-a3mega-2x8-h100-tcpxo-ag", "dstack_gcp_a3mega_h100_2x8_tcpxo_all_gather_perf.txt",
                  AG, "tcpxo", _topo("h100", 2, 8, 1600.0, 8, "2.30.7", "tcpxo"), DSTACK + "gcp.md",
                  "gcp-a3mega"),
    TrainingTable("google-a3high-2x8-h100-tcpx", "google_a3high_h100_2x8_tcpx_all_reduce_perf.txt",
                  AR, "tcpx", _topo("h100", 2, 8, 800.0, 4, "2.18.5", "tcpx"),
                  "GoogleCloudPlatform/ai-infra-cluster-provisioning sample_workloads/nccltest/README.md",
                  forced=(("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple"),
                          ("NCCL_MIN_NCHANNELS", "12"), ("NCCL_MAX_NCHANNELS", "12"))),
    TrainingTable("skypilot-a3high-2x8-h100-tcpx", "skypilot_gcp_a3high_h100_2x8_tcpx_all_reduce_busbw.md",
                  AR, "tcpx", _topo("h100", 2, 8, 800.0, 4, "2.19.3", "tcpx"),
                  "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md",
                  forced=(("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple"),
                          ("NCCL_MIN_NCHANNELS", "8"), ("NCCL_MAX_NCHANNELS", "8"))),
    # 4 of the 8 H100 of an HGX board (NVSwitch), ONE thread driving the 4 (-g 4, one Pid)
    TrainingTable("h100-1x4-g4", "waynehacking8_h100_1x4_g4_all_reduce_perf_2.29.2.txt", AR, None,
                  _topo("h100", 1, 4, 0.0, 0, "2.29.2", None),
                  "waynehacking8/nccl-collectives-bench results/quiet/all_reduce.txt",
                  gpus_per_thread=4),
)
