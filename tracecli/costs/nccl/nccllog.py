"""Reader of ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH,TUNING,ENV`` output: NCCL's own graph values,
its printed latency/bandwidth table, its version and communicator size, and its per-size choices.

What it reads, each as NCCL prints it (NVIDIA/nccl v2.30.7-1):

- ``NCCL version 2.29.7+cuda12.9`` (src/init.cc, ``showVersion``);
- ``comm 0x.. rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0`` (src/init.cc);
- ``Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1``
  (``ncclTopoPrintGraph``, src/graph/search.cc; ``speed`` instead of ``bw`` before 2.12), the
  pattern naming the algorithm (src/graph/topo.h: 1-3 trees, 4 ring, 5 NVLS, 6 CollNet direct);
- the table ``   Algorithm   | ...``, ``  Protocol    | ...``, `` Max NThreads | ...`` and one
  ``%13s |`` row per collective of ``%8.1f/%6.1f |`` cells (src/graph/tuning.cc:543-585);
- ``AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}`` (2.24+) and
  ``1024 Bytes -> Algo 1 proto 0 time 25.874907`` (2.19-2.23) choice lines (src/enqueue.cc);
- ``NCCL_PROTO set by environment to Simple`` (src/graph/tuning.cc) and ``NCCL_MIN_NCHANNELS
  set by environment to 12.`` (``ncclLoadParam``, src/misc/param.cc: a number and a full
  stop): the settings the run forced, kept for those :mod:`.forced` models.

Lines of other ranks and other subsystems are skipped; a value that is not a finite number in
range raises :class:`~tracecli.errors.CalibrationError` at its ``path:line``. Only rank 0 prints
the table; when a file holds several tables (several communicators) the first is read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from ...errors import CalibrationError, excerpt
from ...limits import MAX_RANKS
from ...inputfile import open_input
from .forced import MAX_SETTING
from .tuning import FUNCS
from .versions import ALGOS, PROTOS, parse_version

__all__ = ["NcclLog", "GraphLine", "read_nccl_log", "parse_nccl_log"]

MAX_CHANNELS = 64  # MAXCHANNELS, src/include/device.h
MAX_LAT_US = 1e7
MAX_BW_GBPS = 1e5
PATTERNS = {1: "Tree", 2: "Tree", 3: "Tree", 4: "Ring", 5: "NVLS", 6: "CollNetDirect"}

_VERSION = re.compile(r"(?:NCCL INFO |^)NCCL version (\S+)")  # older releases print it bare
_COMM = re.compile(r"NCCL INFO comm \S+ rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
_GRAPH = re.compile(r"NCCL INFO Pattern (\S+), crossNic (\S+), nChannels (\S+), (?:bw|speed) "
                    r"([^/\s]+)/([^,\s]+), type (\w+)/(\w+), sameChannels (\S+)")
_ALGO_HDR = re.compile(r"NCCL INFO\s+Algorithm\s+\|(.*)$")
_PROTO_HDR = re.compile(r"NCCL INFO\s+Protocol\s+\|")
_ROW = re.compile(r"NCCL INFO\s+(Broadcast|Reduce|AllGather|ReduceScatter|AllReduce) \|(.*)$")
_CELL = re.compile(r"^\s*(\S+)/\s*(\S+)\s*$")
_CHOICE_NEW = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
_CHOICE_OLD = re.compile(r"NCCL INFO (\d+) Bytes -> Algo (\d+) proto (\d+) time (\S+)")
_ENV = re.compile(r"NCCL INFO (NCCL_ALGO|NCCL_PROTO|NCCL_MIN_NCHANNELS|NCCL_MAX_NCHANNELS|"
                  r"NCCL_NVLS_ENABLE) set by environment to (.*)$")


@dataclass(frozen=True)
class GraphLine:
    """One ``Pattern ...`` line: the graph NCCL's search picked for one algorithm."""

    line: int
    pattern: int
    algorithm: str
    n_channels: int
    bw_intra: float
    bw_inter: float
    type_intra: str
    type_inter: str
    same_channels: bool


@dataclass
class NcclLog:
    """What a log says; ``table[(func, algo, proto)] = (latency_us, algbw_gbps, line)``."""

    path: str
    version: Optional[str] = None
    n_ranks: Optional[int] = None
    n_nodes: Optional[int] = None
    local_ranks: Optional[int] = None
    graphs: list[GraphLine] = field(default_factory=list)
    table: dict[tuple[str, str, str], tuple[float, float, int]] = field(default_factory=dict)
    choices: list[tuple[int, str, int, str, str, Optional[float]]] = field(default_factory=list)
    env: dict[str, tuple[str, int]] = field(default_factory=dict)  # name: (value, line)

    def graph(self, algorithm: str) -> Optional[GraphLine]:
        """The first graph line of ``algorithm`` (rank 0 prints its graphs first)."""
        return next((g for g in self.graphs if g.algorithm == algorithm), None)

    def choices_of(self, func: str) -> list[tuple[int, str, str, Optional[float]]]:
        """``(bytes, algorithm, protocol, time_us or None)`` NCCL logged for ``func``; a log
        that names other collectives only raises (it is the log of another collective)."""
        own = [(n, a, p, t) for _, f, n, a, p, t in self.choices if f in (func, "?")]
        if self.choices and not own:
            line, other = self.choices[0][0], self.choices[0][1]
            raise CalibrationError(f"this log's choices are for {other}, not "
                                   f"{func}; pass the log of a run of {func}", path=self.path, line=line)
        return own


def _num(path: str, line: int, text: str, what: str, lo: float, hi: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CalibrationError(f"{what} {excerpt(text)} is not a number; pass the "
                               "log as NCCL wrote it", path=path, line=line) from None
    if not math.isfinite(value) or not lo <= value <= hi:
        raise CalibrationError(f"{what} {text} is out of range [{lo:g}, {hi:g}]; "
                               "pass the log as NCCL wrote it", path=path, line=line)
    return value


def _int(path: str, line: int, text: str, what: str, lo: int, hi: int) -> int:
    value = _num(path, line, text, what, lo, hi)
    if value != int(value):
        raise CalibrationError(f"{what} {text} is not a whole number", path=path, line=line)
    return int(value)


def parse_nccl_log(text: str, path: str = "<log>") -> NcclLog:
    """Read a log from ``text``; raises CalibrationError when it holds no TUNING table and
    no graph, or holds a malformed one."""
    log = NcclLog(path)
    block: list[str] = []  # algorithms of the current table block
    tables_done = False
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if "NCCL INFO" not in line and not line.startswith("NCCL version"):
            continue
        if log.version is None and (m := _VERSION.search(line)):
            log.version = m.group(1)
            if parse_version(log.version) is None:
                raise CalibrationError(f"cannot read NCCL version {excerpt(log.version)}", path=path, line=no)
        elif (m := _COMM.search(line)) and log.n_ranks is None:
            log.n_ranks = _int(path, no, m.group(2), "nRanks", 1, MAX_RANKS)
            log.n_nodes = _int(path, no, m.group(3), "nNodes", 1, log.n_ranks)
            log.local_ranks = _int(path, no, m.group(4), "localRanks", 1, log.n_ranks)
        elif m := _GRAPH.search(line):
            pattern = _int(path, no, m.group(1), "pattern", 1, 6)
            log.graphs.append(GraphLine(
                no, pattern, PATTERNS[pattern],
                _int(path, no, m.group(3), "nChannels", 0, MAX_CHANNELS),
                _num(path, no, m.group(4), "bwIntra", 0.0, 5000.0),
                _num(path, no, m.group(5), "bwInter", 0.0, 5000.0),
                m.group(6), m.group(7), _int(path, no, m.group(8), "sameChannels", 0, 1) == 1))
        elif m := _ALGO_HDR.search(line):
            names = [c.strip() for c in m.group(1).split("|") if c.strip()]
            if log.table and names[:1] == [ALGOS[0]]:
                tables_done = True  # a second table (another communicator): keep the first
            unknown = [n for n in names if n not in ALGOS]
            if unknown:
                raise CalibrationError(f"unknown algorithm {excerpt(unknown[0])} in the "
                                       "TUNING table; this reader knows NCCL 2.19-2.30 tables", path=path, line=no)
            block = [] if tables_done else names
        elif _PROTO_HDR.search(line) or "Max NThreads" in line:
            continue
        elif (m := _ROW.search(line)) and block:
            _read_row(log, path, no, m.group(1), m.group(2), block)
            if m.group(1) == FUNCS[-1]:
                block = []
        elif m := _CHOICE_NEW.search(line):
            log.choices.append((no, m.group(1), _int(path, no, m.group(2), "bytes", 0, 1 << 50),
                                m.group(3).upper(), m.group(4).upper(), None))
        elif m := _ENV.search(line):
            _setting(log, path, no, m.group(1), m.group(2))
        elif m := _CHOICE_OLD.search(line):
            a, p = _int(path, no, m.group(2), "algorithm", 0, 6), _int(path, no, m.group(3), "protocol", 0, 2)
            log.choices.append((no, "?", _int(path, no, m.group(1), "bytes", 0, 1 << 50),
                                ALGOS[a].upper(), PROTOS[p].upper(),
                                _num(path, no, m.group(4), "time", 0.0, MAX_LAT_US)))
    if not log.table and not log.graphs and not log.choices:
        raise CalibrationError("no NCCL TUNING table, GRAPH line or choice line in this file; run "
                               "with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH,TUNING,ENV and pass rank 0's log", path=path)
    return log


def _setting(log: NcclLog, path: str, no: int, name: str, value: str) -> None:
    """A ``NAME set by environment to VALUE`` line: kept once; another value is another run."""
    if len(value) > MAX_SETTING:
        raise CalibrationError(f"{name}'s value is over {MAX_SETTING} characters; pass the log "
                               "as NCCL wrote it", path=path, line=no)
    if name not in ("NCCL_ALGO", "NCCL_PROTO"):
        value = value.removesuffix(".")  # ncclLoadParam's "%lld."
    seen = log.env.get(name)
    if seen is not None and seen[0] != value:
        raise CalibrationError(f"{name} is {excerpt(value)} here and {excerpt(seen[0])} at line "
                               f"{seen[1]}: the log holds two runs; pass one run's log (or "
                               f"--nccl-env {name}=VALUE)", path=path, line=no)
    log.env.setdefault(name, (value, no))


def _read_row(log: NcclLog, path: str, no: int, func: str, rest: str, block: list[str]) -> None:
    cells = [c for c in rest.split("|") if c.strip()]
    if len(cells) < 3 * len(block):
        raise CalibrationError(f"{func} row has {len(cells)} cells for "
                               f"{3 * len(block)} algorithm/protocol pairs; the line is cut", path=path, line=no)
    for i, cell in enumerate(cells[:3 * len(block)]):
        m = _CELL.match(cell)
        if not m:
            raise CalibrationError(f"cell {excerpt(cell.strip())} is not latency/bandwidth", path=path, line=no)
        lat = _num(path, no, m.group(1), "latency", 0.0, MAX_LAT_US)
        bw = _num(path, no, m.group(2), "bandwidth", 0.0, MAX_BW_GBPS)
        log.table[(func, block[i // 3], PROTOS[i % 3])] = (lat, bw, no)


MAX_LOG_BYTES = 256 << 20  # rank 0's GRAPH,TUNING log; a whole job's INFO log is far smaller


def read_nccl_log(path: str) -> NcclLog:
    """:func:`parse_nccl_log` of the file at ``path`` (or ``-``, gzip too), read within
    :data:`MAX_LOG_BYTES`; unreadable, binary or larger: one-line CalibrationError."""
    data = open_input(str(path), CalibrationError, "NCCL debug log", MAX_LOG_BYTES).read()
    return parse_nccl_log(data.decode("utf-8", errors="replace"), str(path))
