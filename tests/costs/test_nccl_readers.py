"""Bad input to the nccl-tests and NCCL-log readers: one CalibrationError with path and line."""

from pathlib import Path

import pytest

from tracecli.costs.nccl.nccl_tests import parse_nccl_tests, read_nccl_tests
from tracecli.costs.nccl.nccllog import parse_nccl_log
from tracecli.errors import CalibrationError, TraceCliError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
GOOD = (FIX / "ebpf_rtx5090_2x1_broadcast_perf.txt").read_text()
LINES = GOOD.splitlines()
FIRST_ROW = next(i for i, l in enumerate(LINES) if l.strip().startswith("1024"))


def _bad(text, **kw):
    with pytest.raises(CalibrationError) as e:
        parse_nccl_tests(text, "out.txt", **kw)
    assert isinstance(e.value, TraceCliError) and str(e.value).startswith("out.txt")
    return e.value


def test_the_real_output_reads():
    r = read_nccl_tests(str(FIX / "ebpf_rtx5090_2x1_broadcast_perf.txt"), "broadcast")
    assert r.binary == "broadcast_perf_mpi" and r.ranks == 2 and len(r.rows) == 18
    assert (r.rows[0].bytes, r.rows[0].time_us, r.rows[-1].busbw_gbps) == (1024, 143.97, 3.77)


def test_truncated_output():
    e = _bad("\n".join(LINES[:FIRST_ROW + 5]))
    assert e.line == FIRST_ROW + 5 and "truncated" in e.message
    cut = LINES[:FIRST_ROW + 3] + [LINES[FIRST_ROW + 3][:40]]
    e = _bad("\n".join(cut))
    assert e.line == FIRST_ROW + 4 and "cut" in e.message


def test_wrong_results():
    rows = list(LINES)
    rows[FIRST_ROW + 2] = rows[FIRST_ROW + 2].replace("0.07       0", "0.07       3", 1)
    e = _bad("\n".join(rows))
    assert e.line == FIRST_ROW + 3 and "#wrong is 3" in e.message


def test_mixed_units():
    rows = list(LINES)
    rows[FIRST_ROW + 1] = rows[FIRST_ROW + 1].replace("56.79", "56.79us")
    e = _bad("\n".join(rows))
    assert e.line == FIRST_ROW + 2 and "mixed units" in e.message


def test_only_in_place_columns():
    text = ("#  in-place\n#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
            "        1024           256     float    none       0    55.84    0.02    0.02       0\n")
    e = _bad(text)
    assert e.line == 2 and "in-place" in e.message


def test_not_nccl_tests_output():
    e = _bad("hello\nworld\n")
    assert e.line == 1 and "not nccl-tests output" in e.message


def test_another_collective():
    e = _bad(GOOD, collective="allreduce")
    assert "broadcast_perf_mpi output, not all_reduce_perf" in e.message


def test_nan_in_a_row():
    rows = list(LINES)
    rows[FIRST_ROW] = rows[FIRST_ROW].replace("143.97", "nan")
    e = _bad("\n".join(rows))
    assert e.line == FIRST_ROW + 1 and "out of range" in e.message


def test_nccl_log_bad_input():
    with pytest.raises(CalibrationError, match="no NCCL TUNING table"):
        parse_nccl_log("just text\n", "x.log")
    hdr = ("h:1:1 [0] NCCL INFO   Algorithm   |  Tree | Ring | CollNetDirect |\n"
           "h:1:1 [0] NCCL INFO   Protocol    |  LL |\n")
    with pytest.raises(CalibrationError) as e:
        parse_nccl_log(hdr + "h:1:1 [0] NCCL INFO     Broadcast |     0.0/   0.0 |\n", "x.log")
    assert e.value.line == 3 and "cut" in e.value.message
    with pytest.raises(CalibrationError) as e:
        parse_nccl_log("h [0] NCCL INFO Pattern 4, crossNic 0, nChannels 999, bw 20.0/20.0, "
                       "type NVL/PIX, sameChannels 1\n", "x.log")
    assert e.value.line == 1 and "nChannels" in e.value.message
