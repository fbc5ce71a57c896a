"""Commands through click's CliRunner: output, JSON contracts, and every error path."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import networkx as nx
import pytest

from conftest import FIXTURES, RESNET, RESNET_SIZES, VGG, assert_error, check_golden, run

MLP = (FIXTURES / "mlp_chainer.txt").read_text()


def test_inspect_vgg_json_contract():
    result = run("inspect", VGG, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["trace"] == {**doc["trace"], "path": str(VGG), "format": "chainer", "ops": 92,
                            "tensors": 86}
    assert doc["parameters"]["count"] == 38 and doc["parameters"]["bytes"] == 574_668_960
    assert len(doc["gradients"]) == 38 and len(doc["layers"]) == 19
    first = doc["gradients"][0]
    assert {"name", "layer", "bytes", "ready_index"} <= set(first)
    assert first["layer"] == "/predictor/fc8" and doc["gradients"][-1]["layer"] == "/predictor/conv1_1"
    assert [g["ready_index"] for g in doc["gradients"]] == list(range(38))
    assert {"name", "params", "bytes"} <= set(doc["layers"][0])
    assert doc["layers"][-1]["cumulative_bytes"] == 574_668_960
    assert doc["statistics"]["total"] == 574_668_960
    assert sum(c["count"] for c in doc["statistics"]["histogram"]) == 38


def test_inspect_resnet_json():
    doc = json.loads(run("inspect", RESNET, "--json").stdout)
    assert len(doc["gradients"]) == 214 and doc["parameters"]["bytes"] == 102_334_368
    assert [g["name"] for g in doc["gradients"][:2]] == ["predictions/bias:0", "predictions/kernel:0"]
    assert doc["gradients"][-1]["layer"] == "conv1_conv"
    assert doc["gradients"][0]["shape"] == [1000] and doc["gradients"][0]["dtype"] == "float32"


def test_inspect_is_deterministic():
    assert run("inspect", RESNET, "--json").stdout == run("inspect", RESNET, "--json").stdout
    assert run("inspect", VGG).stdout == run("inspect", VGG).stdout


def test_inspect_table_golden():
    result = run("inspect", FIXTURES / "mlp_chainer.txt", "--per-gradient",
                 env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert result.exit_code == 0
    check_golden("inspect_mlp.txt", result.stdout.replace(str(FIXTURES), "FIXTURES"))


def test_inspect_top_shortens_tables():
    result = run("inspect", RESNET, "--top", "3")
    assert result.exit_code == 0
    assert "104 more rows" in result.stdout
    readiness_part = result.stdout.split("Gradient sizes")[0]
    assert "predictions" in readiness_part and "conv5_block3_3_conv" in readiness_part
    assert "conv5_block3_2_bn" not in readiness_part and "conv1_conv" not in readiness_part


def test_inspect_sizes_override_and_unknown_sizes(tmp_path):
    trace = tmp_path / "r.txt"
    trace.write_text(RESNET.read_text())
    result = run("inspect", trace, "--json")
    doc = json.loads(result.stdout)
    assert doc["gradients"][0]["bytes"] is None and doc["parameters"]["bytes"] is None
    assert "sizes unknown" in run("inspect", trace).stdout
    doc = json.loads(run("inspect", trace, "--sizes", RESNET_SIZES, "--json").stdout)
    assert doc["parameters"]["bytes"] == 102_334_368


def test_export_json_and_graphml(tmp_path):
    out = tmp_path / "g.json"
    assert run("export", VGG, "--to", "json", "-o", out).exit_code == 0
    data = json.loads(out.read_text())
    try:
        graph = nx.node_link_graph(data, edges="links")
    except TypeError:  # networkx < 3.4
        graph = nx.node_link_graph(data)
    assert graph.number_of_nodes() == 86 + 92
    kinds = {d["kind"] for _, _, d in graph.edges(data=True)}
    assert kinds == {"data", "gradient", "backward_of"}
    gml = tmp_path / "g.graphml"
    assert run("export", RESNET, "--to", "graphml", "-o", gml).exit_code == 0
    graph = nx.read_graphml(gml)
    assert graph.number_of_nodes() == 2467 + 214
    assert graph.nodes["v0"]["name"] == "conv1_conv/kernel:0"
    ET.parse(gml)  # well-formed XML


def test_export_never_overwrites_without_force(tmp_path):
    out = tmp_path / "g.json"
    out.write_text("keep")
    assert_error(run("export", VGG, "--to", "json", "-o", out), str(out), "--force")
    assert out.read_text() == "keep"
    assert run("export", VGG, "--to", "json", "-o", out, "--force").exit_code == 0
    assert out.read_text() != "keep"


def test_bad_option_is_usage_error_with_choices():
    result = run("export", VGG, "--to", "dot", "-o", "-")
    assert result.exit_code == 2 and "graphml" in result.stderr and "json" in result.stderr
    result = run("inspect", VGG, "--format", "pb")
    assert result.exit_code == 2 and "chainer" in result.stderr and "tf-schedule" in result.stderr


def mutate(text: str, line: int, new: str | None) -> str:
    lines = text.split("\n")
    if new is None:
        del lines[line - 1]
    else:
        lines[line - 1] = new
    return "\n".join(lines)


CHAINER_ERRORS = [
    ("empty", "", 1, ["empty"]),
    ("blank", "\n\n  \n", 1, ["empty"]),
    ("truncated record", "\n".join(MLP.split("\n")[:40]), 41, ["truncated"]),
    ("truncated tensors", "9 8\n0 1024 0\n", 3, ["truncated"]),
    ("header too many ops", MLP.replace("9 8", "9 9", 1), len(MLP.split("\n")), ["truncated"]),
    ("header too few ops", MLP.replace("9 8", "9 7", 1), 62, ["op count"]),
    ("header too many tensors", MLP.replace("9 8", "10 8", 1), 11, ["tensor line", "count"]),
    ("header one field", mutate(MLP, 1, "9"), 1, ["N_TENSORS N_OPS"]),
    ("unknown tensor id", mutate(MLP, 13, "42 _"), 13, ["unknown tensor id 42"]),
    ("unknown output id", mutate(MLP, 16, "99"), 16, ["unknown tensor id 99"]),
    ("duplicate tensor id", mutate(MLP, 3, "0 32 1"), 3, ["duplicate tensor id 0", "line 2"]),
    ("non-integer size", mutate(MLP, 4, "2 4k /l1/W"), 4, ["'4k'", "not an integer"]),
    ("negative size", mutate(MLP, 4, "2 -4096 /l1/W"), 4, ["negative"]),
    ("non-integer id", mutate(MLP, 4, "x 4096 /l1/W"), 4, ["not an integer"]),
    ("unicode digit", mutate(MLP, 4, "2 ² /l1/W"), 4, ["not an integer"]),
    ("huge number", mutate(MLP, 4, "2 " + "9" * 5000 + " /l1/W"), 4, ["too large"]),
    ("bad json", mutate(MLP, 18, '{"rank": 0'), 18, ["not valid JSON"]),
    ("json not object", mutate(MLP, 18, "[0]"), 18, ["JSON object"]),
    ("missing rank", mutate(MLP, 18, '{"ranks": 0}'), 18, ["rank"]),
    ("bool rank", mutate(MLP, 18, '{"rank": true}'), 18, ["rank"]),
    ("deep json", mutate(MLP, 18, "[" * 100000 + "]" * 100000), 18, ["JSON"]),
    ("bad phase", mutate(MLP, 11, "forwards"), 11, ["'forward' or 'backward'"]),
    ("bad role", mutate(MLP, 13, "0 input"), 13, ["role 'input'", "'_'"]),
    ("bad backward role", mutate(MLP, 41, "8 grad"), 41, ["role 'grad'"]),
    ("bad class", mutate(MLP, 17, "Linear Function"), 17, ["class name"]),
    ("backward without forward", mutate(MLP, 45, '{"rank": 7}'), 39, ["no forward record"]),
    ("produced twice", mutate(MLP, 22, "4"), 19, ["produced by two forward records"]),
    ("cycle", mutate(mutate(mutate(MLP, 13, "7 _"), 65, "7 input"), 68, "7"), 11, ["cycle"]),
]


@pytest.mark.parametrize("text,line,words", [c[1:] for c in CHAINER_ERRORS],
                         ids=[c[0] for c in CHAINER_ERRORS])
def test_chainer_errors(tmp_path, text, line, words):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    assert_error(run("inspect", path, "--format", "chainer"), f"{path}:{line}:", *words)


def test_crlf_files_read_like_lf(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(MLP.replace("\n", "\r\n").encode())
    lf = run("inspect", FIXTURES / "mlp_chainer.txt", "--json").stdout
    crlf = run("inspect", path, "--json").stdout
    assert crlf.replace(str(path), "X") == lf.replace(str(FIXTURES / "mlp_chainer.txt"), "X")
    resnet = tmp_path / "r.txt"
    resnet.write_bytes(RESNET.read_bytes().replace(b"\n", b"\r\n"))
    doc = json.loads(run("inspect", resnet, "--sizes", RESNET_SIZES, "--json").stdout)
    assert doc["gradients"][0]["name"] == "predictions/bias:0"


@pytest.mark.parametrize("data,line", [
    (b"\x00\x01\x02\xff\xfe", 1),
    (b"9 8\n0 1024 0\n\x89PNG\r\n\x1a\n", 3),
    (MLP.encode()[:100] + b"\xff\xfe", MLP.encode()[:100].count(b"\n") + 1),
])
def test_binary_garbage(tmp_path, data, line):
    path = tmp_path / "bin.txt"
    path.write_bytes(data)
    assert_error(run("inspect", path), f"{path}:{line}:", "binary")


def test_unknown_format(tmp_path):
    path = tmp_path / "what.txt"
    path.write_text("hello world\nthis is prose\n")
    assert_error(run("inspect", path), f"{path}:1:", "--format", "chainer", "tf-schedule")
    path.write_text('{"traceEvents": []}\n')
    assert_error(run("inspect", path), f"{path}:1:", "no host events", "ProfilerActivity.CPU")
    path.write_text('[{"ph": "X"}]\n')
    assert_error(run("inspect", path), f"{path}:1:", "JSON list", "traceEvents", "--format")


def test_missing_file_and_directory(tmp_path):
    assert_error(run("inspect", tmp_path / "nope.txt"), str(tmp_path / "nope.txt"), "no such file")
    assert_error(run("inspect", tmp_path), str(tmp_path), "directory")


def test_tf_list_with_bad_line(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("gradient_tape/m/d/MatMul_1\nthis is not a node\n")
    assert_error(run("inspect", path, "--format", "tf-schedule"), f"{path}:2:", "node name")


SIZES_ERRORS = [
    ("not json", "[{", 1, ["invalid JSON"]),
    ("not list", '{"a": 1}', 1, ["JSON list"]),
    ("empty", "", 1, ["empty"]),
    ("empty list", "[]", 1, ["empty"]),
    ("missing field", '[\n{"name": "a/b:0", "shape": [1]}\n]', 2, ["lacks dtype"]),
    ("bad shape", '[\n{"name": "a/b:0", "shape": [1],"dtype":"float32"},\n'
                  '{"name": "a/c:0", "shape": [-1], "dtype": "float32"}]', 3, ["shape"]),
    ("bad dtype", '[{"name": "a/b:0", "shape": [1], "dtype": "float33"}]', 1, ["dtype", "float32"]),
    ("trailing", '[{"name": "a/b:0", "shape": [1], "dtype": "float32"}] x', 1, ["extra data"]),
    ("length", json.dumps(json.loads(RESNET_SIZES.read_text())[:10]), 1, ["has 10 variables", "cond_213"]),
]


@pytest.mark.parametrize("text,line,words", [c[1:] for c in SIZES_ERRORS],
                         ids=[c[0] for c in SIZES_ERRORS])
def test_sizes_errors(tmp_path, text, line, words):
    sizes = tmp_path / "s.json"
    sizes.write_text(text)
    assert_error(run("inspect", RESNET, "--sizes", sizes), f"{sizes}:{line}:", *words)


def test_sizes_with_chainer_is_an_error():
    assert_error(run("inspect", VGG, "--sizes", RESNET_SIZES), str(VGG), "--sizes")


def test_debug_shows_traceback(tmp_path):
    """--debug lets a user error through as itself: the TraceFormatError with its path:line,
    not the one red line, and Python's traceback on stderr with exit status 1."""
    import subprocess
    import sys

    from tracecli.errors import TraceFormatError

    path = tmp_path / "e.txt"
    path.write_text("")
    result = run("--debug", "inspect", path)
    assert type(result.exception) is TraceFormatError
    assert str(result.exception).startswith(f"{path}:1: file is empty")
    assert result.exit_code == 1 and result.stderr == "" and result.stdout == ""
    plain = run("inspect", path)
    assert plain.exception is None or isinstance(plain.exception, SystemExit)
    assert_error(plain, f"{path}:1:", "file is empty")
    out = subprocess.run([sys.executable, "-m", "tracecli", "--debug", "inspect", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("Traceback (most recent call last):"), out.stderr
    assert out.stderr.rstrip().splitlines()[-1] == (
        f"tracecli.errors.TraceFormatError: {path}:1: file is empty; pass a Chainer dump, "
        "a TensorFlow op list or a PyTorch profiler trace")


def test_a_bug_is_one_line_and_debug_shows_it(monkeypatch):
    import tracecli.pipeline.trace as pipeline

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(pipeline, "readiness", broken)
    result = run("inspect", VGG)
    assert result.exit_code == 1
    assert result.stderr.strip() == ("tracecli: internal error: ZeroDivisionError: boom; rerun "
                                     "with --debug for the traceback and please report it")
    result = run("--debug", "inspect", VGG)
    assert isinstance(result.exception, ZeroDivisionError)


def test_python_dash_m(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "tracecli", "inspect", str(VGG), "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["parameters"]["count"] == 38


def test_parsers_report_progress(tmp_path):
    from tracecli import LoadOptions, load_trace

    seen = []
    trace = load_trace(VGG, LoadOptions(progress=lambda *a: seen.append(a)))
    assert seen[0] == ("parse", 0, 92) and seen[-1] == ("parse", 92, 92)
    seen.clear()
    load_trace(RESNET, LoadOptions(progress=lambda *a: seen.append(a)))
    assert seen[0] == ("parse", 0, 2467) and seen[-1] == ("parse", 2467, 2467)
    assert len(trace.ops()) == 92


def test_tables_stop_at_a_thousand_rows_unless_told():
    from rich.table import Table

    from tracecli.render.tables import DEFAULT_ROWS, add_rows, truncated

    rows = list(range(DEFAULT_ROWS + 500))
    assert truncated(rows, None) == (rows[:DEFAULT_ROWS], 500)
    assert truncated(rows, 5000) == (rows, 0)
    assert truncated(rows, 3) == (rows[:3], len(rows) - 3)
    assert truncated(rows[:10], None) == (rows[:10], 0)
    table = Table()
    table.add_column("x")
    add_rows(table, [["1"]], 500, "row")
    assert table.row_count == 1
    assert table.caption == "500 more rows (--top N shows N; --json has them all)"


def test_a_closed_pipe_ends_quietly():
    """``tracecli ... | head -1``: the reader goes away; no error, SIGPIPE's status (141)."""
    import subprocess
    import sys

    from conftest import ROOT

    command = [sys.executable, "-m", "tracecli", "export", str(RESNET), "--to", "json", "-o", "-"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    first = proc.stdout.readline()
    proc.stdout.close()  # as head -1 does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and first.startswith(b"{")
    assert err == b"", err
