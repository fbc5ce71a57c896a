"""Bad input to the nccl-tests and NCCL-log readers: one CalibrationError with path and line."""

from pathlib import Path

import pytest

from tracecli.costs.nccl.nccl_tests import parse_nccl_tests, read_nccl_tests
from tracecli.costs.nccl.nccllog import parse_nccl_log
from tracecli.errors import CalibrationError, TraceCliError
from nccl_json_writer import as_json as _as_json

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


# nccl-tests' layouts, printed with its own printf formats (NVIDIA/nccl-tests): the header of
# src/util.cu:756-760 (v2.19.6, per-iteration 745-754, timestamp 740-742), the old per-test
# headers of src/all_reduce.cu and src/all_gather.cu:11-14 (cbe7f65), a row's preamble
# util.cu:writeBenchmarkLinePreamble and body writeBenchmarkLineBody / writePerIterReport.
def _hdr(words, units):
    return "# " + "  ".join(f"{w:>{n}}" for w, n in words) + "\n# " + "  ".join(
        f"{u:>{n}}" for u, (_, n) in zip(units, words))


def _table(header, rows):
    return ("# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#\n" + header + "\n" + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 0.01 \n#\n")


NEW = [("size", 10), ("count", 12), ("type", 8), ("redop", 6), ("root", 6)]
GROUP = [("time", 7), ("algbw", 6), ("busbw", 6), ("#wrong", 6)]
ITER = [("i_min", 7), ("i_max", 7), ("i_p99", 7), ("i_cv%", 7)]


def _pre(size, count, typ="float", op="sum", root=-1):
    return "%12li  %12li  %8s  %6s  %6s" % (size, count, typ, op, "%6i" % root)


def _body(us, wrong=0):
    return "  %7s  %6s  %6s  %6g" % (f"{us:.2f}", "0.00", "0.00", wrong)


def test_per_iteration_report_reads_the_group_times():
    head = _hdr(NEW + GROUP + ITER + GROUP + ITER, ["(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)"] * 1
                + ["(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)"])
    it = "  %7s  %7s  %7s  %7s" % ("30.10", "99.50", "95.00", "12.5")
    r = parse_nccl_tests(_table(head, [_pre(8, 2) + _body(31.25) + it + _body(33.5) + it,
                                       _pre(16, 4) + _body(32.0) + it + _body(34.75, 0) + it]))
    assert [(x.bytes, x.time_us, x.inplace_time_us) for x in r.rows] == [(8, 31.25, 33.5),
                                                                          (16, 32.0, 34.75)]
    bad = _table(head, [_pre(8, 2) + _body(31.25) + it + _body(33.5, 7) + it])
    assert "#wrong is 7" in _bad(bad).message  # the in-place group's #wrong, not i_cv%


def test_timestamp_suffix_reads():
    head = _hdr(NEW + GROUP + GROUP + [("timestamp", 19)], [""] * 14)
    r = parse_nccl_tests(_table(head, [_pre(8, 2) + _body(20.5) + _body(21.0)
                                       + "%21s" % "2025-10-28 09:15:02"]))
    assert (r.rows[0].time_us, r.rows[0].inplace_time_us) == (20.5, 21.0)
    # a trace replay's row (no out-of-place group: 32 spaces) with the timestamp after it
    replay = _table(head, [_pre(8, 2) + " " * 32 + _body(21.0) + "%21s" % "2025-10-28 09:15:02"])
    assert "no out-of-place result" in _bad(replay).message


def test_a_bracketed_tag_before_the_output_is_not_taken_for_json():
    tagged = "[node01:1234] warning: a high-performance network was not found\n" + GOOD
    e = _bad(tagged)
    assert e.line == 1 and "not nccl-tests output" in e.message and "JSON" not in e.message
    for tag in ("[1,0]<stderr>: a warning", "[2024-05-01 10:00:00] starting"):
        e = _bad(tag + "\n" + GOOD)  # OpenMPI's stderr tag, a launcher's timestamp
        assert "not nccl-tests output" in e.message and "JSON" not in e.message
    for listed in ("[1, 2]", '["a"]', "[]", '[\n  {"size": 8}\n]'):
        assert "JSON that is not nccl-tests' -J file" in _bad(listed).message


def test_old_headers_without_root_read():
    old = [("time", 7), ("algbw", 6), ("busbw", 6), ("error", 5)]
    body = lambda us: "  %7s  %6.2f  %6.2f  %5.0le" % (f"{us:.2f}", 0.0, 0.0, 0.0)  # noqa: E731
    ar = _hdr([("size", 10), ("count", 12), ("type", 6), ("redop", 6)] + old + old, [""] * 12)
    r = parse_nccl_tests(_table(ar, ["%12li  %12li  %6s  %6s" % (8, 2, "float", "sum")
                                     + body(40.5) + body(41.0)]))
    assert (r.rows[0].bytes, r.rows[0].dtype, r.rows[0].time_us, r.rows[0].inplace_time_us) \
        == (8, "float", 40.5, 41.0)
    ag = _hdr([("size", 10), ("count", 12), ("type", 6)] + old + old, [""] * 11)
    r = parse_nccl_tests(_table(ag, ["%12li  %12li  %6s" % (16, 2, "float") + body(12.25)
                                     + body(12.5)]))
    assert (r.rows[0].time_us, r.rows[0].inplace_time_us) == (12.25, 12.5)
    cut = _table(ag, ["%12li  %12li  %6s" % (16, 2, "float") + body(12.25)])
    assert "row has 7 columns, not 11" in _bad(cut).message


def test_cpu_time_columns_are_refused():
    cpu = [("cputime", 7)] + GROUP[1:]
    head = _hdr(NEW + cpu + cpu, [""] * 13)
    e = _bad(_table(head, [_pre(8, 2) + _body(20.5) + _body(21.0)]))
    assert e.line == 3 and "CPU time" in e.message and "-C" in e.message


def test_a_header_nccl_tests_never_prints_is_refused():
    head = _hdr(NEW + [("time", 7), ("busbw", 6), ("algbw", 6), ("#wrong", 6)] + GROUP, [""] * 13)
    assert "does not print" in _bad(_table(head, [_pre(8, 2) + _body(1) + _body(1)])).message


def test_nccl_tests_json_file_reads_as_its_printed_output():
    printed = parse_nccl_tests(GOOD)
    r = parse_nccl_tests(_as_json(printed.rows), "out.json", "broadcast")
    assert r.binary == "broadcast_perf_mpi" and r.ranks == 2 and r.gpus_per_thread == 1
    assert [(x.bytes, x.count, x.time_us, x.algbw_gbps, x.busbw_gbps, x.inplace_time_us)
            for x in r.rows] == [(x.bytes, x.count, x.time_us, x.algbw_gbps, x.busbw_gbps,
                                  x.inplace_time_us) for x in printed.rows]
    assert parse_nccl_tests(_as_json(printed.rows, ngpus=4), "o.json").ranks == 8


def test_a_json_file_of_another_rank_count_is_refused_by_the_cli(tmp_path):
    from conftest import run

    f = tmp_path / "bc.json"
    f.write_text(_as_json(parse_nccl_tests(GOOD).rows))  # 2 ranks: its devices in its config
    r = run("collective", "broadcast", "--platform", "dgx-h100", "--nodes", "2",
            "--measured", f)
    assert r.exit_code == 2 and "2 ranks" in r.output and "16" in r.output, r.output


def test_nccl_tests_counts_of_wrong_elements_in_g_form_are_wrong_results():
    rows = list(LINES)
    rows[FIRST_ROW + 2] = rows[FIRST_ROW + 2].replace("0.07       0", "0.07  1.2e+06", 1)
    e = _bad("\n".join(rows))  # %6g of 1,200,000 wrong elements (util.cu:505)
    assert e.line == FIRST_ROW + 3 and "#wrong is 1.2e+06" in e.message


def test_hostile_headers_and_numbers_are_one_line():
    type_last = _hdr([("size", 10), ("count", 12)] + GROUP + GROUP + [("type", 8)], [""] * 11)
    assert "row has" in _bad(_table(type_last, ["%12li  %12li" % (8, 2) + _body(1) + _body(1)
                                                ])).message
    half = _table(_hdr(NEW + GROUP + GROUP, [""] * 13), [_pre(8, 2).replace("     2", "   2.5")
                                                         + _body(1) + _body(1)])
    assert "count 2.5 is not a whole number" in _bad(half).message
    null_body = _table(_hdr(NEW + GROUP + GROUP, [""] * 13), [_pre(8, 2) + " " * 32 + _body(1)])
    assert "no out-of-place result" in _bad(null_body).message
    text = _as_json(parse_nccl_tests(GOOD).rows)
    huge = text.replace('"size":1024,', '"size":%s,' % ("9" * 400), 1)
    assert "result 1 of 18: size is 999" in _bad(huge).message
    r = parse_nccl_tests("\ufeff" + GOOD)  # a byte-order mark an editor left
    assert len(r.rows) == 18


def test_nccl_tests_json_bad_input():
    rows = parse_nccl_tests(GOOD).rows
    text = _as_json(rows)
    e = _bad(text, collective="allreduce")
    assert e.line == 1 and "broadcast_perf_mpi output, not all_reduce_perf" in e.message
    assert "not valid JSON" in _bad(text[:len(text) // 2]).message  # cut: truncated
    assert "JSON without" in _bad('{"version": 3, "config": {}}').message
    assert "CPU time" in _bad(_as_json(rows, cpu_time="1.000000")).message
    assert "nwrong is 3" in _bad(_as_json(rows, nwrong="3.000000")).message
    nan = _bad(text.replace('"time":%f' % rows[2].time_us, '"time":"nan"', 1))
    assert "result 3 of 18: out_of_place.time" in nan.message
    assert "not valid JSON" in _bad(text.replace("%f" % rows[0].time_us, "inf", 1)).message
    assert "only in-place" in _bad(text.replace('"out_of_place":{', '"out_of_place":null,"x":{',
                                                1)).message
    assert "sizes go down" in _bad(_as_json(rows[3:] + rows[:3])).message
    assert "config.ngpus" in _bad(text.replace('"ngpus":1', '"ngpus":0')).message
    assert "size 1025 is not count" in _bad(text.replace('"size":1024,', '"size":1025,', 1)).message
    assert "nested deeper" in _bad('{"results":' + "[" * 100_000 + "]" * 100_000 + "}").message
    e = _bad("[1, 2]")
    assert e.line == 1 and "not nccl-tests' -J file" in e.message


def test_a_json_file_a_failed_run_left_is_refused():
    """nccl-tests closes a failed run's file early (jsonOutputFinalize): valid JSON without
    the footer writeResultFooter writes, perhaps cut inside a result; the printed output of
    the same run lacks its '# Avg bus bandwidth' line and is refused too."""
    rows = parse_nccl_tests(GOOD).rows
    text = _as_json(rows)
    footer = text.index(',"out_of_bounds"')
    no_footer = text[:footer] + ',"errors":[""],"end_time":"x"}'
    assert "stopped before nccl-tests' footer" in _bad(no_footer).message
    cut = text[:text.rindex(',"in_place"')] + "}]}"  # the last result without its in-place run
    e = _bad(cut)
    assert "result 18 of 18 has no in_place" in e.message and "stopped inside" in e.message
    no_out = text.replace('"out_of_place":{', '"x":{', 1)
    assert "result 1 of 18 has no out_of_place" in _bad(no_out).message
    wrong = text.replace('"out_of_bounds":{"count":0', '"out_of_bounds":{"count":7', 1)
    assert "out_of_bounds.count is 7" in _bad(wrong).message
    assert "out_of_bounds.count" in _bad(text.replace('{"count":0', '{"count":"0"', 1)).message


def test_json_fields_that_decide_the_collective_and_ranks_are_checked():
    text = _as_json(parse_nccl_tests(GOOD).rows)
    devices = text[text.index('"devices":['):text.index('},"results"')]
    e = _bad(text.replace(devices, '"devices":"two"'), collective="broadcast")
    assert "config.devices is \"two\"" in e.message
    assert "config.devices" in _bad(text.replace(devices, '"devices":[1,2]')).message
    args = text[text.index('"args":['):text.index(',"env"')]
    assert "args is [3]" in _bad(text.replace(args, '"args":[3]'), collective="allreduce").message
    without = parse_nccl_tests(text.replace(args + ",", ""), "o.json", "allreduce")
    assert without.binary is None  # a file with no command line: the collective is unsaid
    huge = text.replace('"size":1024,', '"size":%s,' % ("9" * 5000), 1)
    e = _bad(huge)
    assert "thousands of digits" in e.message and "set_int_max_str_digits" not in e.message
    e = _bad(huge.replace(',"results":[', ',\n"results":[\n', 1))  # laid out on lines
    assert e.line == 3 and "thousands of digits" in e.message


def test_a_json_file_of_nccl_tests_2_17_3_to_2_17_8_reads():
    """v2.17.3-v2.17.8 wrote the footer's key misspelt (nccl-tests 85ca91d, fixed in v2.17.9):
    a finished run of theirs is read, not refused as truncated."""
    rows = parse_nccl_tests(GOOD).rows
    old = _as_json(rows).replace('"average_bus_bandwidth":{"bandwidth"',
                                 '"average_bus_bandwidith":{"bandwidith"')
    assert len(parse_nccl_tests(old, "old.json").rows) == len(rows)


def test_slurm_labels_are_skipped():
    labelled = "\n".join(("  0: " + line) if line else line for line in GOOD.splitlines())
    r = parse_nccl_tests(labelled)
    assert [(x.bytes, x.time_us) for x in r.rows] == [(x.bytes, x.time_us) for x in
                                                       parse_nccl_tests(GOOD).rows]
