"""Pairing a Chainer dump's backward records with their forward records, on its graph.

A backward record names its function's class and generation (Chainer's ``rank``) and the
arrays it reads and writes; its partner is the forward record of the same class and
generation that consumed its outputs and created its upstream gradients. The backward
record takes its partner's layer.

The pairing reads the dump's :class:`~tracecli.model.graph.TraceGraph` (the parser builds
it from the records before pairing: data and gradient edges) through its adjacency: an
array's creator is its forward ``DATA`` predecessor, the forward records reading an array
are its ``DATA`` successors, and "its outputs are the forward record's inputs" is an edge
lookup. Each pair becomes a ``BACKWARD_OF`` edge and the paired record on the backward
op's node.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..errors import TraceFormatError
from ..model import Op, OpKind

__all__ = ["pair_and_layer"]


def pair_and_layer(path: str, graph: "TraceGraph") -> list[Op]:  # noqa: F821
    """Link each backward record of ``graph`` to its forward record, whose layer it takes:
    adds the ``BACKWARD_OF`` edges and puts the paired records on the graph's nodes.
    Returns the op records in file order."""
    ops = graph.ops()
    forward = OpKind.FORWARD
    creator, has_edge = graph.creator, graph.has_edge
    for op in ops:  # each array has one creator: its first DATA predecessor is this op
        if op.kind is not forward:
            continue
        outputs = op.outputs
        repeats = len(outputs) > 1 and len(set(outputs)) < len(outputs)
        for k, tid in enumerate(outputs):
            first = creator(tid)
            if first is op and not (repeats and tid in outputs[:k]):
                continue  # (an array listed twice by one record: that record came first)
            raise TraceFormatError(
                f"tensor {tid[1:]} is produced by two forward records "
                f"(the first on line {first.line}); each array has one creator", path=path, line=op.line,
            )

    def fits(f: Op, op: Op, grads: list[str]) -> bool:
        if f.name != op.name or f.generation != op.generation:
            return False
        fid = f.id
        return all(has_edge(t, fid) for t in op.outputs) and all(has_edge(fid, t) for t in grads)

    # A backward record's partner is the forward record of its class and rank that consumed
    # its outputs and created its upstream gradients. Each array has one creator, so the
    # creator of a gradient input is the only candidate: linear, however many records share
    # a class and rank. Records without a gradient input (rare) search the forward readers
    # of an input they produced a gradient for, or all records of their class and rank.
    by_key: Optional[dict[tuple[str, int], list[Op]]] = None
    paired: set[str] = set()
    result = []
    for op in ops:
        if op.kind is forward:
            result.append(op)
            continue
        grads = [tid for tid, role in zip(op.inputs, op.input_roles) if role == "gradient"]
        if grads:
            found = creator(min(grads))
            candidates = [found] if found is not None and fits(found, op, grads) else []
        elif op.outputs:
            candidates = [f for f in graph.consumers(op.outputs[0])
                          if f.kind is forward and fits(f, op, grads)]
        else:
            if by_key is None:
                by_key = defaultdict(list)
                for f in ops:
                    if f.kind is forward:
                        by_key[(f.name, f.generation)].append(f)
            candidates = [f for f in by_key.get((op.name, op.generation), ()) if fits(f, op, grads)]
        if not candidates:
            raise TraceFormatError(
                f"backward {op.name} (rank {op.generation}) has no forward record "
                "with the same class and rank whose inputs are its outputs; the dump is "
                "incomplete or this record is corrupt", path=path, line=op.line,
            )
        free = [f for f in candidates if f.id not in paired]
        if not free:
            raise TraceFormatError(
                f"second backward record for forward {op.name} (rank "
                f"{op.generation}) on line {candidates[0].line}; each forward record has one", path=path, line=op.line,
            )
        partner = free[0]
        paired.add(partner.id)
        op = Op(op.id, op.kind, op.name, op.line, op.position, partner.layer, op.generation,
                op.attrs, op.inputs, op.input_roles, op.outputs, partner.id)
        graph.pair(op)
        result.append(op)
    return result
