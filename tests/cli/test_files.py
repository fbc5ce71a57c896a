"""Output files and options: the rules of tracecli.outfile, and one-line usage errors."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from tracecli.cli import outfile

from conftest import FIXTURES, RESNET, VGG, assert_error, run

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="replay and calibrate need torch (the replay extra)")

MLP = FIXTURES / "mlp_chainer.txt"


@pytest.mark.parametrize("args,words", [
    (["replay", VGG, "--gpus", "0"], ["--gpus", "0"]),
    (["replay", VGG, "--iters", "0"], ["--iters"]),
    (["plan-buckets", VGG, "--strategy", "bogus"], ["'size'", "'optimal'", "'observed'"]),
    (["plan-buckets", VGG, "--max-bytes", "0"], ["--max-bytes", "at least 1"]),
    (["plan-buckets", VGG, "--max-bytes", "12xB"], ["suffix"]),
    (["replay", VGG, "--timeout", "nan"], ["--timeout", "finite"]),
    (["plan-buckets", VGG, "--backward-ms", "inf"], ["--backward-ms", "finite"]),
    (["plan-buckets", VGG, "--alpha-us", "-1"], ["--alpha-us"]),
    (["inspect", VGG, "--format", "pb"], ["'kineto'", "'chainer'", "'tf-schedule'"]),
    (["frobnicate"], ["No such command"]),
    (["export", VGG, "--to", "json"], ["-o"]),
])
def test_usage_errors_are_one_line(args, words):
    result = run(*args)
    assert_error(result, "tracecli", *words)


def test_help_names_defaults_and_units():
    text = " ".join(run("plan-buckets", "--help").stdout.split())
    assert "32k or 32KiB = 32,768 bytes" in text and "32KB = 32,000" in text
    assert "DESIGN" not in text
    for option in ("--backward-ms", "--update-ms", "--alpha-us", "--bandwidth-gbps", "--gpus"):
        assert option in text
    assert "default" in text.split("--cycle-ms")[1][:200]


def test_dangling_symlink_needs_force_and_is_replaced_not_followed(tmp_path):
    link = tmp_path / "out.json"
    target = tmp_path / "elsewhere.json"
    link.symlink_to(target)
    assert_error(run("export", MLP, "--to", "json", "-o", link), str(link), "symlink", "--force")
    assert not target.exists()
    assert run("export", MLP, "--to", "json", "-o", link, "--force").exit_code == 0
    assert not link.is_symlink() and not target.exists()
    json.loads(link.read_text())


def test_force_does_not_write_through_a_symlink(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "plan.json"
    link.symlink_to(target)
    assert run("plan-buckets", MLP, "--out", link, "--force").exit_code == 0
    assert target.read_text() == "keep me"
    assert json.loads(link.read_text())["strategy"] == "size"


def test_outputs_may_not_collide(tmp_path):
    same = tmp_path / "x.json"
    assert_error(run("plan-buckets", MLP, "--out", same, "--chrome-trace", same), str(same),
                 "same file")
    assert not same.exists()
    assert_error(run("plan-buckets", MLP, "--out", MLP, "--force"), str(MLP), "input")
    assert_error(run("export", MLP, "--to", "json", "-o", tmp_path), str(tmp_path), "directory")
    assert_error(run("export", MLP, "--to", "json", "-o", tmp_path / "no" / "x.json"),
                 str(tmp_path / "no" / "x.json"), "directory does not exist")


def test_nothing_is_written_when_the_command_fails(tmp_path):
    out = tmp_path / "plan.json"
    result = run("plan-buckets", RESNET, "--out", out)  # an op list needs --backward-ms
    assert result.exit_code == 2 and not out.exists()


def test_say_what_was_written(tmp_path):
    out = tmp_path / "plan.json"
    result = run("plan-buckets", MLP, "--out", out)
    assert result.exit_code == 0 and f"wrote {out}" in result.stderr


def test_a_failed_replace_keeps_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "g.json"
    out.write_text("old")

    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outfile.os, "replace", full)
    result = run("export", MLP, "--to", "json", "-o", out, "--force")
    assert_error(result, str(out), "No space left", "unchanged")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]  # no temporary left


def test_stdout_output(tmp_path):
    result = run("export", MLP, "--to", "json", "-o", "-")
    assert result.exit_code == 0 and json.loads(result.stdout)["directed"] is True


def test_a_fifo_with_no_writer_does_not_block(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert_error(run("inspect", fifo), str(fifo), "empty")


def test_dev_zero_stops_at_once():
    assert_error(run("inspect", "/dev/zero"), "/dev/zero:1:", "binary")
    assert_error(run("plan-buckets", VGG, "--op-times", "/dev/zero"), "/dev/zero", "binary")


@needs_torch
def test_ignored_inputs_are_said(tmp_path):
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", MLP, "--out", plan).exit_code == 0
    result = run("replay", VGG, "--plan", plan, "--gpus", "2", "--dry-run", "--network", "10gbe")
    assert result.exit_code == 0 and f"TRACE {VGG} is ignored" in result.stderr
    result = run("plan-buckets", MLP, "--compare", "--chrome-trace", tmp_path / "t.json")
    assert result.exit_code == 0 and "best predicted plan only" in result.stderr


def test_calibration_sets_the_rank_count(tmp_path):
    profile = tmp_path / "cal.json"
    profile.write_text(json.dumps({
        "format": "tracecli-calibration", "version": 1, "backend": "gloo", "device": "cpu",
        "gpus": 4, "algorithm": "ring", "alpha_us": 50.0, "bandwidth_gbps": 1.0,
        "fit": {"r2": 0.99, "mape_pct": 2.0}, "points": []}))
    result = run("plan-buckets", MLP, "--calibration", profile, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["gpus"] == 4
    result = run("plan-buckets", MLP, "--calibration", profile, "--gpus", "16", "--json")
    assert json.loads(result.stdout)["gpus"] == 16 and "measured on 4 ranks" in result.stderr


def test_one_rank_replay_is_refused_at_once():
    import time

    started = time.monotonic()
    assert_error(run("replay", VGG, "--gpus", "1"), "tracecli replay", "--gpus", "1")
    assert time.monotonic() - started < 5


def test_a_long_line_is_found_wherever_it_lies_in_a_chunk():
    """Lines wholly inside a read chunk are measured only when they could be too long;
    lines across chunks are counted as they go."""
    import io

    from tracecli.errors import TraceFormatError
    from tracecli.inputfile import read_limited

    def read(data: bytes, max_line: int) -> bytes:
        return read_limited(io.BytesIO(data), "t.txt", 1 << 30, TraceFormatError, "trace",
                            max_line=max_line)

    assert read(b"a\n" + b"x" * 10 + b"\nb\n", 10) == b"a\n" + b"x" * 10 + b"\nb\n"
    for data in (b"a\n" + b"x" * 11 + b"\nb\n", b"x" * 11 + b"\nb\n", b"a\nb\n" + b"x" * 11):
        with pytest.raises(TraceFormatError, match="a line of more than"):
            read(data, 10)
    big = b"y\n" * 100_000 + b"z" * 2_000_000 + b"\n"  # across 1 MiB chunks
    assert read(big, 2_000_000) == big
    with pytest.raises(TraceFormatError, match="a line of more than"):
        read(big, 1_999_999)


HUGE = "1" + "0" * 400  # an integer of 401 digits: JSON allows it; float() overflows


@pytest.mark.parametrize("name,text,args,where", [
    ("cal.json", '{"format": "tracecli-calibration", "alpha_us": %s, "bandwidth_gbps": 1}' % HUGE,
     ["plan-buckets", VGG, "--calibration", "{path}"], "alpha_us"),
    ("cal.json", '{"format": "tracecli-calibration", "alpha_us": 1, "bandwidth_gbps": 1, '
     '"points": [{"bytes": 4096, "mean_ms": %s}]}' % HUGE,
     ["plan-buckets", VGG, "--calibration", "{path}"], "point 0"),
    ("times.json", '{"forward_ms": %s}' % HUGE, ["plan-buckets", VGG, "--op-times", "{path}"],
     "forward_ms"),
])
def test_huge_integers_are_range_checked_before_they_become_floats(tmp_path, name, text, args,
                                                                   where):
    path = tmp_path / name
    path.write_text(text)
    result = run(*[str(path) if a == "{path}" else a for a in args])
    assert_error(result, str(path), where)


def test_huge_integers_in_a_plan_file(tmp_path):
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", VGG, "--out", plan).exit_code == 0
    doc = json.loads(plan.read_text())
    text = json.dumps(doc).replace('"forward_ms": ', f'"forward_ms": {HUGE}, "x": ', 1)
    plan.write_text(text)
    assert_error(run("replay", "--plan", plan, "--dry-run"), str(plan), "forward_ms")


def test_huge_integer_in_a_profiler_trace(tmp_path):
    from conftest import FIXTURES

    text = (FIXTURES / "kineto_step.json").read_text()
    at = text.index('"ts": ', text.index('"ph": "X"')) + len('"ts": ')
    end = min(text.index(",", at), text.index("}", at))
    path = tmp_path / "trace.json"
    path.write_text(text[:at] + HUGE + text[end:])
    assert_error(run("inspect", path), str(path), "integer that large")
