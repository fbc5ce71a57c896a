"""A synthetic profiler trace of one FSDP2 step, shaped like the real ones the fixtures hold
(``tests/fixtures/fsdp``): the same labels, ops and argument layouts, for a model of
``blocks`` blocks of ``params`` parameters each, under a root with an embedding and a head.
For scale (``benchmarks/fsdp_scale.py``) and for models larger than the fixtures' (the
order and sizes come from FSDP2's rules, which the fixtures check against torch; this only
writes them down).

    write_trace(path, blocks=1000, world=8)
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

__all__ = ["write_trace", "block_shapes", "events"]


def block_shapes(dim: int) -> list[list[int]]:
    """A transformer block's parameters, in registration (and FSDP2 layout) order."""
    return [[dim], [3 * dim, dim], [dim, dim], [dim], [4 * dim, dim], [4 * dim], [dim, 4 * dim]]


class _Writer:
    def __init__(self, world: int):
        self.world, self.out, self.clock, self.gloo = world, [], 0.0, 0.0

    def ev(self, name: str, cat: str, dur: float, args=None, tid=1, ts=None) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid,
             "ts": round(self.clock if ts is None else ts, 3), "dur": round(dur, 3)}
        if args:
            e["args"] = args
        self.out.append(e)
        return e

    def shard(self, shape: list[int]) -> int:
        return -(-shape[0] // self.world) * math.prod(shape[1:])

    def gather(self, unit: str, shapes: list[list[int]]) -> None:
        label = f"FSDP::all_gather ({unit})" if unit else "FSDP::all_gather"
        numels = [self.shard(s) for s in shapes]
        n = sum(numels)
        self.ev(label, "user_annotation", 20.0)
        self.ev("fsdp::all_gather_copy_in", "cpu_op", 2.0, {
            "Input Dims": [[[k] for k in numels], [n * self.world], [], [], []],
            "Input type": ["TensorList", "float", "Scalar", "Scalar", "Scalar"]}, ts=self.clock + 1)
        self.ev("c10d::_allgather_base_", "cpu_op", 5.0, {
            "Input Dims": [[n * self.world], [n], [], [], []],
            "Input type": ["float", "float", "", "Scalar", "Scalar"]}, ts=self.clock + 4)
        self.gloo = max(self.gloo, self.clock + 5)
        self.ev("gloo:all_gather", "user_annotation", 3.0, {
            "Input Dims": [[n]], "Input type": ["float"]}, tid=2, ts=self.gloo)
        self.gloo += 4
        self.clock += 21

    def reduce(self, unit: str, shapes: list[list[int]], callback: bool = False) -> None:
        suffix = f" ({unit})" if unit else ""
        total = sum(-(-s[0] // self.world) * self.world * math.prod(s[1:]) for s in shapes)
        for what in ("accumulate", "reshard"):
            self.ev(f"FSDP::post_backward_{what}{suffix}", "user_annotation", 1.0)
            self.clock += 2
        self.ev(f"FSDP::post_backward_reduce{suffix}", "user_annotation", 12.0)
        self.ev("fsdp::chunk_cat", "cpu_op", 2.0, {
            "Input Dims": [shapes, [], [], [self.world, total // self.world]],
            "Input type": ["TensorList", "Scalar", "Scalar", "float"]}, ts=self.clock + 1)
        self.ev("c10d::_reduce_scatter_base_", "cpu_op", 5.0, {
            "Input Dims": [[total // self.world], [total], [], [], [], []],
            "Input type": ["float", "float", "", "", "Scalar", "Scalar"]}, ts=self.clock + 4)
        self.gloo = max(self.gloo, self.clock + 5)
        self.ev("gloo:all_reduce", "user_annotation", 3.0, {
            "Input Dims": [[total]], "Input type": ["float"]}, tid=2, ts=self.gloo)
        self.gloo += 4
        self.clock += 13

    def op(self, name: str, dur: float) -> None:
        self.ev(name, "cpu_op", dur)
        self.clock += dur + 1

    def node(self, name: str, dur: float, hook=None, accumulate=None) -> None:
        """A backward node; ``hook()`` writes FSDP labels inside it, before its op."""
        start = self.clock
        outer = self.ev(f"autograd::engine::evaluate_function: {name}", "cpu_op", 0.0)
        self.clock += 1
        if hook is not None:
            hook()
        if accumulate is not None:
            self.ev("torch::autograd::AccumulateGrad", "cpu_op", dur, {
                "Input Dims": [accumulate], "Input type": ["float"]})
        else:
            self.ev(name, "cpu_op", dur)
        self.clock += dur + 1
        outer["dur"] = round(self.clock - start, 3)


def events(blocks: int, world: int, dim: int = 64, vocab: int = 1000) -> list[dict]:
    """The trace events of one step (``ProfilerStep#1``)."""
    w = _Writer(world)
    root = [[vocab, dim], [dim], [vocab, dim]]  # embed, norm, head (post-order)
    shapes = block_shapes(dim)
    step = w.ev("ProfilerStep#1", "user_annotation", 0.0)
    w.ev("FSDP::root_pre_forward", "user_annotation", 1.0)
    w.clock += 2
    w.ev("FSDP::pre_forward", "user_annotation", 21.0)
    w.gather("", root)
    w.op("aten::embedding", 30.0)
    for b in range(blocks):
        unit = f"blocks.{b}"
        w.ev(f"FSDP::pre_forward ({unit})", "user_annotation", 21.0)
        w.gather(unit, shapes)
        w.op("aten::mm", 50.0)
        w.ev(f"FSDP::post_forward ({unit})", "user_annotation", 1.0)
        w.clock += 2
    w.op("aten::mm", 40.0)
    w.ev("FSDP::post_forward", "user_annotation", 1.0)
    w.clock += 2

    def pre_backward(unit: str, target):
        def hook():
            label = w.ev(f"FSDP::pre_backward ({unit})" if unit else "FSDP::pre_backward",
                         "user_annotation", 0.0)
            start = w.clock
            w.clock += 1
            if target is not None:
                w.ev(f"FSDP::backward_prefetch for {target}", "user_annotation", 22.0)
                w.clock += 1
                w.gather(target, shapes)
            label["dur"] = round(w.clock - start, 3)
        return hook

    w.node("MmBackward0", 60.0, pre_backward("", f"blocks.{blocks - 1}" if blocks else None))
    w.node("torch::autograd::AccumulateGrad", 2.0, accumulate=[vocab, dim])
    for b in reversed(range(blocks)):
        unit = f"blocks.{b}"
        w.node("AddBackward0", 5.0, pre_backward(unit, f"blocks.{b - 1}" if b else None))
        w.node("MmBackward0", 80.0)
        for s in reversed(shapes):
            w.node("torch::autograd::AccumulateGrad", 1.0, accumulate=s)
        w.node("RegisterPostBackwardFunctionBackward", 1.0,
               lambda unit=unit: w.reduce(unit, shapes))
    w.node("EmbeddingBackward0", 20.0)
    w.node("torch::autograd::AccumulateGrad", 2.0, accumulate=[dim])
    w.node("torch::autograd::AccumulateGrad", 2.0, accumulate=[vocab, dim])
    w.ev("FSDP::root_post_backward_callback", "user_annotation", 40.0)
    w.clock += 1
    w.reduce("", root)
    w.clock += 20
    w.ev("Optimizer.step#SGD.step", "user_annotation", 30.0)
    w.clock += 31
    step["dur"] = round(w.clock + 10, 3)
    return w.out


def write_trace(path: Path, blocks: int, world: int = 8, dim: int = 64) -> Path:
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": 0,
                                                   "world_size": world},
           "traceEvents": events(blocks, world, dim)}
    data = json.dumps(doc).encode()
    Path(path).write_bytes(gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)
    return Path(path)
