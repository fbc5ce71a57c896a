"""Reader of nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``broadcast_perf``): per size, the out-of-place time, algbw and busbw NVIDIA/nccl-tests prints
(src/common.cu: the ``#       size         count      type   redop    root     time   algbw
busbw #wrong ...`` header and one row per size; older releases print ``error`` in place of
``#wrong``). MPI prefixes (``[0] ``, ``...<stdout>:``) and interleaved ``NCCL INFO`` lines are
skipped.

The ``# nThread T nGpus G`` line (nccl-tests src/util.cu:625) gives ``gpus_per_thread``: the G
GPUs one thread drove (``-g G``, default 1), whose kernels it launches one after another.

Refused, each as :class:`~tracecli.errors.CalibrationError` at its ``path:line``: a file with
no nccl-tests header (not nccl-tests output), a row that is cut or has a unit in a number (mixed
units), a row with ``#wrong`` above 0 (the run computed wrong results), only in-place columns
(tracecli reads the out-of-place time), an ``nGpus`` that is not a whole number from 1 to 1024,
a test of another collective than the one asked for,
and output that stops before nccl-tests' closing ``# Avg bus bandwidth`` line (truncated).
Every number is checked for type, finiteness and range where it is read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from ...errors import CalibrationError, excerpt
from ...inputfile import open_input
from ..collectives import NAMES

__all__ = ["NcclTestsRow", "NcclTests", "parse_nccl_tests", "read_nccl_tests", "BINARIES"]

BINARIES = {names.op: names.binary for names in NAMES.values()}
MAX_BYTES = 1 << 50
MAX_FILE_BYTES = 64 << 20  # nccl-tests output of every size of every collective is kilobytes
MAX_US = 1e10
MIN_US = 0.01  # nccl-tests prints times to 0.01 us; a collective takes some time
_PREFIX = re.compile(r"^(?:\[\d+\]\s?|.*<stdout>:)")
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\w+)")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s+Group")
_THREADS = re.compile(r"^#\s*nThread\s+(\S+)\s+nGpus\s+(\S+)")
MAX_GPUS_PER_THREAD = 1024


@dataclass(frozen=True)
class NcclTestsRow:
    bytes: int
    count: int
    dtype: str
    time_us: float  # out-of-place
    algbw_gbps: float
    busbw_gbps: float
    inplace_time_us: Optional[float]
    line: int


@dataclass(frozen=True)
class NcclTests:
    path: str
    binary: Optional[str]  # from "# Collective test starting:", when printed
    ranks: Optional[int]   # "#  Rank N Group ..." lines, when printed
    rows: tuple[NcclTestsRow, ...]
    gpus_per_thread: int = 1  # nccl-tests -g ("# nThread T nGpus G"): GPUs one thread drove

    def time_us(self, nbytes: int) -> Optional[float]:
        return next((r.time_us for r in self.rows if r.bytes == nbytes), None)


def _num(path: str, no: int, text: str, what: str, lo: float, hi: float) -> float:
    try:
        value = float(text)
    except ValueError:
        unit = re.match(r"^[-+.\d]+([A-Za-z/]+)$", text)
        hint = (f"mixed units: {what} carries a unit ({unit.group(1)}); nccl-tests prints bare "
                "numbers (bytes, us, GB/s) - pass its output unchanged") if unit else \
            f"{what} {excerpt(text)} is not a number; pass nccl-tests' output unchanged"
        raise CalibrationError(hint, path=path, line=no) from None
    if not math.isfinite(value) or not lo <= value <= hi:
        raise CalibrationError(f"{what} {text} is out of range [{lo:g}, {hi:g}]", path=path, line=no)
    return value


def parse_nccl_tests(text: str, path: str = "<nccl-tests>", collective: Optional[str] = None) -> NcclTests:
    """Rows of nccl-tests output; ``collective`` (``allreduce`` ...): the test it must be."""
    binary, ranks, header, groups, closed, per_thread = None, 0, None, 0, False, 1
    rows: list[NcclTestsRow] = []
    first = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw).strip()
        if not line or "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        first = first or no
        if m := _STARTING.search(line):
            binary = m.group(1)
            continue
        if _RANK.match(line):
            ranks += 1
            continue
        if m := _THREADS.match(line):
            per_thread = int(_num(path, no, m.group(2), "nGpus", 1, MAX_GPUS_PER_THREAD))
            if per_thread != float(m.group(2)):
                raise CalibrationError(f"nGpus {m.group(2)} is not a whole number of GPUs; "
                                       "pass nccl-tests' output unchanged", path=path, line=no)
            continue
        if line.startswith("#"):
            words = line.lstrip("#").split()
            if words[:2] == ["size", "count"] and "time" in words:
                header = no
                groups = words.count("time")
            elif "out-of-place" not in line and "in-place" in line and header is None:
                groups = -1  # an in-place-only label above the header
            elif line.startswith("# Avg bus bandwidth"):
                closed = True
            continue
        if header is None:
            raise CalibrationError("not nccl-tests output (no '#  size  count  type ... "
                                   "time  algbw  busbw' header before this line); pass the "
                                   "stdout of all_reduce_perf or a sibling test", path=path, line=no)
        if groups == -1 or groups < 2:
            raise CalibrationError("only one (in-place) group of columns; tracecli "
                                   "reads the out-of-place time: run nccl-tests with its default "
                                   "out-of-place and in-place columns", path=path, line=header)
        cols = line.split()
        if len(cols) < 13:
            raise CalibrationError(f"row has {len(cols)} columns, not 13: the output is "
                                   "cut; pass the whole output", path=path, line=no)
        _check_wrong(path, no, cols[8])
        _check_wrong(path, no, cols[12])
        size = int(_num(path, no, cols[0], "size", 0, MAX_BYTES))
        count = int(_num(path, no, cols[1], "count", 0, MAX_BYTES))
        _check_size(path, no, size, count, cols[2])
        rows.append(NcclTestsRow(
            size, count, cols[2],
            _num(path, no, cols[5], "time", MIN_US, MAX_US),
            _num(path, no, cols[6], "algbw", 0.0, 1e6), _num(path, no, cols[7], "busbw", 0.0, 1e6),
            _num(path, no, cols[9], "in-place time", MIN_US, MAX_US), no))
    if header is None:
        raise CalibrationError("not nccl-tests output: no '#  size  count  "
                               "type ... time  algbw  busbw' header; pass the stdout of all_reduce_perf", path=path, line=first or None)
    if not rows:
        raise CalibrationError("no result rows after the header; the run was cut short", path=path, line=header)
    if not closed:
        raise CalibrationError("output stops before nccl-tests' closing "
                               "'# Avg bus bandwidth' line: truncated; pass the whole output", path=path, line=rows[-1].line)
    if collective is not None and binary is not None:
        want = BINARIES.get(collective, collective)
        if not binary.startswith(want):
            raise CalibrationError(f"this is {binary} output, not {want}; pass the "
                                   f"output of {want}", path=path)
    sizes = [r.bytes for r in rows]
    if sizes != sorted(sizes):
        bad = next(r for a, r in zip(rows, rows[1:]) if r.bytes < a.bytes)
        raise CalibrationError("sizes go down here: two runs pasted together; "
                               "pass one run's output", path=path, line=bad.line)
    return NcclTests(path, binary, ranks or None, tuple(rows), per_thread)


# nccl-tests' type names (src/common.cu test_typenames) and their bytes
TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}


def _check_size(path: str, no: int, size: int, count: int, dtype: str) -> None:
    """nccl-tests prints ``size = count x type bytes``, or for all-gather and reduce-scatter
    ``count x type bytes x ranks`` (count per rank): anything else is not its row."""
    word = TYPE_BYTES.get(dtype)
    if word is None or count == 0:
        return
    if size % (count * word) or size // (count * word) > (1 << 20):
        raise CalibrationError(f"size {size} is not count {count} x {word} bytes ({dtype}) (or "
                               "a whole number of ranks of it): not an nccl-tests row; pass "
                               "its output unchanged", path=path, line=no)


def _check_wrong(path: str, no: int, text: str) -> None:
    if text in ("N/A", "0"):
        return
    value = _num(path, no, text, "#wrong", 0.0, 1e30)
    if value > 0 and float(text).is_integer() and "e" not in text.lower() and "." not in text:
        raise CalibrationError(f"#wrong is {text}: this run computed wrong results; "
                               "fix the cluster (or nccl-tests' -c check) before using its times", path=path, line=no)


def read_nccl_tests(path: str, collective: Optional[str] = None) -> NcclTests:
    """:func:`parse_nccl_tests` of the file at ``path`` (or ``-``, gzip too), read within
    :data:`MAX_FILE_BYTES`; unreadable, binary or larger: one-line CalibrationError."""
    data = open_input(str(path), CalibrationError, "nccl-tests table", MAX_FILE_BYTES).read()
    return parse_nccl_tests(data.decode("utf-8", errors="replace"), str(path), collective)
