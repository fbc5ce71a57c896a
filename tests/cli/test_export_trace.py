"""``export TRACE --to chrome`` on one trace (issue 26 item 5): the timeline the trace
recorded, checked against the profiler's own events in the same file (threads, streams,
durations), never against numbers read back from tracecli."""

from __future__ import annotations

import gzip
import json

from conftest import DDP_GPU, FIXTURES, VGG, assert_error, run

MLP = FIXTURES / "kineto" / "mlp_default.json.gz"


def export(trace, tmp_path):
    out = tmp_path / "t.json"
    result = run("export", trace, "--to", "chrome", "-o", out)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.stderr


def raw(trace):
    """The profiler's events, and each event as found from its first line (``trace line``)."""
    text = gzip.open(trace, "rt").read()
    starts = [0]
    for row in text.split("\n"):
        starts.append(starts[-1] + len(row) + 1)
    decoder = json.JSONDecoder()

    def at(line: int) -> dict:
        begin = starts[line - 1]
        return decoder.raw_decode(text, begin + len(text[begin:]) - len(text[begin:].lstrip()))[0]

    return json.loads(text)["traceEvents"], at


def tracks(doc) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}


def op_threads(trace, doc, same_times: bool) -> dict[int, set]:
    """Each op track's profiler threads (the ops found at their ``trace line``)."""
    _, at = raw(trace)
    threads: dict[int, set] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and "trace line" in e.get("args", {}):
            source = at(e["args"]["trace line"])
            assert source["name"].endswith(e["name"]), (source, e)
            if same_times:  # on the host's clock, an op lasts what the profiler recorded
                assert abs(source["dur"] - e["dur"]) < 1e-3, (source, e)
            threads.setdefault(e["tid"], set()).add(source["tid"])
    return threads


def test_ops_lie_on_the_threads_that_ran_them(tmp_path):
    doc, err = export(DDP_GPU, tmp_path)
    names = tracks(doc)
    threads = op_threads(DDP_GPU, doc, same_times=False)  # the device's clock: said below
    # one track a profiler thread, each holding that thread's ops only: DDP's forward and
    # optimizer on the main thread, the backward on autograd's own thread
    assert all(len(tids) == 1 for tids in threads.values()), threads
    assert len({next(iter(t)) for t in threads.values()}) == len(threads) == 2
    assert sorted(names[t] for t in threads) == ["host thread 1 (forward, update)",
                                                  "host thread 2 (backward, gradient)"]
    assert "on the device's clock): 740 ops on 2 host threads" in " ".join(err.split())


def test_a_cpu_trace_keeps_the_host_times(tmp_path):
    doc, err = export(MLP, tmp_path)
    threads = op_threads(MLP, doc, same_times=True)
    assert threads and all(len(tids) == 1 for tids in threads.values())
    assert "on the host's clock" in " ".join(err.split())


def test_collectives_lie_on_the_stream_their_kernels_ran_on(tmp_path):
    doc, err = export(DDP_GPU, tmp_path)
    events, _ = raw(DDP_GPU)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    ran = [e for e in doc["traceEvents"] if e.get("cat") == "collective"]
    names = tracks(doc)
    assert ran and {names[e["tid"]] for e in ran} == \
        {f"collectives on GPU stream {k['tid']}" for k in kernels}
    by_kind = {"allreduce": "AllReduce", "broadcast": "Broadcast"}
    for e in ran:  # each is one of the profiler's NCCL kernels, its duration unchanged
        assert any(by_kind[e["name"]] in k["name"] and abs(k["dur"] - e["dur"]) < 1e-3
                   for k in kernels), e
    step = next(e for e in doc["traceEvents"] if e.get("cat") == "step")
    assert f"({step['name']}, on the device's clock)" in " ".join(err.split())  # said which


def test_gloo_collectives_lie_on_gloo_threads(tmp_path):
    doc, _ = export(MLP, tmp_path)
    names = tracks(doc)
    lanes = {names[e["tid"]] for e in doc["traceEvents"] if e.get("cat") == "collective"}
    assert lanes and all(n.startswith("collectives on gloo worker thread ") for n in lanes)


def test_a_trace_without_times_points_to_the_plans_timeline(tmp_path):
    result = run("export", VGG, "--to", "chrome", "-o", tmp_path / "t.json")
    assert_error(result, str(VGG), "recorded no times", "plan-buckets TRACE --chrome-trace")
    assert not (tmp_path / "t.json").exists()
