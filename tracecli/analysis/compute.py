"""Compute times of the step (DESIGN 4.1): how long forward and each backward op take.

Sources, best first, and always named in ``ComputeProfile.source``:

1. a timing file (``--op-times``): measured ms of ops or layers;
2. traces that record op durations (profiler traces): the measured times;
3. traces with inferred shapes (Chainer dumps): a roofline estimate of each op's FLOPs and
   bytes against a device preset;
4. traces with neither (op lists): backward ops share a measured ``--backward-ms`` evenly.

What a trace offers is its :attr:`~tracecli.model.Abilities.compute`.

``--backward-ms`` also rescales an estimate to a measured backward time, keeping its
proportions; forward time counts before backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, NamedTuple, Optional

from ..errors import CalibrationError, PlanError, excerpt
from ..limits import DEFAULT_DEVICE
from ..model import ComputeSource, OpKind, Trace
from ..parsers.op_times import OpTimes
from .readiness import Readiness
from .shapes import op_costs

__all__ = ["Device", "DEVICES", "ComputeProfile", "compute_profile"]

@dataclass(frozen=True)
class Device:
    name: str
    fp32_tflops: float  # float32 on CUDA cores (no TF32), dense
    fp16_tflops: float  # float16/bfloat16 on tensor cores, dense
    memory_gbps: float  # GB/s
    compute_efficiency: float
    memory_efficiency: float
    launch_us: float  # per-op framework + kernel launch overhead
    source: str

    def op_ms(self, flops: float, nbytes: float, dtype: str = "float32") -> float:
        return self.timer(dtype)(flops, nbytes)

    def timer(self, dtype: str = "float32") -> Callable[[float, float], float]:
        """``op_ms`` for one dtype, its constants computed once (for many ops)."""
        peak = (self.fp16_tflops if dtype in ("float16", "bfloat16", "half") else self.fp32_tflops)
        flops_per_s = peak * 1e12 * self.compute_efficiency
        bytes_per_s = self.memory_gbps * 1e9 * self.memory_efficiency
        launch_ms = self.launch_us / 1000.0

        def ms(flops: float, nbytes: float) -> float:
            return max(flops / flops_per_s, nbytes / bytes_per_s) * 1000.0 + launch_ms
        return ms


# Peak figures from the vendors' datasheets (dense, no sparsity); efficiencies are the
# fraction of peak that well-tuned cuDNN/cuBLAS kernels reach on large convolutions and
# streaming kernels (typically 50-70% and 70-85%): assumptions, printed with every plan.
DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("v100", 15.7, 125.0, 900.0, 0.6, 0.75, 5.0,
           "NVIDIA Tesla V100 SXM2 datasheet: 15.7 TFLOP/s FP32, 125 FP16 tensor, 900 GB/s HBM2"),
    Device("a100", 19.5, 312.0, 2039.0, 0.6, 0.75, 5.0,
           "NVIDIA A100 80GB SXM datasheet: 19.5 TFLOP/s FP32, 312 BF16/FP16 tensor, 2,039 GB/s HBM2e"),
    Device("h100", 67.0, 989.0, 3350.0, 0.6, 0.75, 5.0,
           "NVIDIA H100 SXM5 datasheet: 67 TFLOP/s FP32, 989 BF16/FP16 tensor (dense), 3.35 TB/s HBM3"),
    Device("h200", 67.0, 989.0, 4800.0, 0.6, 0.75, 5.0,
           "NVIDIA H200 SXM datasheet: 67 TFLOP/s FP32, 989 BF16/FP16 tensor (dense), 4.8 TB/s HBM3e"),
    Device("gh200", 67.0, 989.0, 4000.0, 0.6, 0.75, 5.0,
           "NVIDIA GH200 Grace Hopper Superchip datasheet: its H100 GPU, 67 TFLOP/s FP32, 989 "
           "BF16/FP16 tensor (dense), 4 TB/s HBM3 (96 GB; 4.9 TB/s with 144 GB HBM3e)"),
    Device("b200", 75.0, 2250.0, 7700.0, 0.6, 0.75, 5.0,
           "NVIDIA HGX B200 specifications, per GPU: 75 TFLOP/s FP32, 4.5 PFLOP/s FP16/BF16 tensor "
           "with sparsity (2.25 dense), 7.7 TB/s HBM3e"),
    Device("cpu", 0.2, 0.2, 20.0, 0.5, 0.6, 2.0,
           "2-core AVX2 server at 3 GHz: 2 x 32 FP32 FLOP/cycle = 0.19 TFLOP/s; ~20 GB/s DRAM"),
)}


@dataclass(frozen=True)
class ComputeProfile:
    """The step's compute: ``forward_ms`` until backward starts, then each backward op's
    ``(op id, ms)`` in execution order; ``forward`` holds each forward op's ``(op id, ms)``
    where the source times forward op by op (a roofline estimate, a profiled run), ``()``
    where forward is known only as a whole."""

    forward_ms: float
    backward: tuple[tuple[str, float], ...]
    source: str
    update_ms: Optional[float] = None  # the optimizer step, where the trace records it
    tail_ms: float = 0.0  # backward work after the last op's end (hooks, the engine's callbacks)
    forward: tuple[tuple[str, float], ...] = ()

    @property
    def backward_ms(self) -> float:
        return sum(ms for _, ms in self.backward) + self.tail_ms

    @property
    def backward_end_ms(self) -> float:
        """ms from the step's start when backward is over."""
        return self._times[-1] + self.tail_ms

    @cached_property
    def _times(self) -> tuple[float, ...]:
        times = [self.forward_ms]
        for _, ms in self.backward:
            times.append(times[-1] + ms)
        return tuple(times)

    def ready_times(self) -> list[float]:
        """``ready_times()[k]``: ms from step start when ``k`` backward ops have run."""
        return list(self._times)

    def ready_at(self, position: int) -> float:
        """ms from step start when the backward op at ``position`` (its place in backward
        order, as :attr:`~.readiness.GradientReady.backward_position` counts) has run; a
        position past the last op is backward's last op."""
        return self._times[min(position, len(self._times) - 1)]


def _resolve(times: OpTimes, trace: Trace, order: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """(op id -> ms, layer -> ms) of a timing file against ``trace``; unknown keys are errors."""
    by_key: dict[str, str] = {}
    for op in trace.ops():
        by_key.setdefault(op.id, op.id)
        by_key.setdefault(op.name, op.id)
    layers = {trace.op(op_id).layer for op_id in order} - {None}
    ops_ms, layers_ms = {}, dict(times.layers)
    for key, value in times.ops.items():
        if key not in by_key:
            raise CalibrationError(f"names op {excerpt(key)}, which {trace.path} "
                                   "does not have", path=times.path, line=1)
        ops_ms[by_key[key]] = value
    for key, value in times.names.items():
        if key in by_key:
            ops_ms[by_key[key]] = value
        elif key in layers:
            layers_ms[key] = value
        else:
            raise CalibrationError(f"names {excerpt(key)}, which is no op or layer "
                                   f"of {trace.path}", path=times.path, line=1)
    unknown = set(layers_ms) - layers
    if unknown:
        raise CalibrationError(f"names layer {excerpt(sorted(unknown)[0])}, which "
                               f"{trace.path} does not have", path=times.path, line=1)
    return ops_ms, layers_ms


class _Estimate(NamedTuple):
    """What the trace's own source says: backward op -> ms, forward (a whole, and per op where
    known), the optimizer step, backward's tail, and the source's words."""

    backward: dict[str, float]
    forward_ms: Optional[float]
    forward: tuple[tuple[str, float], ...]
    update_ms: Optional[float]
    tail_ms: float
    source: str


def _estimate(trace: Trace, order: list[str], dev: Device, backward_ms: Optional[float],
              op_times: Optional[OpTimes]) -> _Estimate:
    how = trace.abilities.compute
    if how is ComputeSource.ROOFLINE:
        costs = op_costs(trace)
        ms = dev.timer("float32")
        est = {op_id: ms(*costs[op_id]) for op_id in order}
        forward = tuple((op.id, ms(*costs[op.id])) for op in trace.ops() if op.kind is OpKind.FORWARD)
        fwd = sum(t for _, t in forward)
        return _Estimate(est, fwd, forward, None, 0.0, f"roofline estimate on {dev.name} ({dev.source})")
    if how is ComputeSource.MEASURED:
        fwd, est = _measured(trace, order)
        step, tail = trace.step, 0.0
        if step is not None and step.backward_end_ms is not None and trace.meta.fsdp is None:
            tail = max(step.backward_end_ms - fwd - sum(est.values()), 0.0)
        source = "measured in the trace" + (f" ({step.label})" if step is not None else "")
        if trace.meta.fsdp is not None:
            source += ", FSDP's own time (its hooks and collectives) left out"
        return _Estimate(est, fwd, _measured_forward(trace, fwd),
                         step.update_ms if step is not None else None, tail, source)
    if how is ComputeSource.PARAMETERS:
        return _parameter_estimate(trace, order, dev, backward_ms)
    if backward_ms is None and op_times is None:
        raise PlanError("an op list carries no timings; pass --backward-ms MS (your measured "
                        "backward time) or --op-times FILE", path=trace.path)
    return _Estimate({op_id: 1.0 for op_id in order}, None, (), None, 0.0,
                     "backward ops share the backward time evenly (op list without timings)")


def _parameter_estimate(trace: Trace, order: list[str], dev: Device,
                        backward_ms: Optional[float]) -> _Estimate:
    """A parameter list (no trace): each backward op, one a parameter, reads the parameter
    and writes its gradient, timed at the device's memory bandwidth (a roofline of the
    parameter counts alone, activations unknown: a lower bound of backward); with
    ``--backward-ms``, that time shared in the same proportions."""
    est = {}
    for op_id in order:
        op = trace.op(op_id)
        tensors = [trace.tensor(t) for t in op.outputs]
        nbytes = sum(t.nbytes or 0 for t in tensors)
        est[op_id] = dev.op_ms(0.0, 2.0 * nbytes, tensors[0].dtype if tensors else "float32")
    if backward_ms is None:
        how = (f"each parameter's backward reads it and writes its gradient at {dev.name} memory "
               f"bandwidth ({dev.source}): a roofline of the parameter counts alone, activations "
               "unknown, so a lower bound of backward; pass --backward-ms for a measured one")
    else:
        how = "--backward-ms shared by the parameters in proportion to their bytes"
    return _Estimate(est, None, (), None, 0.0, f"a model without a profile: {how}")


def _with_op_times(trace: Trace, order: list[str], times: dict[str, float],
                   op_times: OpTimes) -> int:
    """Put the timing file's ms into ``times`` (per op, or a layer's shared by its ops);
    returns how many backward ops it timed."""
    ops_ms, layers_ms = _resolve(op_times, trace, order)
    by_layer: dict[str, list[str]] = {}
    for op_id in order:
        layer = trace.op(op_id).layer
        if layer is not None:
            by_layer.setdefault(layer, []).append(op_id)
    overridden = 0
    for layer, ms in layers_ms.items():
        for op_id in by_layer[layer]:
            times[op_id] = ms / len(by_layer[layer])
            overridden += 1
    for op_id, ms in ops_ms.items():
        if op_id in times:
            times[op_id] = ms
            overridden += 1
    return overridden


def _scaled(forward: tuple[tuple[str, float], ...], total: Optional[float]) -> tuple[tuple[str, float], ...]:
    """Per-op forward times in their proportions, summing to ``total`` (``()`` when they
    cannot: no ops, no time)."""
    whole = sum(t for _, t in forward)
    if not forward or total is None or whole <= 0:
        return ()
    return tuple((op_id, t * total / whole) for op_id, t in forward)


def compute_profile(
    trace: Trace,
    ready: Readiness,
    device: str = DEFAULT_DEVICE,
    op_times: Optional[OpTimes] = None,
    backward_ms: Optional[float] = None,
    forward_ms: Optional[float] = None,
) -> ComputeProfile:
    """Forward time and the duration of every backward op, from the best source at hand."""
    if device not in DEVICES:
        raise PlanError(f"unknown device {device!r}; use one of " + ", ".join(DEVICES))
    for value, flag in ((backward_ms, "--backward-ms"), (forward_ms, "--forward-ms")):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise PlanError(f"{flag} must be a non-negative number")
    order = list(ready.backward_ops)
    e = _estimate(trace, order, DEVICES[device], backward_ms, op_times)
    est, fwd, source = e.backward, e.forward_ms, e.source
    times = dict(est)
    overridden = 0
    if op_times is not None:
        overridden = _with_op_times(trace, order, times, op_times)
        if op_times.forward_ms is not None:
            fwd = op_times.forward_ms
        source = f"timing file {op_times.path} ({overridden} of {len(order)} backward ops); " \
                 f"the rest: {source}"
    if backward_ms is not None:
        measured = {op_id for op_id in order if times[op_id] != est[op_id]} if op_times else set()
        scalable = [op_id for op_id in order if op_id not in measured]
        fixed = sum(times[op_id] for op_id in measured)
        total = sum(times[op_id] for op_id in scalable)
        if scalable and total > 0:
            scale = max(backward_ms - fixed, 0.0) / total
            for op_id in scalable:
                times[op_id] *= scale
        source += f"; scaled to --backward-ms {backward_ms:g}"
        if fwd is not None and trace.abilities.compute is ComputeSource.ROOFLINE and forward_ms is None:
            fwd *= scale if scalable and total > 0 else 1.0
    if forward_ms is not None:
        fwd = forward_ms
        source += f"; forward {forward_ms:g} ms given"
    elif fwd is None:
        fwd = sum(times.values()) / 2.0
        source += "; forward taken as half of backward (no forward timing)"
    tail = 0.0 if backward_ms is not None or (op_times is not None and overridden) else e.tail_ms
    return ComputeProfile(float(fwd), tuple((op_id, float(times[op_id])) for op_id in order), source,
                          e.update_ms, tail, _scaled(e.forward, float(fwd)))


def _measured(trace: Trace, order: list[str]) -> tuple[float, dict[str, float]]:
    """Forward time (until the first backward op starts) and each backward op's share of
    the backward wall time: from the end of the op before it to its own end, so the gaps
    between ops (engine overhead, hooks) count and ready times match the recording.

    In an FSDP run, FSDP's hooks hold its collectives (on CPU they block in them): each
    op's compute is its time with FSDP's own left out, forward the ops outside FSDP's
    labels (:attr:`~tracecli.model.fsdp.FsdpRun.op_ms`), the same compute an FSDP plan
    schedules, so every strategy is compared on it."""
    fsdp = trace.meta.fsdp
    if fsdp is not None and fsdp.op_ms:
        clean = dict(fsdp.op_ms)
        return fsdp.forward_ms, {op_id: clean.get(op_id, 0.0) for op_id in order}
    ops = [trace.op(op_id) for op_id in order]
    timed = [op for op in ops if op.start_ms is not None and op.dur_ms is not None]
    if not timed:
        return 0.0, {op_id: 0.0 for op_id in order}
    clock = forward = min(op.start_ms for op in timed)
    times = {}
    for op in ops:
        if op.start_ms is None or op.dur_ms is None:
            times[op.id] = 0.0
            continue
        end = op.start_ms + op.dur_ms
        times[op.id] = max(end - clock, 0.0)
        clock = max(clock, end)
    return forward, times


def _measured_forward(trace: Trace, forward_ms: float) -> tuple[tuple[str, float], ...]:
    """Each recorded forward op's share of forward: from the end of the op before it (the
    step's start for the first) to its own end; the last one's runs to backward's start."""
    clock, shares = 0.0, []
    for op in trace.ops():
        if op.kind is not OpKind.FORWARD or op.start_ms is None or op.dur_ms is None:
            continue
        end = min(op.start_ms + op.dur_ms, forward_ms)
        shares.append([op.id, max(end - clock, 0.0)])
        clock = max(clock, end)
    if shares:
        shares[-1][1] += max(forward_ms - clock, 0.0)
    return tuple((op_id, ms) for op_id, ms in shares)
