"""Pairing a Chainer dump's backward records with their forward records.

A backward record names its function's class and generation (Chainer's ``rank``) and the
arrays it reads and writes; its partner is the forward record of the same class and
generation that consumed its outputs and created its upstream gradients. The backward
record takes its partner's layer.

The pairing reads the records, and its pairs become the ``BACKWARD_OF`` edges of
``trace.graph`` when that is built: the graph is not built while parsing, since that takes
``inspect --json`` on a 100,000-op dump past its 3 s target (:mod:`tracecli.model.graph`
has the measurement). ``tests/model/test_graph_build.py`` checks every pair against the graph.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..errors import TraceFormatError
from ..model import Op, OpKind, Tensor

__all__ = ["pair_and_layer"]


def pair_and_layer(path: str, ops: list[Op], tensors: dict[str, Tensor]) -> list[Op]:
    """Link each backward record to its forward record, whose layer it takes."""
    producer: dict[str, Op] = {}
    forward = OpKind.FORWARD
    for op in ops:
        if op.kind is not forward:
            continue
        for tid in op.outputs:
            if tid in producer:
                raise TraceFormatError(
                    f"tensor {tid[1:]} is produced by two forward records "
                    f"(the first on line {producer[tid].line}); each array has one creator", path=path, line=op.line,
                )
            producer[tid] = op

    def fits(f: Op, op: Op, outs: set[str], grads: set[str]) -> bool:
        if f.name != op.name or f.generation != op.generation:
            return False
        if len(f.inputs) + len(f.outputs) <= 16:  # small records: no sets to build
            return all(t in f.inputs for t in outs) and all(t in f.outputs for t in grads)
        return outs <= set(f.inputs) and grads <= set(f.outputs)

    # A backward record's partner is the forward record of its class and rank that consumed
    # its outputs and created its upstream gradients. Each array has one creator, so the
    # creator of a gradient input is the only candidate: linear, however many records share
    # a class and rank. Records without a gradient input (rare) search by an input they
    # produced a gradient for, or among all records of their class and rank.
    by_input: Optional[dict[tuple[str, int, str], list[Op]]] = None
    by_key: Optional[dict[tuple[str, int], list[Op]]] = None
    paired: dict[str, Op] = {}
    result = []
    for op in ops:
        if op.kind is forward:
            result.append(op)
            continue
        grads = {tid for tid, role in zip(op.inputs, op.input_roles) if role == "gradient"}
        outs = set(op.outputs)
        if grads:
            creator = producer.get(min(grads))
            candidates = [creator] if creator is not None and fits(creator, op, outs, grads) else []
        elif op.outputs:
            if by_input is None:
                by_input = defaultdict(list)
                for f in ops:
                    if f.kind is forward:
                        for tid in dict.fromkeys(f.inputs):
                            by_input[(f.name, f.generation, tid)].append(f)
            candidates = [f for f in by_input.get((op.name, op.generation, op.outputs[0]), ())
                          if fits(f, op, outs, grads)]
        else:
            if by_key is None:
                by_key = defaultdict(list)
                for f in ops:
                    if f.kind is forward:
                        by_key[(f.name, f.generation)].append(f)
            candidates = [f for f in by_key.get((op.name, op.generation), ()) if fits(f, op, outs, grads)]
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
        paired[partner.id] = op
        result.append(Op(op.id, op.kind, op.name, op.line, op.position, partner.layer, op.generation,
                         op.attrs, op.inputs, op.input_roles, op.outputs, partner.id))
    return result
