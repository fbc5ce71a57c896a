"""One step of an FSDP run, read from a profiler trace: its units, the collectives FSDP
issued (unit, phase, unsharded size, dtype, group, when), and the step's program (the
compute between FSDP's hooks, FSDP's own time left out).

The system is told by its labels: FSDP2's ``FSDP::...`` (:mod:`.kineto_fsdp2`), FSDP1's
``FullyShardedDataParallel....`` (:mod:`.kineto_fsdp1`). Compute is what the step's ops
take outside FSDP's labels: forward, the outermost host ops of the step's thread; backward,
each autograd node minus the FSDP hooks it ran (on CPU a hook blocks in its collective, so
its time is communication, not compute). A hook inside an autograd node is placed at the
node's start when it ran before the node's own op (a pre-backward hook on its output), else
at its end (a post-accumulate hook).
"""

from __future__ import annotations

from typing import Optional

from ..model import CollectiveKind
from ..model.fsdp import FsdpComm, FsdpMark, FsdpRun, FsdpUnit
from .kineto_fsdp1 import attribute1, label1
from .kineto_fsdp2 import Label, attribute2, label2, unsharded_elements
from .kineto_threads import EVALUATE, in_window

__all__ = ["fsdp_run"]


def fsdp_run(path: str, threads: dict, step, launches: list, ran: list, grads: list,
             grad_numels: list, world: Optional[int], where: dict) -> Optional[FsdpRun]:
    """The FSDP run of ``step``, or ``None`` when the step has no FSDP label; ``where``
    maps each op's event (``(id(thread), index)``) to its op id."""
    labels = []
    for thread, i in in_window(threads, step):
        e = thread.events[i]
        if e.cat != "user_annotation":
            continue
        two = label2(e.name)
        if two is not None:
            labels.append(Label(thread, i, e, *two))
            continue
        one = label1(e.name)
        if one is not None:
            labels.append(Label(thread, i, e, one, ""))
    if not labels:
        return None
    labels.sort(key=lambda l: (l.event.ts, -l.event.dur, l.event.line))
    mine = [l for l in launches if step.ts <= l.event.ts < step.end]
    fsdp1 = any(l.event.name.startswith("FullyShardedDataParallel.") for l in labels)
    world = world or 1
    if fsdp1:
        attr = attribute1(path, labels, mine, grads, grad_numels, world)
    else:
        attr = attribute2(path, labels, mine, grads, world)
    ids = {(c.kind, c.step, c.launch_ms): c for c in ran}
    comms = [_comm(c, world, step, ids) for c in attr.comms]
    shard = max((c.group_size for c in comms if c.kind is CollectiveKind.ALL_GATHER
                 and c.phase == "forward" and c.group_size), default=world)
    replicate = world // shard if any(c.kind is CollectiveKind.ALL_REDUCE for c in comms) else 1
    comms = [c._replace(group_size=replicate) if c.kind is CollectiveKind.ALL_REDUCE else c
             for c in comms]
    by_unit: dict[str, list[FsdpComm]] = {}
    for c in comms:
        by_unit.setdefault(c.unit, []).append(c)
    grads_of: dict[str, list[str]] = {}
    for k, u in sorted(attr.gradient_unit.items()):
        grads_of.setdefault(u, []).append(f"g{k}")
    units = tuple(_unit(name, parent, attr, by_unit.get(name, []), grads_of.get(name, []))
                  for name, parent in attr.units)
    notes = ()
    if fsdp1:
        notes = ("FSDP1's labels name no module: its units are named root, unit1, unit2, ... in "
                 "forward order",)
    program, node_ms = _program(threads, step, labels, attr)
    op_ms = []
    thread_of = {id(t): t for t in threads.values()}
    for (thread_id, i), op_id in where.items():
        ms = node_ms.get((thread_id, i))
        if ms is None:  # a gradient's accumulation: its node's time
            ms = node_ms.get((thread_id, thread_of[thread_id].parent[i]))
        if ms is not None:
            op_ms.append((op_id, ms))
    forward = sum(ms for (thread_id, i), ms in node_ms.items() if thread_id == -1)
    return FsdpRun(attr.system, step.index, world, shard, replicate, units, tuple(comms),
                   program, 0.0, notes, "order" if fsdp1 else "labels", forward,
                   tuple(sorted(op_ms, key=lambda x: int(x[0][2:]) if x[0][2:].isdigit() else 0)))



def _comm(found, world: int, step, ids: dict) -> FsdpComm:
    launch, unit, phase, via, by = found
    t0 = step.ts
    launch_ms = (launch.event.ts - t0) / 1000.0
    c = ids.get((launch.kind, step.index, launch_ms))
    return FsdpComm(launch.kind, phase, unit, unsharded_elements(launch, world) or 0,
                    launch.dtype, _group(launch, world), via, by,
                    c.id if c is not None else None, launch_ms,
                    c.start_ms if c is not None else None, c.end_ms if c is not None else None,
                    launch.event.line)


def _group(launch, world: int) -> Optional[int]:
    """The ranks a collective ran on: its output over its input (all-gather) or input over
    output (reduce-scatter); NCCL's ``Group size``; FSDP1's list all-gather: the world."""
    args = launch.event.args or {}
    if isinstance(args.get("Group size"), int):
        return args["Group size"]
    dims = args.get("Input Dims")
    if launch.event.name == "c10d::allgather_":
        return world
    if isinstance(dims, list) and len(dims) > 1 and all(
            isinstance(d, list) and d and all(isinstance(x, int) for x in d) for d in dims[:2]):
        a, b = _numel(dims[0]), _numel(dims[1])
        big, small = (a, b) if launch.kind is CollectiveKind.ALL_GATHER else (b, a)
        if small and big % small == 0:
            return big // small
    return None


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _unit(name: str, parent: Optional[str], attr, mine: list[FsdpComm],
          gradients: list[str]) -> FsdpUnit:
    numels, shapes = attr.layouts.get(name, (None, None))
    gathers = [c for c in mine if c.kind is CollectiveKind.ALL_GATHER]
    reduces = [c for c in mine if c.kind is not CollectiveKind.ALL_GATHER]
    backward = [c for c in gathers if c.phase == "backward"]
    return FsdpUnit(name, parent, numels or (), shapes or (), tuple(gradients), name in attr.deferred,
                    attr.explicit_forward.get(name), attr.explicit_backward.get(name),
                    gathers[0].dtype if gathers else None,
                    reduces[0].dtype if reduces else None,
                    backward[0].group_size if backward else None)


def _program(threads: dict, step, labels: list[Label], attr) -> tuple[tuple[FsdpMark, ...], dict]:
    """The step's compute and hooks, in the order they ran (see the module's docstring),
    and each autograd node's compute (ms) by its place."""
    t0, hooks = step.ts, attr.hooks
    at: dict[tuple[int, int], Label] = {(id(l.thread), l.i): l for l in labels}
    items: list[tuple[tuple, str, str, float]] = []  # (key, kind, unit, ms)
    backward = []
    for thread, i in in_window(threads, step):
        e = thread.events[i]
        if e.name.startswith(EVALUATE) and not any(
                a.name.startswith(EVALUATE) for a in thread.ancestors(i)):
            backward.append((thread, i))
    start = min((t.events[i].ts for t, i in backward), default=step.end)
    inside: set[int] = set()
    node_ms: dict[tuple[int, int], float] = {}
    for thread, i in backward:
        found = _node(thread, i, at, hooks, attr.marks, inside)
        node_ms[(id(thread), i)] = found[0][3] / 1000.0
        items.extend(found)
    main = threads[step.tid]
    forward = 0.0
    for i in main.within(step.ts, start):
        e = main.events[i]
        chain = list(main.ancestors(i))
        if e.cat == "cpu_op" and all(a.cat == "user_annotation" and id(a) not in hooks
                                     and not a.name.startswith("Optimizer.") for a in chain):
            items.append(((e.ts, 1, 0), "compute", "", e.dur))
            forward += e.dur
    node_ms[(-1, 0)] = forward / 1000.0  # forward, all of it
    for l in labels:
        mark = attr.marks.get(id(l.event))
        if mark is not None and id(l.event) not in inside:
            items.append(((l.event.ts, 0, l.event.line), mark[0], mark[1], 0.0))
    items.sort(key=lambda item: item[0])
    program: list[FsdpMark] = []
    for key, kind, unit, us in items:
        ms = us / 1000.0
        if kind == "compute" and program and program[-1].kind == "compute":
            program[-1] = program[-1]._replace(ms=program[-1].ms + ms)
        else:
            program.append(FsdpMark(kind, unit, ms, (key[0] - t0) / 1000.0))
    return tuple(program), node_ms


def _node(thread, i: int, at: dict, hooks: set, marks: dict, inside: set) -> list:
    """One autograd node: its hooks (at its start or end) and its compute, FSDP's time out."""
    e = thread.events[i]
    end = e.ts + e.dur
    hook_us, first_compute, found = 0.0, None, []
    hook_end = -1.0
    for j in range(i + 1, len(thread.events)):
        c = thread.events[j]
        if c.ts >= end:
            break
        label = at.get((id(thread), j))
        if label is not None and id(c) in hooks:
            if c.ts >= hook_end:
                hook_us += c.dur
                hook_end = c.ts + c.dur
            if id(c) in marks:
                found.append((c, label))
        elif c.cat == "cpu_op" and c.ts >= hook_end and first_compute is None:
            first_compute = c.ts
    out: list[tuple[tuple, str, str, float]] = [((e.ts, 1, e.line), "compute", "", max(0.0, e.dur - hook_us))]
    for c, label in found:
        inside.add(id(c))
        before = first_compute is None or c.ts < first_compute
        kind, unit = marks[id(c)]
        out.append(((e.ts, 0 if before else 2, c.line), kind, unit, 0.0))
    return out
