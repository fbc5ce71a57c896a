"""Reader of nccl-tests' JSON file (``-J FILE.json``, ``--output_file``; NVIDIA/nccl-tests from
v2.17.3, 00f5281; src/util.cu at v2.19.6): the same results as its printed output, as data.

nccl-tests writes one object on one line (``jsonStartObject`` ... ``jsonOutputFinalize``,
util.cu:349-405): ``version`` (1-3, each adding keys: 2 and 3 the per-iteration report),
``args`` (its command line: ``args[0]`` names the test), ``config`` (``nthreads``, ``ngpus``:
the GPUs one thread drove, util.cu:643-664, and ``devices``, one entry a process, inside it,
util.cu:702-731) and ``results``, one object a size (util.cu:459-521): ``size``, ``count``, ``type``,
``redop``, ``root`` and ``out_of_place`` / ``in_place`` objects of ``time`` (``cpu_time``
under ``-C 1``), ``alg_bw``, ``bus_bw`` and ``nwrong`` (null without the data check);
``out_of_place`` is null where only in-place ran (``writeBenchMarkLineNullBody``). A NaN is
written as the string ``"nan"`` and an infinity as ``inf`` (``jsonDouble``, ``%lf``: not JSON).

Refused as in the printed output (:mod:`.nccl_tests`), each a one-line CalibrationError at
``path:1`` naming the result: not JSON, or JSON with no ``results`` list; a result that is not
an object, a number of the wrong type, not finite or out of range; ``nwrong`` above 0; CPU
time; only in-place results; another collective than the one asked for; sizes that go down;
``args`` or ``config.devices`` of another shape (they decide the collective and the ranks);
a file a failed run left (a result without both groups, no footer: truncated, as the printed
output without its ``# Avg bus bandwidth`` line) or whose ``out_of_bounds`` count is above 0.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import PurePosixPath
from typing import Any, Optional

from ...errors import CalibrationError
from .nccl_tests import (BINARIES, MAX_BYTES, MAX_GPUS_PER_THREAD, MAX_US, MIN_US, NcclTests,
                         NcclTestsRow, size_problem)

__all__ = ["parse_nccl_tests_json", "MAX_RESULTS"]

MAX_RESULTS = 100_000  # sizes of one run: nccl-tests doubles from 1 byte to 2^50 in 51 steps
MAX_PROCESSES = 1 << 20
FOOTER_KEYS = ("average_bus_bandwidth", "average_bus_bandwidith")


def parse_nccl_tests_json(text: str, path: str, collective: Optional[str] = None) -> NcclTests:
    """The rows of an nccl-tests JSON file; ``collective``: the test it must be."""
    def bad(what: str, line: int = 1) -> CalibrationError:
        return CalibrationError(what, path=path, line=line)

    try:
        doc = json.loads(text, parse_constant=lambda c: c)  # NaN, Infinity: kept as strings
    except RecursionError:
        raise bad("JSON nested deeper than Python reads: not nccl-tests' -J file") from None
    except json.JSONDecodeError as e:
        raise bad(f"not valid JSON ({e.msg}, column {e.colno}): pass nccl-tests' -J file "
                  "unchanged, or its printed output", e.lineno) from None
    except ValueError:  # an integer of more digits than Python converts (4300)
        long = re.search(r"\d{4000,}", text)
        raise bad("a number of thousands of digits: not nccl-tests' -J file, which writes "
                  "sizes, counts and times of at most 20 digits",
                  text.count("\n", 0, long.start()) + 1 if long else 1) from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        raise bad("JSON without nccl-tests' 'results' list: not the file nccl-tests -J writes")
    if not results:
        raise bad("no results in the JSON: the run was cut short")
    if len(results) > MAX_RESULTS:
        raise bad(f"{len(results)} results: more than {MAX_RESULTS}; pass one run's file")
    binary = _binary(doc.get("args"), bad)
    per_thread, ranks = _scale(doc, bad)
    rows = [_row(k, r, len(results), bad) for k, r in enumerate(results, 1)]
    _footer(doc, bad)
    if collective is not None and binary is not None:
        want = BINARIES.get(collective, collective)
        if not binary.startswith(want):
            raise bad(f"this is {binary} output, not {want}; pass the output of {want}")
    for k, (a, b) in enumerate(zip(rows, rows[1:]), 2):
        if b.bytes < a.bytes:
            raise bad(f"result {k}: sizes go down here: two runs in one file; pass one run's")
    return NcclTests(path, binary, ranks, tuple(rows), per_thread)


def _binary(args: Any, bad) -> Optional[str]:
    """The test's name from its command line (``args[0]``: ``./build/all_reduce_perf``);
    ``None`` where the file has no ``args``. Anything else in its place is refused: the name
    decides whether the file is of the collective asked for."""
    if args is None:
        return None
    if not isinstance(args, list) or not args or not isinstance(args[0], str) \
            or not args[0].strip():
        raise bad(f"args is {json.dumps(args)[:40]}, not nccl-tests' command line (a list "
                  "whose first item names the test); pass its -J file unchanged")
    return PurePosixPath(args[0].strip()).name[:200] or None


def _footer(doc: dict, bad) -> None:
    """nccl-tests writes ``out_of_bounds`` and ``average_bus_bandwidth`` after the last result
    of a run that finished (``writeResultFooter``, util.cu:771-792); a run that failed part
    way still leaves valid JSON, its open objects closed by ``jsonOutputFinalize``
    (util.cu:387-400), with neither."""
    # v2.17.3-v2.17.8 wrote the key misspelt (nccl-tests 85ca91d fixed it in v2.17.9)
    if not any(isinstance(doc.get(k), dict) for k in FOOTER_KEYS):
        raise bad("no 'average_bus_bandwidth' after the results: the run stopped before "
                  "nccl-tests' footer (a failed run's file is closed early); pass a whole run's")
    oob = doc.get("out_of_bounds")
    count = oob.get("count") if isinstance(oob, dict) else oob
    if _int(count, "out_of_bounds.count", 0, 1 << 62, bad) > 0:
        raise bad(f"out_of_bounds.count is {count}: this run computed wrong results; fix the "
                  "cluster (or nccl-tests' -c check) before using its times")


def _scale(doc: dict, bad) -> tuple[int, Optional[int]]:
    """``(GPUs one thread drove, ranks)`` from ``config`` and ``devices`` (``None``: unsaid)."""
    config = doc.get("config")
    if config is None:
        return 1, None
    if not isinstance(config, dict):
        raise bad("'config' is not an object; pass nccl-tests' -J file unchanged")
    gpus = _int(config.get("ngpus", 1), "config.ngpus", 1, MAX_GPUS_PER_THREAD, bad)
    threads = _int(config.get("nthreads", 1), "config.nthreads", 1, MAX_GPUS_PER_THREAD, bad)
    # nccl-tests writes the devices inside config (writeDeviceReport: util.cu:643-731 at v2.19.6)
    devices = config.get("devices", doc.get("devices"))
    if devices is None:
        return gpus, None
    if not isinstance(devices, list) or not devices or len(devices) > MAX_PROCESSES \
            or not all(isinstance(d, dict) for d in devices):
        raise bad(f"config.devices is {json.dumps(devices)[:40]}, not a list of 1 to "
                  f"{MAX_PROCESSES} device objects (one a process); pass the -J file unchanged")
    return gpus, len(devices) * threads * gpus


def _int(value: Any, what: str, lo: int, hi: int, bad) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise bad(f"{what} is {json.dumps(value)[:40]}, not a whole number from {lo} to {hi}")
    return value


def _num(value: Any, what: str, lo: float, hi: float, bad) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not lo <= value <= hi or not math.isfinite(value):  # ints compare exactly
        raise bad(f"{what} is {json.dumps(value)[:40]}, not a number in [{lo:g}, {hi:g}]")
    return float(value)


def _row(k: int, r: Any, n: int, bad) -> NcclTestsRow:
    """Result ``k`` of ``n`` as a row (its ``line`` is 1: nccl-tests writes one line)."""
    at = f"result {k} of {n}"
    if not isinstance(r, dict):
        raise bad(f"{at} is not an object; pass nccl-tests' -J file unchanged")
    size = int(_num(r.get("size"), f"{at}: size", 0, MAX_BYTES, bad))
    count = int(_num(r.get("count"), f"{at}: count", 0, MAX_BYTES, bad))
    dtype = r.get("type")
    if not isinstance(dtype, str) or not dtype or len(dtype) > 40:
        raise bad(f"{at}: type is {json.dumps(dtype)[:40]}, not nccl-tests' type name")
    if size != r.get("size") or count != r.get("count"):
        raise bad(f"{at}: size and count must be whole numbers")
    problem = size_problem(size, count, dtype)
    if problem:
        raise bad(f"{at}: {problem}")
    if "out_of_place" not in r or "in_place" not in r:
        raise bad(f"{at} has no {'out_of_place' if 'out_of_place' not in r else 'in_place'}: "
                  "the run stopped inside this result (a failed run's file is closed early); "
                  "pass a whole run's")
    out, inplace = r.get("out_of_place"), r.get("in_place")
    if out is None:
        raise bad(f"{at}: only in-place results; tracecli reads the out-of-place time: run "
                  "nccl-tests with its default out-of-place and in-place runs")
    times = []
    for name, part in (("out_of_place", out), ("in_place", inplace)):
        if not isinstance(part, dict):
            raise bad(f"{at}: {name} is not an object; pass nccl-tests' -J file unchanged")
        if "cpu_time" in part:
            raise bad(f"{at}: {name} has CPU time (nccl-tests -C 1), not the collective's: "
                      "rerun without -C")
        wrong = part.get("nwrong")
        if wrong is not None and _num(wrong, f"{at}: {name}.nwrong", 0, 1e30, bad) > 0:
            raise bad(f"{at}: {name}.nwrong is {wrong:g}: this run computed wrong results; fix "
                      "the cluster (or nccl-tests' -c check) before using its times")
        times.append((_num(part.get("time"), f"{at}: {name}.time", MIN_US, MAX_US, bad),
                      _num(part.get("alg_bw"), f"{at}: {name}.alg_bw", 0.0, 1e6, bad),
                      _num(part.get("bus_bw"), f"{at}: {name}.bus_bw", 0.0, 1e6, bad)))
    (us, algbw, busbw), rest = times[0], times[1]
    return NcclTestsRow(size, count, dtype, us, algbw, busbw, rest[0], 1)
