"""Reader of nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``broadcast_perf``): per size, the out-of-place time, algbw and busbw NVIDIA/nccl-tests prints
(src/common.cu: the ``#       size         count      type   redop    root     time   algbw
busbw #wrong ...`` header and one row per size; older releases print ``error`` in place of
``#wrong``). MPI prefixes (``[0] ``, ``...<stdout>:``), Slurm's ``srun -l`` labels (``0: ``)
and interleaved ``NCCL INFO`` lines are skipped.

The ``# nThread T nGpus G`` line (nccl-tests src/util.cu:625) gives ``gpus_per_thread``: the G
GPUs one thread drove (``-g G``, default 1), whose kernels it launches one after another.

The columns are read where the header names them (:class:`Layout`), so every layout
nccl-tests has printed reads: the one of 2021-2026 (``size count type redop root time algbw
busbw #wrong`` twice, src/common.cu from 1ae8cdc, src/util.cu:756-758 at v2.19.6), the older
per-test headers without ``root`` (all_gather_perf: no ``redop`` either) and with ``error`` for
``#wrong`` (src/all_reduce.cu:11-14 at cbe7f65, 2019), the per-iteration report (``-I``:
``i_min i_max i_p99 i_cv%`` after each group, util.cu:745-754, 2026) and the timestamp suffix
(``timestamp``: two more words a row, util.cu:740-742, 2025).

Refused, each as :class:`~tracecli.errors.CalibrationError` at its ``path:line``: a file with
no nccl-tests header (not nccl-tests output; its JSON file, ``-J``, is read by
:mod:`.nccl_tests_json`), a header whose time columns are CPU time
(``cputime``, nccl-tests ``-C 1``: not the collective's time), a row that is cut or has a unit
in a number (mixed units), a row with ``#wrong`` above 0 (the run computed wrong results), only
in-place columns (tracecli reads the out-of-place time), an ``nGpus`` that is not a whole
number from 1 to 1024,
a test of another collective than the one asked for,
and output that stops before nccl-tests' closing ``# Avg bus bandwidth`` line (truncated).
Every number is checked for type, finiteness and range where it is read.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Optional

from ...errors import CalibrationError, excerpt
from ...inputfile import open_input
from ..collectives import NAMES

__all__ = ["NcclTestsRow", "NcclTests", "Layout", "parse_nccl_tests", "read_nccl_tests", "BINARIES",
           "size_problem"]

BINARIES = {names.op: names.binary for names in NAMES.values()}
MAX_BYTES = 1 << 50
MAX_FILE_BYTES = 64 << 20  # nccl-tests output of every size of every collective is kilobytes
MAX_US = 1e10
MIN_US = 0.01  # nccl-tests prints times to 0.01 us; a collective takes some time
_PREFIX = re.compile(r"^(?:\[\d+\]\s?|.*<stdout>:|\s*\d+: )")  # mpirun; Slurm's srun -l
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\w+)")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s+Group")
_THREADS = re.compile(r"^#\s*nThread\s+(\S+)\s+nGpus\s+(\S+)")
MAX_GPUS_PER_THREAD = 1024


@dataclass(frozen=True)
class Layout:
    """Where a row's values are, as its header names them: the word indices of ``type`` and of
    each group's ``time`` (``algbw``, ``busbw`` and ``#wrong``/``error`` follow it), and how many
    words a row has at least."""

    dtype: int
    times: tuple[int, ...]
    words: int
    counts_wrong: bool = True  # '#wrong' (a count), not 2019's 'error' (the largest difference)

    @classmethod
    def of(cls, path: str, no: int, words: list[str]) -> "Layout":
        """The layout of header ``words`` (``size count type ...``, ``#`` removed)."""
        if "cputime" in words:
            raise CalibrationError("the time columns are CPU time (nccl-tests -C 1), not the "
                                   "collective's: rerun without -C", path=path, line=no)
        times = tuple(i for i, w in enumerate(words) if w == "time")
        for t in times:
            if words[t + 1:t + 3] != ["algbw", "busbw"] or t + 3 >= len(words) \
                    or words[t + 3] not in ("#wrong", "error"):
                raise CalibrationError("a header nccl-tests does not print ('time' not followed "
                                       "by 'algbw busbw #wrong'); pass its output unchanged",
                                       path=path, line=no)
        if "type" not in words:
            raise CalibrationError("a header with no 'type' column; pass nccl-tests' output "
                                   "unchanged", path=path, line=no)
        dtype = words.index("type")
        return cls(dtype, times, max(max(times, default=0) + 4, dtype + 1),
                   all(words[t + 3] == "#wrong" for t in times))


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


def _is_json(text: str) -> bool:
    """Whether ``text`` is JSON (a list, here), not output whose first line is a bracketed
    tag such as OpenMPI's ``[node01:1234] warning: ...`` or ``[1,0]<stderr>:``."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def parse_nccl_tests(text: str, path: str = "<nccl-tests>", collective: Optional[str] = None) -> NcclTests:
    """Rows of nccl-tests output; ``collective`` (``allreduce`` ...): the test it must be."""
    text = text.removeprefix("\ufeff")  # a byte-order mark an editor left
    if text.lstrip().startswith("{"):  # its -J file
        from .nccl_tests_json import parse_nccl_tests_json
        return parse_nccl_tests_json(text, path, collective)
    binary, ranks, header, groups, closed, per_thread = None, 0, None, 0, False, 1
    layout = Layout(2, (), 0)
    rows: list[NcclTestsRow] = []
    first = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw).strip()
        if not line or "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        if not first and (line.startswith("{") or line.startswith("[") and _is_json(text)):
            raise CalibrationError("JSON that is not nccl-tests' -J file (an object with "
                                   "its 'results'): pass that file, or the stdout of "
                                   "all_reduce_perf or a sibling test", path=path, line=no)
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
            if words[:2] == ["size", "count"] and ("time" in words or "cputime" in words):
                header = no
                layout = Layout.of(path, no, words)
                groups = len(layout.times)
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
        # writeBenchMarkLineNullBody (util.cu:479-484 at v2.19.6) prints 32 spaces for it (a
        # timestamp suffix, util.cu:513, may follow the in-place group)
        if len(cols) < layout.words and len(layout.times) == 2 and " " * 30 in line:
            raise CalibrationError("no out-of-place result in this row (nccl-tests prints only "
                                   "the in-place group when replaying a trace); tracecli reads "
                                   "the out-of-place time: run nccl-tests with its default "
                                   "out-of-place and in-place runs", path=path, line=no)
        if len(cols) < layout.words:
            raise CalibrationError(f"row has {len(cols)} columns, not {layout.words}: the "
                                   "output is cut; pass the whole output", path=path, line=no)
        out, inplace = layout.times[:2]
        _check_wrong(path, no, cols[out + 3], layout.counts_wrong)
        _check_wrong(path, no, cols[inplace + 3], layout.counts_wrong)
        size = _whole(path, no, cols[0], "size")
        count = _whole(path, no, cols[1], "count")
        dtype = cols[layout.dtype]
        _check_size(path, no, size, count, dtype)
        rows.append(NcclTestsRow(
            size, count, dtype,
            _num(path, no, cols[out], "time", MIN_US, MAX_US),
            _num(path, no, cols[out + 1], "algbw", 0.0, 1e6),
            _num(path, no, cols[out + 2], "busbw", 0.0, 1e6),
            _num(path, no, cols[inplace], "in-place time", MIN_US, MAX_US), no))
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


def size_problem(size: int, count: int, dtype: str) -> Optional[str]:
    """nccl-tests prints ``size = count x type bytes``, or for all-gather and reduce-scatter
    ``count x type bytes x ranks`` (count per rank): anything else is not its row (what is
    wrong, in words; ``None``: nothing)."""
    word = TYPE_BYTES.get(dtype)
    if word is None or count == 0:
        return None
    if size % (count * word) or size // (count * word) > (1 << 20):
        return (f"size {size} is not count {count} x {word} bytes ({dtype}) (or a whole "
                "number of ranks of it): not an nccl-tests row; pass its output unchanged")
    return None


def _check_size(path: str, no: int, size: int, count: int, dtype: str) -> None:
    problem = size_problem(size, count, dtype)
    if problem:
        raise CalibrationError(problem, path=path, line=no)


def _whole(path: str, no: int, text: str, what: str) -> int:
    """A size or count: a whole number of bytes or elements from 0 to :data:`MAX_BYTES`."""
    value = _num(path, no, text, what, 0, MAX_BYTES)
    if not value.is_integer():
        raise CalibrationError(f"{what} {text} is not a whole number; pass nccl-tests' output "
                               "unchanged", path=path, line=no)
    return int(value)


def _check_wrong(path: str, no: int, text: str, counted: bool = True) -> None:
    """``#wrong`` (``counted``: a count of wrong elements, ``%6g``: 1.2e+06 is 1.2 million,
    src/util.cu:505 at v2.19.6) above 0 is a run that computed wrong results; 2019's
    ``error`` column is the largest difference found (``%5.0le``), where small ones are a
    float reduction's rounding: only its form is checked."""
    if text in ("N/A", "0"):
        return
    value = _num(path, no, text, "#wrong", 0.0, 1e30)
    if counted and value > 0:
        raise CalibrationError(f"#wrong is {text}: this run computed wrong results; "
                               "fix the cluster (or nccl-tests' -c check) before using its times", path=path, line=no)


def read_nccl_tests(path: str, collective: Optional[str] = None) -> NcclTests:
    """:func:`parse_nccl_tests` of the file at ``path`` (or ``-``, gzip too), read within
    :data:`MAX_FILE_BYTES`; unreadable, binary or larger: one-line CalibrationError."""
    data = open_input(str(path), CalibrationError, "nccl-tests table", MAX_FILE_BYTES).read()
    return parse_nccl_tests(data.decode("utf-8", errors="replace"), str(path), collective)
