"""``--strategy megatron``: its rules as read in Megatron-Core's source, its plans, settings and
tuning. Side by side with Megatron-Core's own code: ``test_megatron_core.py``."""

from __future__ import annotations

import json

from tracecli.costs import resolve_cost_model
from tracecli.model import CollectiveKind
from tracecli.planning import Grad, PlanInput, compare, make_plan
from tracecli.planning.strategies.megatron import (
    MegatronOptions,
    megatron, megatron_layout, megatron_tuning,
)
from tracecli.render.plans import compare_advice

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def grad_list(specs, ready=None):
    """Grads of parameters given in ``named_parameters()`` order, listed in readiness order:
    by default the reverse of the parameter order, as in a backward pass."""
    n = len(specs)
    ready = ready or [float(n - i) for i in range(n)]
    grads = [Grad(name, numel * BYTES[dtype], dtype, numel, ready[i], i, False, expert, shared)
             for i, (name, numel, dtype, expert, shared) in enumerate(specs)]
    return sorted(grads, key=lambda g: (g.ready_ms, -g.order))


# -- cases read from the source (megatron/core/distributed/param_and_grad_buffer.py,
#    _ParamAndGradBuffer.__init__, 0.16.1 l.676-730; optimizer/param_layout.py at 0.20.0) --

def test_bucket_closes_after_the_parameter_that_reaches_the_size():
    # reversed walk: 40 (40 < 50), 30 (70 >= 50: close), 20, 10 (30: the rest)
    assert megatron_layout([10, 20, 30, 40], 50, 8) == [((3, 2), 0, 70, 70), ((1, 0), 70, 100, 30)]
    assert megatron_layout([10, 20, 30, 40], None, 8) == [((3, 2, 1, 0), 0, 100, 100)]
    assert megatron_layout([100, 1], 5, 8) == [((1, 0), 0, 101, 101)]  # 1 < 5, 101 >= 5


def test_distributed_optimizer_padding_and_shared_embedding():
    # parameter starts at multiples of 64, bucket ends at multiples of lcm(dp, 128)
    assert megatron_layout([10, 20, 30, 40], 50, 2, True) == \
        [((3, 2), 0, 128, 94), ((1, 0), 128, 256, 74)]
    assert megatron_layout([10], None, 384, True) == [((0,), 0, 384, 10)]  # lcm(384, 128)
    assert megatron_layout([10], None, 2, True, pad_for_busbw=True) == [((0,), 0, 65536, 10)]
    # a shared embedding closes the bucket before it (at its own padded start: Megatron
    # counts that padding as unpadded elements) and sits alone
    assert megatron_layout([5, 7, 9], None, 1, True, shared=[False, True, False]) == \
        [((2,), 0, 128, 64), ((1,), 128, 256, 7), ((0,), 256, 384, 5)]
    # without the distributed optimizer it changes nothing
    assert megatron_layout([5, 7, 9], None, 1, False, shared=[False, True, False]) == \
        [((2, 1, 0), 0, 21, 21)]


def test_the_strategy_sends_padded_buckets_in_the_grad_dtype():
    g = grad_list([("a", 1000, "bfloat16", False, False), ("b", 3000, "bfloat16", False, False)])
    opts = MegatronOptions(megatron_overlap_grad_reduce=True, megatron_bucket_size=2000,
                           megatron_distributed_optimizer=True, megatron_grad_reduce_in_fp32=True)
    cost = resolve_cost_model(4, "25gbe")
    grouping = megatron(g, opts, cost)
    # readiness order b, a: b's 3,000 elements pass 2,000 and close its bucket; then a
    assert [g[i].name for b in grouping.buckets for i in b] == ["b", "a"]
    assert grouping.buckets == [(0,), (1,)]
    assert grouping.collectives == [CollectiveKind.REDUCE_SCATTER] * 2
    assert grouping.messages == [(3072 * 4, "float32"), (1024 * 4, "float32")]
    assert grouping.not_before is None
    off = megatron(g, MegatronOptions(), cost)  # Megatron's default: after backward, one bucket
    assert off.buckets == [(0, 1)] and off.not_before == [2.0]  # the last gradient's
    assert off.collectives == [CollectiveKind.ALL_REDUCE] and off.messages is None  # its bytes


def test_buckets_launch_as_they_become_ready():
    # parameter order a, b, c; c ready last (not the reverse of the order)
    g = grad_list([(n, 100, "float32", False, False) for n in "abc"], ready=[1.0, 2.0, 3.0])
    grouping = megatron(g, MegatronOptions(megatron_overlap_grad_reduce=True,
                                           megatron_bucket_size=100), None)
    # Megatron's buckets are (c), (b), (a); a is ready first, so it goes first
    assert grouping.buckets == [(0,), (1,), (2,)]


def test_compare_tunes_megatron_and_prints_its_settings_whole():
    g = tuple(grad_list([(f"p{i}", n, "bfloat16", False, False)
                         for i, n in enumerate([4_000_000, 30_000_000, 20_000_000, 512, 1000])]))
    inp = PlanInput(g, 2.0, 12.0)
    cost = resolve_cost_model(8, "25gbe")
    opts = MegatronOptions(megatron_distributed_optimizer=True, megatron_grad_reduce_in_fp32=True)
    rows = {r.label: r.plan for r in compare(inp, cost, opts)}
    tuned = rows["megatron tuned"]
    assert tuned.options.megatron_distributed_optimizer and tuned.options.megatron_grad_reduce_in_fp32
    grid = [make_plan(inp, "megatron", o, cost) for o in megatron_tuning(inp, opts)]
    assert tuned.timeline.iteration_ms == min(p.timeline.iteration_ms for p in grid)
    assert rows["megatron"].options == opts  # the defaults in this setup: no separate row
    advice = compare_advice(list(compare(inp, cost, opts)))
    k = next(i for i, line in enumerate(advice) if line.startswith("  Megatron-Core DDP: "))
    end = next(i for i in range(k + 1, len(advice)) if not advice[i].startswith("    "))
    block = advice[k:end]
    assert all(len(line) <= 80 for line in block), block  # whole at 80 columns
    assert block[2].startswith("    DistributedDataParallelConfig(overlap_grad_reduce=True")
    assert any("--use-distributed-optimizer" in line for line in block)


# -- through the command line ---------------------------------------------------------------

def test_sidecar_marks_are_checked_where_read(tmp_path):
    from conftest import FIXTURES, assert_error, run
    trace = tmp_path / "t.json.gz"
    trace.write_bytes((FIXTURES / "megatron" / "distopt.json.gz").read_bytes())
    sizes = tmp_path / "t.sizes.json"
    entries = json.loads((FIXTURES / "megatron" / "distopt.sizes.json").read_text())
    entries[1]["expert"] = "yes"
    sizes.write_text("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")
    assert_error(run("plan-buckets", trace, "--strategy", "megatron"), f"{sizes}:3:",
                 "expert must be true or false")


def test_megatron_from_the_command_line():
    from conftest import FIXTURES, run
    result = run("plan-buckets", FIXTURES / "megatron" / "distopt.json.gz", "--strategy",
                 "megatron", "--megatron-overlap-grad-reduce", "--megatron-bucket-size", "20000",
                 "--megatron-distributed-optimizer", "--gpus", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [b["collective"] for b in doc["buckets"]] == ["reduce_scatter"] * 4
    assert [b["bytes"] for b in doc["buckets"]] == [320000, 114176, 18944, 192000]  # padded
    assert doc["settings"]["framework"] == "megatron-core"
    assert doc["options"]["megatron_bucket_size"] == 20000
    bad = run("plan-buckets", FIXTURES / "megatron" / "distopt.json.gz", "--strategy", "megatron",
              "--megatron-bucket-size", "-1")
    assert bad.exit_code == 2 and "--megatron-bucket-size" in bad.output


def test_a_saved_plan_keeps_what_each_bucket_sends(tmp_path):
    from conftest import FIXTURES, assert_error, run
    from tracecli.planning.planfile import load_plan_file
    out = tmp_path / "plan.json"
    result = run("plan-buckets", FIXTURES / "megatron" / "distopt.json.gz", "--strategy",
                 "megatron", "--megatron-overlap-grad-reduce", "--megatron-bucket-size", "20000",
                 "--megatron-distributed-optimizer", "--gpus", "2", "--out", out)
    assert result.exit_code == 0, result.output
    saved = load_plan_file(out)
    assert saved.fixed.collectives == (CollectiveKind.REDUCE_SCATTER,) * 4
    assert saved.fixed.messages == ((320000, "float32"), (114176, "float32"), (18944, "float32"),
                                    (192000, "float32"))
    doc = json.loads(out.read_text())
    doc["buckets"][1]["dtype"] = "int7"
    out.write_text(json.dumps(doc))
    assert_error(run("replay", "--plan", out, "--gpus", "2"), f"{out}:1:",
                 "bucket 1: dtype must be one of float32")
    doc["buckets"][1]["bytes"] = 1000  # less than its gradients hold: they are what it sends
    out.write_text(json.dumps(doc))
    assert load_plan_file(out).fixed.messages[1] == (113600, "float32")


def test_the_default_row_keeps_the_users_setup():
    g = tuple(grad_list([(f"p{i}", n, "bfloat16", False, False)
                         for i, n in enumerate([4_000_000, 30_000_000, 512])]))
    inp = PlanInput(g, 2.0, 12.0)
    cost = resolve_cost_model(8, "25gbe")
    opts = MegatronOptions(megatron_overlap_grad_reduce=True, megatron_bucket_size=1_000_000,
                           megatron_distributed_optimizer=True, megatron_grad_reduce_in_fp32=True)
    rows = {r.label: r.plan for r in compare(inp, cost, opts)}
    default = rows["megatron default"].options
    assert not default.megatron_overlap_grad_reduce and default.megatron_bucket_size == 0
    assert default.megatron_distributed_optimizer and default.megatron_grad_reduce_in_fp32
    assert rows["megatron default"].buckets[0].collective is CollectiveKind.REDUCE_SCATTER
