"""Mutated samples never raise anything but TraceCliError (DESIGN 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecli import LoadOptions, TraceCliError, load_trace, readiness, size_report
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.costs import resolve_cost_model
from tracecli.planning import make_plan

from conftest import RESNET, RESNET_SIZES, VGG

pytestmark = pytest.mark.slow  # hundreds of hypothesis examples through the whole pipeline

SAMPLES = {"vgg": VGG.read_bytes(), "resnet": RESNET.read_bytes(),
           "sizes": RESNET_SIZES.read_bytes()}


@st.composite
def mutations(draw, data: bytes):
    lines = data.split(b"\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            lines = [b""]
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "line", "byte", "truncate", "number"]))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "line":
            lines[i] = draw(st.binary(max_size=30) | st.sampled_from(
                [b"forward", b"backward", b"0 0", b"-1 _", b"{}", b'{"rank": -1}', b"_", b"1 2 3"]))
        elif action == "byte" and lines[i]:
            k = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:k] + bytes([draw(st.integers(0, 255))]) + lines[i][k + 1:]
        elif action == "truncate":
            lines = lines[:i]
        elif action == "number":
            lines[i] = lines[i].replace(b"1", str(draw(st.integers(-5, 10**6))).encode(), 1)
    return b"\n".join(lines)


def check(path, options=None):
    """The whole pipeline on ``path``: it works, or raises a TraceCliError whose message is
    one non-empty line naming a file the user gave (the trace, its sidecar) and a line
    within it."""
    given = {str(path), str(path.with_suffix(".sizes.json"))} | (
        {options.sizes} if options is not None and options.sizes else set())
    try:
        trace = load_trace(path, options)
        ready = readiness(trace)
        size_report(trace, ready)
        # the rest of the pipeline: compute model, then two plans (one greedy, one exact)
        compute = ComputeRequest(device="v100", backward_ms=None if trace.format == "chainer" else 100.0)
        _, _, inp = inputs(trace, compute)
        cost = resolve_cost_model(8, "ib-hdr")
        for strategy in ("ddp", "optimal"):
            make_plan(inp, strategy, {}, cost)
    except TraceCliError as exc:
        assert exc.message.strip() and "\n" not in exc.message and "Traceback" not in exc.message, str(exc)
        assert exc.path is None or exc.path in given, str(exc)
        if exc.line is not None:
            lines = Path(exc.path).read_bytes().count(b"\n") + 1 if exc.path else None
            last = lines + 1 if lines else exc.line  # "ends early" names the line after the last
            assert isinstance(exc.line, int) and 1 <= exc.line <= last, str(exc)


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(data=mutations(SAMPLES["vgg"]))
def test_mutated_chainer_dump(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("m") / "vgg.txt"
    path.write_bytes(data)
    check(path)


@SETTINGS
@given(data=mutations(SAMPLES["resnet"]))
def test_mutated_op_list(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("m")
    (folder / "r.txt").write_bytes(data)
    shutil.copy(RESNET_SIZES, folder / "r.sizes.json")
    check(folder / "r.txt")


@SETTINGS
@given(data=mutations(SAMPLES["sizes"]))
def test_mutated_sizes_sidecar(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("m") / "s.json"
    path.write_bytes(data)
    check(RESNET, LoadOptions(sizes=str(path)))


@SETTINGS
@given(data=mutations(SAMPLES["vgg"]), fmt=st.sampled_from(["chainer", "tf-schedule"]))
def test_forced_format_on_mutated_input(tmp_path_factory, data, fmt):
    path = tmp_path_factory.mktemp("m") / "x.txt"
    path.write_bytes(data)
    check(path, LoadOptions(format=fmt))
