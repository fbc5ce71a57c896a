"""PyTorch profiler (Kineto) traces: ``export_chrome_trace`` output, plain or gzipped.

One profiled step becomes the Trace (``--step K`` picks ``ProfilerStep#K``; default: the
last step with a backward pass):

- each ``torch::autograd::AccumulateGrad`` is a gradient-producing op and its parameter a
  tensor ``g<K>``, in the order the gradients became ready; shapes and dtypes come from
  ``Input Dims``/``Input type`` (``record_shapes=True``), names and marks from a parameter
  sidecar where they can be told (:mod:`.kineto_names`), else from the trace's own module
  scopes (``with_stack=True``; :mod:`.kineto_modules`: ``Sequential_0/Conv2d_1.weight``),
  else position and shape (``grad17[64,32,3,3]``); a reentrant backward's leaves that are
  no parameter (checkpointing's detached inputs) are no gradient, where the trace or the
  sidecar shows it (:mod:`.kineto_ckpt`);
- every top-level ``autograd::engine::evaluate_function`` is a backward op, with its
  recorded start and duration; ``fwdbwd`` flows pair it with its forward op;
- the host ops before backward on the step's thread are forward ops; ``Optimizer.step``
  is the update;
- every collective the run issued, in every profiled step, is a :class:`Collective`: kind,
  elements, dtype, when the host launched it and when it ran (the NCCL kernel, found via
  its launch's correlation id; the ``gloo:*`` annotation of gloo's worker thread), and
  its purpose (``gradients`` during backward, ``unused-map`` for DDP's integer map of used
  parameters, ``buffers`` for DDP's broadcast in forward, ``other``).

On a GPU trace every time is the device's (:mod:`.kineto_device`): the step is the
device's step, an op lasts from when the device had done the work launched before it to
when it had done its own, and a gradient is ready when its backward's kernels have ended.
The host's times are used only where the trace has no device activity.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Optional, Sequence

from ..errors import TraceFormatError
from ..model import (
    DTYPE_BYTES, Abilities, ComputeSource, EdgeKind, Link, Op, OpKind, ReadinessMethod, Tensor, TensorKind, Trace, TraceMeta, VariableOrder,
)
from .kineto_ckpt import set_aside
from .kineto_collectives import collectives, launched_by, launches, pair_runs
from .kineto_device import DeviceClock, StepClock, step_clock
from .kineto_step import notes_of, step_info
from .kineto_events import Event, KinetoEvents, input_shape
from .kineto_modules import module_scopes, name_by_modules
from .kineto_names import name_gradients
from .kineto_fsdp import fsdp_run
from .kineto_fsdp1 import name_units
from .kineto_threads import (
    ACCUMULATE, EVALUATE, STEP_PREFIX, Step, Thread, ancestor_indices, backward_window, find_steps,
    in_window,
)

__all__ = ["build", "looks_like", "FORMAT", "SIZES_HINT"]

FORMAT = "kineto"
SIZES_HINT = ("the trace records no shapes; profile with "
              "torch.profiler.profile(record_shapes=True, ...)")
MAX_GRADIENT_BYTES = 1 << 50

def looks_like(head: str) -> bool:
    """A JSON object: what ``export_chrome_trace`` writes."""
    return head.lstrip("\ufeff \t\r\n").startswith("{")


def _gradient_events(threads, step) -> list[tuple[Thread, int]]:
    inner = [(t, i) for t, i in in_window(threads, step) if t.events[i].name == ACCUMULATE]
    if not inner:  # traces without the inner event: the engine's wrapper
        inner = [(t, i) for t, i in in_window(threads, step)
                 if t.events[i].name == EVALUATE + ACCUMULATE]
    inner.sort(key=lambda ti: (ti[0].events[ti[1]].end, ti[0].events[ti[1]].line))
    return inner


def _pick_step(path: str, steps: list[Step], threads, wanted: Optional[int]) -> Step:
    if wanted is not None:
        for s in steps:
            if s.index == wanted:
                if not _gradient_events(threads, s):
                    raise TraceFormatError(f"{s.label} has no backward pass with "
                                           "parameter gradients; pick another --step", path=path)
                return s
        labels = ", ".join(s.label for s in steps) or "none"
        raise TraceFormatError(f"no {STEP_PREFIX}{wanted} in the trace; it holds: {labels}", path=path)
    with_grads = [s for s in steps if _gradient_events(threads, s)]
    if not with_grads:
        raise TraceFormatError("no AccumulateGrad events: the trace has no backward "
                               "pass with parameter gradients; profile whole training steps "
                               "(forward, backward, optimizer step)", path=path)
    return with_grads[-1]


# An AccumulateGrad whose input is no tensor (``Input Dims [[]]``, ``Input type ['']``):
# autograd ran the parameter's accumulator with an undefined gradient, as it does when an
# optimizer fused into backward (TorchRec's FBGEMM embedding tables) updates the parameter
# itself and returns no gradient. DDP still all-reduces zeros in its place.
_UNDEFINED = ("its AccumulateGrad recorded no tensor (Input type ''): the gradient arrived "
              "undefined, as from an optimizer fused into backward (TorchRec's embedding "
              "tables); pass the parameter sidecar with --sizes FILE to give its size")


def _gradient_tensors(path: str, events: list[Event]) -> list[Tensor]:
    tensors = []
    for k, e in enumerate(events):
        shape, dtype = input_shape(e)
        nbytes = None
        if shape is not None and dtype is not None:
            nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
            if nbytes > MAX_GRADIENT_BYTES:
                raise TraceFormatError(f"gradient of shape {list(shape)} would "
                                       "hold more than 1 PiB; the Input Dims are corrupt", path=path, line=e.line)
        label = f"grad{k}" + (f"[{','.join(map(str, shape))}]" if shape is not None else "")
        tensors.append(Tensor(f"g{k}", TensorKind.PARAMETER, label, nbytes, line=e.line,
                              dtype=dtype, shape=shape))
    return tensors


def _ops(threads, step: Step, grads: list[tuple[Thread, int]],
         clock: StepClock) -> tuple[list[Op], dict, list[float]]:
    """Forward, backward, gradient and update ops of ``step``, in start order, timed on
    the step's ``clock`` (the device's, on a GPU trace)."""
    picked: list[tuple[Event, OpKind, str, Any]] = []
    gradient_of: dict[int, int] = {id(t.events[i]): k for k, (t, i) in enumerate(grads)}
    for thread, i in in_window(threads, step):
        e = thread.events[i]
        if id(e) in gradient_of:
            picked.append((e, OpKind.GRADIENT, "AccumulateGrad", (thread, i)))
        elif e.name.startswith(EVALUATE) and not e.name.endswith("AccumulateGrad") \
                and not any(a.name.startswith(EVALUATE) for a in thread.ancestors(i)):
            picked.append((e, OpKind.BACKWARD, e.name[len(EVALUATE):], (thread, i)))
    backward_start = min((e.ts for e, *_ in picked), default=step.end)
    main = threads[step.tid]
    for i in main.within(step.ts, step.end):
        e = main.events[i]
        if e.cat == "user_annotation" and e.name.startswith("Optimizer.step") and e.ts >= backward_start:
            picked.append((e, OpKind.UPDATE, e.name, (main, i)))
        elif e.cat == "cpu_op" and e.ts < backward_start:
            chain = list(main.ancestors(i))
            if all(a.cat == "user_annotation" for a in chain) and \
                    not any(a.name.startswith("Optimizer.") for a in chain):
                picked.append((e, OpKind.FORWARD, e.name, (main, i)))
    picked.sort(key=lambda p: (p[0].ts, p[0].line))
    ops, where = [], {}
    started = [(e.ts - step.ts) / 1000.0 for e, *_ in picked]  # the host's, for launched_by
    for position, (e, kind, name, place) in enumerate(picked):
        outputs = (f"g{gradient_of[id(e)]}",) if kind is OpKind.GRADIENT else ()
        start_ms, dur_ms = clock.span_ms(e.ts, e.dur)
        op = Op(f"op{position}", kind, name, e.line, position, outputs=outputs,
                start_ms=start_ms, dur_ms=dur_ms)
        ops.append(op)
        where[(id(place[0]), place[1])] = op.id
    return ops, where, started


def _pair_forward_backward(ops: list[Op], where: dict, threads, flows) -> list[Op]:
    """``fwdbwd`` flows: each backward op's forward op (``partner``)."""
    at: dict[tuple, tuple[Thread, int]] = {}
    for thread in threads.values():
        for i, e in enumerate(thread.events):
            at.setdefault((e.tid, round(e.ts, 3)), (thread, i))

    def op_of(tid, ts) -> Optional[str]:
        place = at.get((tid, round(ts, 3)))
        if place is None:
            return None
        thread, i = place
        chain = [i] + list(ancestor_indices(thread, i))
        for j in chain:
            if (id(thread), j) in where:
                return where[(id(thread), j)]
        return None

    ends: dict[Any, dict[str, Any]] = defaultdict(dict)
    for f in flows:
        ends[f.id][f.phase] = f
    index = {op.id: k for k, op in enumerate(ops)}
    ops = list(ops)
    for pair in ends.values():
        if "s" not in pair or "f" not in pair:
            continue
        fwd = op_of(pair["s"].tid, pair["s"].ts)
        bwd = op_of(pair["f"].tid, pair["f"].ts)
        if fwd is None or bwd is None:
            continue
        k = index[bwd]
        if ops[k].kind is OpKind.BACKWARD and ops[k].partner is None and \
                ops[index[fwd]].kind is OpKind.FORWARD:
            ops[k] = ops[k]._replace(partner=fwd)
    return ops


def _readying_ops(threads, step: Step, grads: list[tuple[Thread, int]]) -> list[int]:
    """Per gradient ``g<K>`` of the step: how many backward ops had started before its
    AccumulateGrad (the gradients one backward op readies share the count). Backward ops
    at any depth count: a reentrant backward (``torch.utils.checkpoint`` with
    ``use_reentrant=True``) runs its own graph's ops inside the outer op, each readying its
    own gradients."""
    gradient_of: dict[int, int] = {id(t.events[i]): k for k, (t, i) in enumerate(grads)}
    marks = []
    for thread, i in in_window(threads, step):
        e = thread.events[i]
        if id(e) in gradient_of:
            marks.append((e.ts, e.line, gradient_of[id(e)]))
        elif e.name.startswith(EVALUATE) and not e.name.endswith("AccumulateGrad"):
            marks.append((e.ts, e.line, None))
    marks.sort(key=lambda m: (m[0], m[1]))
    count, seen = {}, 0
    for _, _, k in marks:
        if k is None:
            seen += 1
        else:
            count[k] = seen
    return [count.get(k, 0) for k in range(len(count))]


def _world(top: dict) -> dict[str, Any]:
    info = top.get("distributedInfo")
    out: dict[str, Any] = {}
    if isinstance(info, dict):
        for key in ("backend", "rank", "world_size"):
            v = info.get(key)
            if key == "backend" and isinstance(v, str):
                out[key] = v[:40]
            elif key != "backend" and isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 24:
                out[key] = v
    return out


def build(path: str, ev: KinetoEvents, step_wanted: Optional[int] = None,
          variables: Optional[Sequence] = None, sizes_path: Optional[str] = None) -> Trace:
    """The Trace of one profiled step of ``ev``."""
    by_tid: dict[Any, list[Event]] = defaultdict(list)
    for e in ev.host:
        by_tid[e.tid].append(e)
    threads = {tid: Thread(events) for tid, events in by_tid.items()}
    steps = find_steps(path, threads)
    step = _pick_step(path, steps, threads, step_wanted)
    grads = _gradient_events(threads, step)
    kept, ckpt_note = set_aside(grads, variables, sizes_path or "the sidecar")
    grads = [grads[k] for k in kept]  # a reentrant backward's leaves that are no parameter: out
    tensors = _gradient_tensors(path, [t.events[i] for t, i in grads])
    device = DeviceClock(ev)
    clocks = [step_clock(device, s.label, s.ts, s.end) for s in steps]
    clock = clocks[steps.index(step)]
    ops, where, started = _ops(threads, step, grads, clock)
    readying = _readying_ops(threads, step, grads)
    ops = _pair_forward_backward(ops, where, threads, ev.flows)
    issued = launches(threads)
    pair_runs(issued, ev, threads)
    launched: list[float] = []
    ran = launched_by(collectives(issued, steps, threads, clocks, launched), launched, ops,
                      started, step)
    window = backward_window(threads, step)
    world = _world(ev.top)
    fsdp = fsdp_run(path, threads, step, issued, ran, grads, [t.elements for t in tensors],
                    world.get("world_size"), where)
    note = None
    positional = [t.name for t in tensors]
    if fsdp is None:  # FSDP's gradients are flat or sharded parameters: its units name them
        tensors, note = name_by_modules(tensors, grads, ops, where, threads,
                                        module_scopes(ev.modules, path, ev.frames))
    if variables is not None:
        # FSDP1 accumulates flat parameters, FSDP2 with param_dtype low-precision gradients:
        # the sidecar names FSDP's units instead (name_units)
        by_modules = [t.name for t in tensors]
        tensors, note = name_gradients(tensors, variables, sizes_path or "the sidecar",
                                       readying, path, units=fsdp is not None)
        kept = sum(t.name == m != p for t, m, p in zip(tensors, by_modules, positional))
        if kept:
            note += f"; {kept} keep the names the trace's module scopes give"
    info = step_info(step, steps, clock, window, ops, ran, world.get("world_size"))
    shapes = any(t.shape is not None for t in tensors)
    unrecorded = [t.name for t, (th, i) in zip(tensors, grads)
                  if t.nbytes is None and input_shape(th.events[i])[0] is None and shapes]
    which = "the last with a backward pass" if step_wanted is None else "--step"
    notes = notes_of(step, steps, which, clock, world, bool(ran), tensors, unrecorded, note)
    if ckpt_note:
        notes.append(ckpt_note)
    if fsdp is not None and fsdp.system == "fsdp1" and variables:
        fsdp = name_units(fsdp, variables, sizes_path or "the sidecar")
    if fsdp is not None:
        notes.append(f"{fsdp.system}: {len(fsdp.units)} units, {len(fsdp.comms)} collectives "
                     "FSDP issued in this step" + "".join(f"; {n}" for n in fsdp.notes))
    meta = TraceMeta(rank=world.get("rank"), world_size=world.get("world_size"),
                     backend=world.get("backend"), notes=tuple(notes), record_shapes=shapes,
                     sizes=sizes_path if variables is not None else None, fsdp=fsdp)
    ready_how = ("its backward's kernels end on the device" if clock.on_device
                 else "its AccumulateGrad ends")
    abilities = Abilities(ReadinessMethod.RECORDED, ComputeSource.MEASURED, VariableOrder.INDEX,
                          f"recorded: a gradient is ready when {ready_how} ({step.label})",
                          sizes_hint=f"{len(unrecorded)} of {len(tensors)} gradients have "
                          f"no recorded shape: {_UNDEFINED}" if unrecorded else SIZES_HINT,
                          framework=f"pytorch-{fsdp.system}" if fsdp is not None else "pytorch")
    return Trace.build(path, FORMAT, ops, tensors, _thread_order(ops, where), meta, abilities,
                       ran, info)


def _thread_order(ops: list[Op], where: dict) -> list[Link]:
    """``next`` links: each op to the next op of the step on the same thread."""
    position = {op.id: op.position for op in ops}
    lanes: dict[int, list[str]] = defaultdict(list)
    for (thread, _), op_id in where.items():
        lanes[thread].append(op_id)
    links = []
    for lane in lanes.values():
        lane.sort(key=position.__getitem__)
        links.extend(Link(a, b, EdgeKind.NEXT) for a, b in zip(lane, lane[1:]))
    return links
