"""``NcclModel``: the cost-model protocol (:class:`~tracecli.costs.model.CostModel`) answered by
NCCL's own model: per size, the argmin over NCCL's enabled (algorithm, protocol) pairs of
``latency + bytes / bandwidth`` (:mod:`.tuning`, :mod:`.algotime`), for the graph of a
topology (:mod:`.graph`), a platform (:mod:`.platforms`) or a log (:mod:`.nccllog`).

``time_ms(kind, n)``: NCCL's predicted time of one collective of a bucket of ``n`` bytes, where
the bytes NCCL charges are ``n`` for all-reduce and broadcast, the gathered buffer
``ranks · n`` for all-gather (``n`` is each rank's share, as in planning) and ``n`` for
reduce-scatter (``n`` is the whole input). NCCL's model has no kernel-launch floor: the times
of small sizes are its latency terms only, well below what nccl-tests measures.

``linear(kind)``: NCCL's curve is piecewise (a protocol and algorithm switch per size), so no
line is exact. The line returned is the SECANT of the curve between :data:`LINE_FROM` and
:data:`LINE_TO` bytes (1 MiB and 256 MiB, the range where gradient buckets are sized): exact at
both ends, above the curve between them wherever the curve is concave there. Each call
is cached per kind; ``time_ms`` is cached per (kind, bytes).

>>> m = NcclModel.for_topology("h100", 1, 8, nvswitch=True, nic_gbps=0, nics=0, version="2.30.7")
>>> m.choice(CollectiveKind.ALL_REDUCE, 1 << 30)[:2]
('NVLS', 'Simple')
>>> m.choice(CollectiveKind.ALL_REDUCE, 1024)[:2]
('Ring', 'LL')
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ...errors import CostModelError
from ...model import CollectiveKind
from ..curve import Curve
from ..error import ErrorBand
from ..collectives import NAMES
from ..model import Linear
from ..topology import Topology
from .graph import GPUS, MESH_GPUS, nic_allows_ll128, search_graphs, tree_pattern_is_tree
from .nvls import search_nvls
from .platforms import PLATFORMS
from .fit_time import resolve
from .describe import description_of, topology_doc_of
from .channels import model_channels
from .forced import apply, no_algorithm
from .ofi_tuner import channels, tuned
from .pipeline import Chunking, fill_bytes
from .ofi_env import chunking, protocol
from .minorant import minorant_of
from .report import summary_of
from .timing import TimeParams, channels_used, features, launch_us, time_us
from .wire import line_rate_us
from .transports import DEFAULT_NET, NETS, channel_scale, nccl_nics, plugin_latency, time_class
from .algotime import algo_terms
from .tuning import ALGOS, FUNCS, NO_GRAPH, PROTOS, AlgoGraph, Comm, tune
from .versions import DEFAULT_VERSION, constants_for

__all__ = ["NcclModel", "LINE_FROM", "LINE_TO", "FUNC_OF"]

LINE_FROM, LINE_TO = 1 << 20, 256 << 20
FUNCS_INDEX = {name: k for k, name in enumerate(FUNCS)}
ESTIMATED = "estimated from NCCL's search rules"
FUNC_OF = {kind: names.nccl for kind, names in NAMES.items()}


@dataclass(frozen=True)
class NcclModel:
    """NCCL ``version``'s model on ``topology`` with the ring and tree ``graphs`` and, where NCCL
    enables NVLS (:mod:`.nvls`), the NVLS graph (``None``: no NVLS)."""

    topology: Topology
    compcap: int
    ring: AlgoGraph
    tree: AlgoGraph
    version: str = DEFAULT_VERSION
    cpu: str = "intel"
    name: str = "nccl"
    source: str = ""
    graph_source: str = ESTIMATED
    tree_pattern_tree: bool = False
    device: str = ""
    intra: str = ""  # "nvswitch", "nvlink" (a mesh, no switch) or "pcie"
    nic_gbps: Optional[float] = None  # network per node, Gb/s over all its NICs
    nics: Optional[int] = None
    nvls: Optional[AlgoGraph] = None
    net: Optional[str] = None  # the network transport (transports.py); None on one node
    net_latency: Optional[float] = None  # µs the network reports to NCCL (None: the transport's)
    nic_devices: Optional[int] = None  # network devices NCCL sees a node (transports.nccl_nics)
    nic_path: Optional[str] = None  # a GPU's PCIe path to its NIC (graph.NIC_PATHS; None: pxb)
    # NCCL's settings the job forces (forced.py: NCCL_ALGO, NCCL_PROTO, ...; () none)
    nccl_env: tuple[tuple[str, str], ...] = ()
    _cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)  # per model

    @classmethod
    def for_topology(cls, gpu: str, nodes: int, gpus_per_node: int, nvswitch: bool,
                     nic_gbps: float, nics: int, version: str = DEFAULT_VERSION,
                     net: Optional[str] = None, mesh: bool = False,
                     nic_path: Optional[str] = None) -> "NcclModel":
        """The model of a topology, its graph estimated (:func:`~.graph.search_graphs`);
        ``net``: the network transport (:mod:`.transports`; ``None``: ib on several nodes);
        ``mesh``: GPUs linked by NVLink to each other without an NVSwitch (no NVLS);
        ``nic_path``: a GPU's PCIe path to its NIC (``None``: on its PCIe switch), beyond
        which NCCL enables no LL128 (:func:`~.graph.nic_allows_ll128`)."""
        if gpu not in GPUS:
            raise CostModelError(f"unknown GPU {gpu!r}; use one of " + ", ".join(GPUS))
        if net is not None and net not in NETS:
            raise CostModelError(f"unknown network transport {net!r}; use one of " + ", ".join(NETS))
        try:
            topo = Topology(nodes, gpus_per_node)
            constants_for(version)
        except ValueError as e:
            raise CostModelError(str(e)) from None
        if nodes > 1 and (nics < 1 or not nic_gbps > 0):
            raise CostModelError(f"{nodes} nodes need a network: pass --nic-gbps (Gb/s per "
                            "node, summed over its NICs) and at least one NIC")
        devices = nccl_nics(nics, gpus_per_node, net or DEFAULT_NET, version)[0] \
            if nodes > 1 else nics
        mesh = mesh and not nvswitch
        if mesh and gpus_per_node > MESH_GPUS:
            raise CostModelError(f"an NVLink mesh of {gpus_per_node} GPUs: tracecli models "
                                 f"every pair linked, {MESH_GPUS} GPUs at most (a 4-GPU board); "
                                 "pass NCCL's own graph with --nccl-log")
        ring, tree = search_graphs(GPUS[gpu], gpus_per_node, nodes, nvswitch, nic_gbps, devices,
                                   mesh)
        nvls = search_nvls(GPUS[gpu], gpus_per_node, nodes, nvswitch, nic_gbps, devices, version)
        if nodes > 1 and nic_path is not None and not nic_allows_ll128(GPUS[gpu].compcap, nic_path):
            ring, tree = replace(ring, ll128=False), replace(tree, ll128=False)
        return cls(topo, GPUS[gpu].compcap, ring, tree, version, nvls=nvls,
                   tree_pattern_tree=tree_pattern_is_tree(GPUS[gpu], nodes),
                   source=f"NCCL {version} model, {nodes} x {gpus_per_node} {gpu}", device=gpu,
                   intra="nvswitch" if nvswitch else "nvlink" if mesh else "pcie",
                   nic_gbps=nic_gbps if nodes > 1 else None, nics=nics if nodes > 1 else None,
                   net=net if nodes > 1 else None,
                   nic_devices=devices if nodes > 1 and devices != nics else None,
                   nic_path=nic_path)  # inert on one node; kept for .on() to several

    @classmethod
    def for_platform(cls, platform: str, nodes: int, version: str = DEFAULT_VERSION) -> "NcclModel":
        if platform not in PLATFORMS:
            raise CostModelError(f"unknown platform {platform!r}; use one of " + ", ".join(PLATFORMS))
        p = PLATFORMS[platform]
        m = cls.for_topology(p.gpu, nodes, p.gpus_per_node, p.nvswitch, p.nic_gbps, p.nics, version,
                             p.net, p.mesh)
        return replace(m, name=f"nccl:{platform}", source=f"{m.source}; {p.source}",
                       net_latency=p.net_latency if nodes > 1 else None)

    # --- the protocol -------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return self.topology.ranks

    @property
    def plugin_latency_us(self) -> float:
        """µs the network reports to NCCL (``latencyInter``, transports.plugin_latency); 0 on
        one node."""
        if self.topology.nodes == 1:
            return 0.0
        return self.net_latency if self.net_latency is not None else plugin_latency(self.link_net)

    def _table(self, latency: Optional[float] = None):
        """NCCL's tuning table; ``latency``: the network latency on the graphs (default: what
        the network reports to NCCL, :attr:`plugin_latency_us`)."""
        if latency is None:  # asked at every size: what the network reports, read once
            hit = self._cache.get("reported")
            if hit is None:
                hit = self._cache["reported"] = self._table(self.plugin_latency_us)
            return hit
        key = ("table", latency)
        if key not in self._cache:
            t = self.topology
            # search.cc:745 sets the NET's latency on every graph that crosses the network
            ring, tree, nvls = (g if latency == 0 or g is None
                                else replace(g, latency_inter=latency)
                                for g in (self.ring, self.tree, self.nvls))
            comm = Comm(t.ranks, t.nodes, self.compcap, ring, tree, cpu=self.cpu,
                        tree_pattern_tree=self.tree_pattern_tree,
                        nvls=nvls or NO_GRAPH, nvls_support=nvls is not None,
                        comm_channels=model_channels(self))
            self._cache[key] = apply(tune(comm, constants_for(self.version)),
                                     dict(self.nccl_env), self.version)
        return self._cache[key]

    def _func(self, kind: CollectiveKind) -> str:
        try:
            return FUNC_OF[kind]
        except KeyError:
            raise CostModelError(f"NCCL's model has no {getattr(kind, 'value', kind)}; "
                            "known: " + ", ".join(k.value for k in FUNC_OF)) from None

    def charged_bytes(self, kind: CollectiveKind, nbytes: float) -> int:
        """The bytes NCCL's model charges for a bucket of ``nbytes`` (enqueue.h:39-41)."""
        n = max(int(nbytes), 0)
        return n * self.gpus if kind is CollectiveKind.ALL_GATHER else n

    def choice(self, kind: CollectiveKind, nbytes: float) -> tuple[str, str, float]:
        """``(algorithm, protocol, µs)`` NCCL's argmin picks for a bucket of ``nbytes`` (the µs
        are NCCL's own model time, its ranking key)."""
        return self.pick(kind, self.charged_bytes(kind, nbytes))

    def pick(self, kind: CollectiveKind, charged: int) -> tuple[str, str, float]:
        """:meth:`choice` for the bytes NCCL charges (nccl-tests' size column)."""
        key = (kind, charged)
        hit = self._cache.get(key)
        if hit is None:
            if self.gpus <= 1:
                hit = ("none", "none", 0.0)
            else:
                us, a, p = tuned(self, self._table(), self._func(kind), charged)
                if a < 0:  # enqueue.cc: "No algorithm/protocol available", the call fails
                    raise no_algorithm(self.version, self._func(kind), self.nccl_env)
                hit = (ALGOS[a], PROTOS[p], us)
            if len(self._cache) < 100_000:
                self._cache[key] = hit
        return hit

    def features(self, kind: CollectiveKind, charged: int,
                 params: Optional[TimeParams] = None) -> tuple[float, ...]:
        """The time model's terms of NCCL's pick for ``charged`` bytes (timing.features);
        ``params``: the constants that will time them, which cap a per-channel transport's
        bandwidth at NCCL's (transports.channel_scale; ``None`` to fit)."""
        a, p, _ = self.pick(kind, charged)
        if a == "none":
            return (0.0,) * 10
        # the pick is NCCL's (with the latency the network reports), its time is not: a
        # plugin's reported latency is a knob for NCCL's choice (aws-ofi-nccl chose 75 us
        # because "NCCL's internal tuner choices work better with this value",
        # platform-aws.cpp:774-780), so the time model's latency term leaves it out
        _, table, start, ring_gbps, chunks = self._sized()
        lat, bw = algo_terms(table, self._func(kind), ALGOS.index(a), PROTOS.index(p), charged)
        used = channels(self, kind, a, p, charged, start) or channels_used(
            a, p, charged, start, table.comm.n_ranks, ring_gbps)
        nvls = a in ("NVLS", "NVLSTree")
        fill = fill_bytes(a, charged, self.compcap, self.topology.nodes, self.nvls.n_channels,
                          self.version, self.nvls, chunks) \
            if nvls and self.nvls is not None else 0
        several = self.topology.nodes > 1
        per = 0.0 if params is None else params.bw + (params.ring_net if a == "Ring" else 0.0) \
            + (params.ll_net if p == "LL" and several else 0.0)
        scale = channel_scale(self.link_net, a, start, 2 * self.ring.n_channels,
                              1.0 / per if per > 0 else 0.0)
        return features(lat, bw, charged, used, start, several, nvls and self.compcap >= 100,
                        nvls, fill, a == "Ring", scale, p == "LL")

    def _sized(self) -> tuple["NcclModel", Any, int, float, Chunking]:
        """What :meth:`features` reads at every size, computed once: ``(self, NCCL's table
        without the network's reported latency, the channels a ring or tree starts from, the
        ring graph's GB/s, the NVLS chunk settings, ofi_env.chunking)`` (a copy made by
        ``replace`` starts a cache of its own)."""
        hit = self._cache.get("sized")
        if hit is None:
            hit = self._cache["sized"] = (self, self._table(0.0), model_channels(
                self, collective=True), self.ring.n_channels * self.ring.bw_intra,
                chunking(self))
        return hit

    def time_params(self) -> Optional[tuple[TimeParams, str]]:
        """The fitted constants that time this topology, with their class (fitted.py)."""
        if "params" not in self._cache:
            from .fitted import FITTED
            self._cache["params"] = resolve(FITTED, self.time_class)
        return self._cache["params"]

    @property
    def time_class(self) -> Optional[str]:
        """The fitted constants' class: :attr:`link_net`, on EFA by protocol (transports.py)."""
        return time_class(self.link_net, self.name, self.nics or 0, self.topology.gpus_per_node,
                          protocol(dict(self.nccl_env)))

    @property
    def link_net(self) -> Optional[str]:
        """The transport the time model uses: ``net``, ib by default on several nodes."""
        return None if self.topology.nodes == 1 else (self.net or DEFAULT_NET)

    def predicted_us(self, kind: CollectiveKind, nbytes: float) -> float:
        """µs of one collective of a bucket of ``nbytes``: NCCL's pick, timed (timing.py)."""
        return self.timed_us(kind, self.charged_bytes(kind, nbytes))

    def timed_us(self, kind: CollectiveKind, charged: int, gpus_per_thread: int = 1) -> float:
        """:meth:`predicted_us` for the bytes NCCL charges (nccl-tests' size column);
        ``gpus_per_thread`` > 1 only to compare with nccl-tests ``-g N`` (timing.launch_us)."""
        hit = self.time_params()
        if hit is None:  # nothing fitted: NCCL's own time
            return self.pick(kind, charged)[2]
        feats = self.features(kind, charged, hit[0])
        if not feats[0]:
            return 0.0
        # never faster than the bytes can cross a node's NICs (wire.py); a thread driving
        # several GPUs launches their kernels before any byte moves (timing.launch_us)
        return max(time_us(hit[0], feats), line_rate_us(
            self._func(kind), charged, self.topology.nodes, self.nic_gbps)) \
            + launch_us(hit[0], gpus_per_thread)

    def time_ms(self, kind: CollectiveKind, nbytes: float, queued: bool = False) -> float:
        ms = self._cache.get((kind, nbytes, "ms"))  # timelines ask for every bucket: one lookup
        if ms is None:
            ms = self.predicted_us(kind, nbytes) / 1000.0
            if len(self._cache) < 200_000:
                self._cache[(kind, nbytes, "ms")] = ms
        return ms

    def linear(self, kind: CollectiveKind) -> Linear:
        key = ("linear", kind)
        if key not in self._cache:
            t0, t1 = self.time_ms(kind, LINE_FROM), self.time_ms(kind, LINE_TO)
            slope = (t1 - t0) / (LINE_TO - LINE_FROM)
            self._cache[key] = Linear(max(t0 - slope * LINE_FROM, 0.0), slope)
        return self._cache[key]

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]:
        return None

    def curve(self, kind: CollectiveKind) -> Curve:
        """NCCL's pick timed, size by size. Not monotone: a collective can take less time a
        few bytes up, where NCCL runs it on one more channel (:func:`.timing.channels_used`)
        or switches protocol. Its minorant: the fitted floors, the least latency of any
        enabled pair and the bytes at the best bandwidth of any, on every channel."""
        return Curve(lambda n: self.time_ms(kind, n), False, self.minorant(kind))

    def minorant(self, kind: CollectiveKind) -> Linear:
        """A line at or below :meth:`time_ms` of ``kind`` at every size (a thousandth below,
        for NCCL's float32 arithmetic)."""
        key = ("minorant", kind)
        if key not in self._cache:
            # the time model's table: the latency a network reports to NCCL is in no time
            table = self._table(0.0) if self.gpus > 1 else None
            self._cache[key] = minorant_of(self, kind, table, FUNCS_INDEX[self._func(kind)])
        return self._cache[key]

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        """The cross-validated error of :meth:`time_ms` at this size (:mod:`.accuracy`);
        ``None`` on one rank or where nothing was fitted."""
        return self.error_charged(kind, self.charged_bytes(kind, nbytes),
                                  1000.0 * self.time_ms(kind, nbytes))

    def unknown_error(self, kind: CollectiveKind, nbytes: float) -> str:
        if self.gpus <= 1:
            return "one rank: nothing to reduce"
        if self.time_params() is None:
            return "NCCL's own ranking times, not fitted to any measurement"
        return "no held-out measurement of this size checks the time model"

    def error_charged(self, kind: CollectiveKind, charged: int,
                      predicted_us: Optional[float] = None) -> Optional[ErrorBand]:
        """:meth:`error` for the bytes NCCL charges (nccl-tests' size column), of a prediction
        of ``predicted_us`` (``None``: :meth:`timed_us`'s), its upper edge capped where it
        would have a run beat the line rate (:func:`.accuracy.capped`)."""
        hit = self.time_params()
        if hit is None or self.gpus <= 1:
            return None
        from .accuracy import capped, error_table

        table = error_table("local" if self.link_net is None else "network", self.time_class,
                            hit[1])
        band = table.at(kind, charged) if table else None
        if band is not None and self.beyond_scale():
            band = band._replace(basis=f"{band.basis}; {self.beyond_scale()}", extrapolated=True)
        line = line_rate_us(self._func(kind), charged, self.topology.nodes, self.nic_gbps)
        if band is None or line <= 0:
            return band
        return capped(band, self.timed_us(kind, charged) if predicted_us is None
                      else predicted_us, line)

    def beyond_scale(self) -> Optional[str]:
        """Where this topology is larger than every table its constants were fitted on
        (:func:`.accuracy.beyond_scale`), that in words; else ``None``."""
        if "beyond" not in self._cache:
            from .accuracy import scale_note
            self._cache["beyond"] = scale_note(self)
        return self._cache["beyond"]

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]:
        """``(algorithm, protocol)`` NCCL picks for a bucket of ``nbytes`` (``None`` on one rank)."""
        a, p, _ = self.choice(kind, nbytes)
        return None if a == "none" else (a, p)

    def topology_doc(self) -> dict[str, Any]:
        """The topology as ``collective --json`` reports it (:mod:`.describe`)."""
        return topology_doc_of(self)

    def summary(self) -> str:  # one line: what the model is, where its figures come from
        return summary_of(self)

    def on(self, gpus: int) -> "NcclModel":
        """The same node shape on ``gpus`` ranks (whole nodes; fewer than a node: one node):
        :func:`.rescale.on_gpus`."""
        from .rescale import on_gpus
        return on_gpus(self, gpus)

    def describe(self) -> dict[str, Any]:
        """The model as a plan file keeps it (:mod:`.describe`)."""
        return description_of(self, (LINE_FROM, LINE_TO), FUNC_OF)
