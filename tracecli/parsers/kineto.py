"""PyTorch profiler (Kineto) traces: ``export_chrome_trace`` output, plain or gzipped.

One profiled step becomes the Trace (``--step K`` picks ``ProfilerStep#K``; default: the
last step with a backward pass):

- each ``torch::autograd::AccumulateGrad`` is a gradient-producing op and its parameter a
  tensor ``g<K>``, in the order the gradients became ready; shapes and dtypes come from
  ``Input Dims``/``Input type`` (``record_shapes=True``), names from a parameter sidecar
  where the match is unambiguous, else position and shape (``grad17[64,32,3,3]``);
- every top-level ``autograd::engine::evaluate_function`` is a backward op, with its
  recorded start and duration; ``fwdbwd`` flows pair it with its forward op;
- the host ops before backward on the step's thread are forward ops; ``Optimizer.step``
  is the update;
- every collective the run issued, in every profiled step, is a :class:`Collective`: kind,
  elements, dtype, when the host launched it and when it ran (the NCCL kernel, found via
  its launch's correlation id; the ``gloo:*`` annotation of gloo's worker thread), and
  its purpose (``gradients`` during backward, ``unused-map`` for DDP's integer map of used
  parameters, ``buffers`` for DDP's broadcast in forward, ``other``).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from typing import Any, Optional, Sequence

from ..errors import SizesError, TraceFormatError
from ..model import (
    DTYPE_BYTES, Abilities, Collective, CollectiveKind, ComputeSource, Op, OpKind,
    ReadinessMethod, StepInfo, Tensor, TensorKind, Trace, TraceMeta, VariableOrder,
)
from .kineto_events import Event, KinetoEvents, torch_dtype

__all__ = ["build", "looks_like", "FORMAT", "SIZES_HINT", "name_gradients"]

FORMAT = "kineto"
SIZES_HINT = ("the trace records no shapes; profile with "
              "torch.profiler.profile(record_shapes=True, ...)")
_EVALUATE = "autograd::engine::evaluate_function: "
_ACCUMULATE = "torch::autograd::AccumulateGrad"
_STEP = "ProfilerStep#"
_INTEGER_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})
MAX_GRADIENT_BYTES = 1 << 50


def looks_like(head: str) -> bool:
    """A JSON object: what ``export_chrome_trace`` writes."""
    return head.lstrip("\ufeff \t\r\n").startswith("{")


class _Thread:
    """One thread's events in time order, each with the index of its enclosing event."""

    def __init__(self, events: list[Event]):
        events.sort(key=lambda e: (e.ts, -e.dur, e.line))
        self.events = events
        self.starts = [e.ts for e in events]
        self.parent = [-1] * len(events)
        stack: list[int] = []
        for i, e in enumerate(events):
            while stack and e.ts >= events[stack[-1]].end:
                stack.pop()
            if stack:
                self.parent[i] = stack[-1]
            stack.append(i)

    def ancestors(self, i: int):
        i = self.parent[i]
        while i >= 0:
            yield self.events[i]
            i = self.parent[i]

    def within(self, start: float, end: float) -> range:
        return range(bisect.bisect_left(self.starts, start), bisect.bisect_left(self.starts, end))


class _Step:
    def __init__(self, label: str, index: Optional[int], ts: float, end: float, tid: Any):
        self.label, self.index, self.ts, self.end, self.tid = label, index, ts, end, tid


def _steps(path: str, threads: dict[Any, _Thread]) -> list[_Step]:
    steps = []
    for tid, thread in threads.items():
        for e in thread.events:
            if e.cat == "user_annotation" and e.name.startswith(_STEP):
                number = e.name[len(_STEP):]
                index = int(number) if number.isascii() and number.isdigit() and len(number) <= 18 else None
                steps.append(_Step(e.name, index, e.ts, e.end, tid))
    steps.sort(key=lambda s: s.ts)
    if steps:
        return steps
    every = [e for t in threads.values() for e in t.events]
    if not every:
        raise TraceFormatError(path, 1, "the trace holds no host events (cpu_op, "
                               "user_annotation); profile with ProfilerActivity.CPU")
    forwards = sum(1 for e in every if e.name == "DistributedDataParallel.forward")
    if forwards > 1:
        raise TraceFormatError(path, None, f"the trace holds {forwards} forward passes but no "
                               "ProfilerStep markers; profile with a schedule and call "
                               "prof.step() after each iteration")
    main = max(threads, key=lambda tid: len(threads[tid].events))
    return [_Step("the whole trace", None, min(e.ts for e in every),
                  max(e.end for e in every), main)]


def _in_window(threads: dict[Any, _Thread], step: _Step):
    """(thread, index) of every host event that starts within the step."""
    for thread in threads.values():
        for i in thread.within(step.ts, step.end):
            yield thread, i


def _gradient_events(threads, step) -> list[tuple[_Thread, int]]:
    inner = [(t, i) for t, i in _in_window(threads, step) if t.events[i].name == _ACCUMULATE]
    if not inner:  # traces without the inner event: the engine's wrapper
        inner = [(t, i) for t, i in _in_window(threads, step)
                 if t.events[i].name == _EVALUATE + _ACCUMULATE]
    inner.sort(key=lambda ti: (ti[0].events[ti[1]].end, ti[0].events[ti[1]].line))
    return inner


def _backward_window(threads, step) -> Optional[tuple[float, float]]:
    spans = [t.events[i] for t, i in _in_window(threads, step)
             if t.events[i].name.startswith(_EVALUATE)]
    if not spans:
        return None
    return min(e.ts for e in spans), max(e.end for e in spans)


def _pick_step(path: str, steps: list[_Step], threads, wanted: Optional[int]) -> _Step:
    if wanted is not None:
        for s in steps:
            if s.index == wanted:
                if not _gradient_events(threads, s):
                    raise TraceFormatError(path, None, f"{s.label} has no backward pass with "
                                           "parameter gradients; pick another --step")
                return s
        labels = ", ".join(s.label for s in steps) or "none"
        raise TraceFormatError(path, None, f"no {_STEP}{wanted} in the trace; it holds: {labels}")
    with_grads = [s for s in steps if _gradient_events(threads, s)]
    if not with_grads:
        raise TraceFormatError(path, None, "no AccumulateGrad events: the trace has no backward "
                               "pass with parameter gradients; profile whole training steps "
                               "(forward, backward, optimizer step)")
    return with_grads[-1]


def _shape(event: Event) -> tuple[Optional[tuple[int, ...]], Optional[str]]:
    args = event.args or {}
    dims, types = args.get("Input Dims"), args.get("Input type")
    shape = None
    if isinstance(dims, list) and dims and isinstance(dims[0], list) \
            and all(isinstance(d, int) for d in dims[0]):
        shape = tuple(dims[0])
    dtype = torch_dtype(types[0]) if isinstance(types, list) and types else None
    return shape, dtype


def _gradient_tensors(path: str, events: list[Event]) -> list[Tensor]:
    tensors = []
    for k, e in enumerate(events):
        shape, dtype = _shape(e)
        nbytes = None
        if shape is not None and dtype is not None:
            nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
            if nbytes > MAX_GRADIENT_BYTES:
                raise TraceFormatError(path, e.line, f"gradient of shape {list(shape)} would "
                                       "hold more than 1 PiB; the Input Dims are corrupt")
        label = f"grad{k}" + (f"[{','.join(map(str, shape))}]" if shape is not None else "")
        tensors.append(Tensor(f"g{k}", TensorKind.PARAMETER, label, nbytes, line=e.line,
                              dtype=dtype, shape=shape))
    return tensors


def name_gradients(tensors: list[Tensor], variables: Sequence, sizes_path: str) -> tuple[list[Tensor], str]:
    """Names from a parameter sidecar (``model.named_parameters()`` order), attached only
    where a gradient's shape and dtype match exactly one parameter and that parameter's
    shape and dtype match exactly one gradient. Returns the tensors and what was done."""
    if tensors and all(t.shape is None for t in tensors):
        return tensors, (f"names from {sizes_path} not attached: the trace records no shapes "
                         "to match them by (profile with record_shapes=True)")
    by_sig: dict[tuple, list[int]] = defaultdict(list)
    for k, t in enumerate(tensors):
        by_sig[(t.shape, t.dtype)].append(k)
    side: dict[tuple, list] = defaultdict(list)
    for v in variables:
        side[(tuple(v.shape), v.dtype)].append(v)
    named = list(tensors)
    shared, missing = [], []
    for sig, members in by_sig.items():
        candidates = side.get(sig, [])
        if len(members) == 1 and len(candidates) == 1:
            v = candidates[0]
            layer = v.name.rsplit(".", 1)[0] if "." in v.name else None
            named[members[0]] = tensors[members[0]]._replace(name=v.name, layer=layer, index=v.index)
        elif candidates:
            shared.append((sig, len(members), len(candidates)))
        else:
            missing.append(sig)
    count = sum(1 for a, b in zip(named, tensors) if a is not b)
    note = f"names from {sizes_path}: {count} of {len(tensors)} gradients"
    if shared:
        (shape, dtype), n, m = max(shared, key=lambda s: s[1])
        left = sum(n for _, n, _ in shared)
        note += (f"; {left} keep positional names because several parameters share their "
                 f"shape and dtype (e.g. {n} gradients and {m} parameters of "
                 f"[{','.join(map(str, shape or ()))}] {dtype})")
    if missing:
        shape, dtype = missing[0]
        note += (f"; {sum(len(by_sig[s]) for s in missing)} match no parameter of the sidecar "
                 f"(e.g. [{','.join(map(str, shape or ()))}] {dtype}): is it this model's?")
    extra = len(variables) - len(tensors)
    if extra > 0:
        note += f"; {extra} parameters of the sidecar have no gradient in this step (unused or frozen)"
    return named, note


def _collective_kind(name: str) -> Optional[CollectiveKind]:
    """The kind a launch or execution names; ``None`` for what is not a collective.

    >>> _collective_kind("c10d::allreduce_"), _collective_kind("_allgather_base")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, <CollectiveKind.ALL_GATHER: 'allgather'>)
    >>> _collective_kind("gloo:all_reduce"), _collective_kind("wait")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, None)
    """
    base = name.split("::")[-1].split(":")[-1].lower().strip("_")
    for noise in ("_coalesced", "_base", "_into_tensor", "_tensor"):
        base = base.replace(noise, "")
    base = base.strip("_").replace("all_reduce", "allreduce").replace("all_gather", "allgather")
    base = base.replace("all_to_all", "alltoall")
    kinds = {"allreduce": CollectiveKind.ALL_REDUCE, "broadcast": CollectiveKind.BROADCAST,
             "allgather": CollectiveKind.ALL_GATHER, "reduce_scatter": CollectiveKind.REDUCE_SCATTER,
             "alltoall": CollectiveKind.ALL_TO_ALL, "reduce": CollectiveKind.REDUCE,
             "gather": CollectiveKind.GATHER, "scatter": CollectiveKind.SCATTER,
             "barrier": CollectiveKind.BARRIER}
    if base in kinds:
        return kinds[base]
    if base in ("send", "recv", "recv_any_source", "sendrecv"):
        return CollectiveKind.OTHER
    return None


def _kernel_kind(name: str) -> Optional[CollectiveKind]:
    for token, kind in (("AllReduce", CollectiveKind.ALL_REDUCE), ("Broadcast", CollectiveKind.BROADCAST),
                        ("AllGather", CollectiveKind.ALL_GATHER),
                        ("ReduceScatter", CollectiveKind.REDUCE_SCATTER),
                        ("SendRecv", CollectiveKind.ALL_TO_ALL), ("Reduce", CollectiveKind.REDUCE)):
        if token in name:
            return kind
    return None


class _Launch:
    """A collective the host issued, and where it ran once paired."""

    def __init__(self, thread: _Thread, i: int, kind: CollectiveKind):
        e = thread.events[i]
        self.thread, self.i, self.event, self.kind = thread, i, e, kind
        self.elements: Optional[int] = None
        self.dtype: Optional[str] = None
        self.group_size: Optional[int] = None
        args = e.args or {}
        if "Collective name" in args:
            self.elements = args.get("In msg nelems")
            self.dtype = torch_dtype(args.get("dtype"))
            self.group_size = args.get("Group size")
        else:
            dims = args.get("Input Dims")
            if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0] \
                    and all(isinstance(t, list) for t in dims[0]):
                self.elements = sum(math.prod(t) for t in dims[0])
        self.run: Optional[Event] = None


def _launches(threads: dict[Any, _Thread]) -> list[_Launch]:
    found = []
    for thread in threads.values():
        for i, e in enumerate(thread.events):
            if e.name == "record_param_comms" and e.args and "Collective name" in e.args:
                kind = _collective_kind(str(e.args["Collective name"]))
                if kind is not None:
                    found.append(_Launch(thread, i, kind))
            elif e.name.startswith("c10d::") and e.cat == "cpu_op":
                kind = _collective_kind(e.name)
                if kind is not None:
                    found.append(_Launch(thread, i, kind))
    # record_param_comms inside a c10d:: op describes the same collective: keep the inner one
    inner = {(id(l.thread), a) for l in found if l.event.name == "record_param_comms"
             for a in _ancestor_indices(l.thread, l.i)}
    found = [l for l in found if (id(l.thread), l.i) not in inner]
    found.sort(key=lambda l: (l.event.ts, l.event.line))
    return found


def _ancestor_indices(thread: _Thread, i: int):
    i = thread.parent[i]
    while i >= 0:
        yield i
        i = thread.parent[i]


def _pair_runs(launches: list[_Launch], ev: KinetoEvents, threads: dict[Any, _Thread]) -> None:
    """Where each launched collective ran: its NCCL kernel, or gloo's worker annotation."""
    by_place: dict[Any, list[_Launch]] = defaultdict(list)
    for l in launches:
        by_place[l.event.tid].append(l)
    for kernel in ev.kernels:
        corr = (kernel.args or {}).get("correlation")
        where = ev.launches.get(corr) if corr is not None else None
        if where is None:
            continue
        tid, ts = where
        for l in by_place.get(tid, ()):
            if l.event.ts <= ts <= l.event.end and l.run is None:
                l.run = kernel
                break
    paired = {id(l.run) for l in launches if l.run is not None}
    leftover = [k for k in ev.kernels if id(k) not in paired]
    gloo = [t.events[i] for t in threads.values() for i in range(len(t.events))
            if t.events[i].name.startswith("gloo:") and t.events[i].cat == "user_annotation"]
    gloo.sort(key=lambda e: (e.ts, e.line))
    # The rest in order: the k-th unpaired launch of a kind and size ran as the k-th
    # execution of that kind and size (collective libraries run a group's work in order).
    queues: dict[tuple, deque] = defaultdict(deque)
    for e in leftover:
        args = e.args or {}
        kind = _collective_kind(str(args["Collective name"])) if "Collective name" in args \
            else _kernel_kind(e.name)
        queues[(kind, args.get("In msg nelems"))].append(e)
    for e in gloo:
        dims = (e.args or {}).get("Input Dims")
        elements = None
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0] \
                and all(isinstance(d, int) for d in dims[0]):
            elements = math.prod(dims[0])
        queues[(_collective_kind(e.name), elements)].append(e)
    for l in launches:
        if l.run is not None:
            continue
        for key in ((l.kind, l.elements), (l.kind, None)):
            q = queues.get(key)
            while q and q[0].ts < l.event.ts - 1.0:  # ran before this launch: not its run
                q.popleft()
            if q:
                l.run = q.popleft()
                break
        if l.run is not None and l.run.cat == "user_annotation":
            args = l.run.args or {}
            if l.dtype is None and isinstance(args.get("Input type"), list) and args["Input type"]:
                l.dtype = torch_dtype(args["Input type"][0])
            if l.elements is None:
                dims = args.get("Input Dims")
                if isinstance(dims, list) and dims and isinstance(dims[0], list):
                    l.elements = math.prod(dims[0])
        elif l.run is not None and l.dtype is None:
            l.dtype = torch_dtype((l.run.args or {}).get("dtype"))


def _purpose(l: _Launch, backward: Optional[tuple[float, float]]) -> str:
    ts = l.event.ts
    if backward is not None and l.kind is CollectiveKind.BROADCAST and ts < backward[0]:
        return "buffers"
    if backward is not None and l.kind is CollectiveKind.ALL_REDUCE and backward[0] <= ts <= backward[1]:
        return "unused-map" if l.dtype in _INTEGER_DTYPES else "gradients"
    return "other"


def _collectives(launches: list[_Launch], steps: list[_Step], threads) -> list[Collective]:
    result = []
    starts = [s.ts for s in steps]
    windows = {id(s): _backward_window(threads, s) for s in steps}
    for l in launches:
        k = bisect.bisect_right(starts, l.event.ts) - 1
        if k < 0 or l.event.ts >= steps[k].end:
            continue  # outside every step (DDP's construction-time broadcast, ...)
        step = steps[k]
        t0 = step.ts

        def rel(x: Optional[float]) -> Optional[float]:
            return None if x is None else (x - t0) / 1000.0

        nbytes = None
        if l.elements is not None and l.dtype is not None:
            nbytes = l.elements * DTYPE_BYTES[l.dtype]
        result.append(Collective(
            f"c{len(result)}", l.kind, step.index, l.elements, l.dtype, nbytes,
            rel(l.event.ts), rel(l.run.ts if l.run else None), rel(l.run.end if l.run else None),
            _purpose(l, windows[id(step)]), l.group_size))
    return result


def _ops(threads, step: _Step, grads: list[tuple[_Thread, int]]) -> tuple[list[Op], dict]:
    """Forward, backward, gradient and update ops of ``step``, in start order."""
    t0 = step.ts
    picked: list[tuple[Event, OpKind, str, Any]] = []
    gradient_of: dict[int, int] = {id(t.events[i]): k for k, (t, i) in enumerate(grads)}
    for thread, i in _in_window(threads, step):
        e = thread.events[i]
        if id(e) in gradient_of:
            picked.append((e, OpKind.GRADIENT, "AccumulateGrad", (thread, i)))
        elif e.name.startswith(_EVALUATE) and not e.name.endswith("AccumulateGrad") \
                and not any(a.name.startswith(_EVALUATE) for a in thread.ancestors(i)):
            picked.append((e, OpKind.BACKWARD, e.name[len(_EVALUATE):], (thread, i)))
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
    for position, (e, kind, name, place) in enumerate(picked):
        outputs = (f"g{gradient_of[id(e)]}",) if kind is OpKind.GRADIENT else ()
        op = Op(f"op{position}", kind, name, e.line, position, outputs=outputs,
                start_ms=(e.ts - t0) / 1000.0, dur_ms=e.dur / 1000.0)
        ops.append(op)
        where[(id(place[0]), place[1])] = op.id
    return ops, where


def _pair_forward_backward(ops: list[Op], where: dict, threads, flows) -> list[Op]:
    """``fwdbwd`` flows: each backward op's forward op (``partner``)."""
    at: dict[tuple, tuple[_Thread, int]] = {}
    for thread in threads.values():
        for i, e in enumerate(thread.events):
            at.setdefault((e.tid, round(e.ts, 3)), (thread, i))

    def op_of(tid, ts) -> Optional[str]:
        place = at.get((tid, round(ts, 3)))
        if place is None:
            return None
        thread, i = place
        chain = [i] + list(_ancestor_indices(thread, i))
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


def _launched_by(collectives: list[Collective], ops: list[Op], step: _Step) -> list[Collective]:
    """The op during or right after which each of the step's collectives was launched."""
    starts = [op.start_ms for op in ops]
    result = []
    for c in collectives:
        if c.step == step.index and ops:
            k = bisect.bisect_right(starts, c.launch_ms) - 1
            if k >= 0:
                c = c._replace(op=ops[k].id)
        result.append(c)
    return result


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
    threads = {tid: _Thread(events) for tid, events in by_tid.items()}
    steps = _steps(path, threads)
    step = _pick_step(path, steps, threads, step_wanted)
    grads = _gradient_events(threads, step)
    tensors = _gradient_tensors(path, [t.events[i] for t, i in grads])
    note = None
    if variables is not None:
        tensors, note = name_gradients(tensors, variables, sizes_path or "the sidecar")
        if variables and all(t.index is None for t in tensors) and tensors[0].shape is not None:
            raise SizesError(sizes_path, 1, f"no parameter matches a gradient of {path} by shape "
                             "and dtype; pass the sidecar of this model with --sizes")
    ops, where = _ops(threads, step, grads)
    ops = _pair_forward_backward(ops, where, threads, ev.flows)
    launches = _launches(threads)
    _pair_runs(launches, ev, threads)
    collectives = _launched_by(_collectives(launches, steps, threads), ops, step)
    window = _backward_window(threads, step)
    updates = [op.dur_ms for op in ops if op.kind is OpKind.UPDATE]
    world = _world(ev.top)
    info = StepInfo(
        step.label, step.index, (step.end - step.ts) / 1000.0,
        None if window is None else (window[0] - step.ts) / 1000.0,
        None if window is None else (window[1] - step.ts) / 1000.0,
        sum(updates) if updates else None, tuple(s.label for s in steps), world.get("world_size"))
    shapes = any(t.shape is not None for t in tensors)
    which = "the last with a backward pass" if step_wanted is None else "--step"
    notes = [f"step: {step.label} ({which}; the trace holds {len(steps)}: "
             f"{', '.join(s.label for s in steps[:8])}{', ...' if len(steps) > 8 else ''})"]
    if world:
        notes.append("distributed: " + ", ".join(f"{k} {v}" for k, v in world.items()))
    if note:
        notes.append(note)
    elif tensors and shapes:
        notes.append("names: position and shape; pass the parameter sidecar with --sizes FILE "
                     "(see the README) for the model's own names")
    meta = TraceMeta(rank=world.get("rank"), world_size=world.get("world_size"),
                     backend=world.get("backend"), notes=tuple(notes), record_shapes=shapes,
                     sizes=sizes_path if variables is not None else None)
    abilities = Abilities(ReadinessMethod.RECORDED, ComputeSource.MEASURED, VariableOrder.INDEX,
                          f"recorded: a gradient is ready when its AccumulateGrad ends ({step.label})",
                          sizes_hint=SIZES_HINT)
    return Trace.build(path, FORMAT, ops, tensors, (), meta, abilities, collectives, info)
