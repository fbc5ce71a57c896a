"""The Trace: one training step as typed records and, on demand, a networkx graph.

Op, tensor and collective nodes, each carrying its typed record (:class:`Op`,
:class:`Tensor`, :class:`Collective`: what a profiled run executed) under the node attribute
``data``. Edges carry an :class:`EdgeKind`:

- ``DATA``: op -> tensor it produces, tensor -> op that consumes it (forward ops, and the
  forward arrays a backward op retains);
- ``GRADIENT``: backward/gradient op -> tensor whose gradient it produces;
- ``BACKWARD_OF``: backward op -> the forward op it differentiates;
- ``HANDOFF``, ``ALLREDUCE``, ``UPDATE``: the inferred chain of an op list,
  parameter -> all-reduce input -> all-reduce output -> update op;
- ``LAUNCH``: the op that issued a collective -> that collective (profiler traces);
- ``CARRIED_BY``: gradient -> the collective that reduced it in the run (the as-run match,
  :func:`tracecli.analysis.observed.with_carried_by`);
- ``NEXT``: op -> the next op of the step on its host thread; collective -> the next
  collective on its stream (``Collective.lane``).

A backward op that both reads a forward array and produces its gradient gives a 2-cycle,
so the whole graph is not a DAG; its forward part is (the Chainer parser checks that).

Modules: :mod:`.kinds` (the enums and what a format's traces can answer),
:mod:`.records` (the immutable records and :class:`TraceMeta`), :mod:`.trace` (the
:class:`Trace`), :mod:`.graph` (graph algorithms and the networkx graph: the only module
that knows networkx). Kinds follow the Chakra execution-trace schema's vocabulary
(``NodeType``, ``CollectiveCommType``) where one exists.
"""

from __future__ import annotations

from .kinds import (
    BACKWARD_KINDS,
    DTYPE_BYTES,
    GENERIC_ABILITIES,
    Abilities,
    CollectiveKind,
    ComputeSource,
    EdgeKind,
    NodeType,
    OpKind,
    Purpose,
    ReadinessMethod,
    TensorKind,
    VariableOrder,
)
from .records import (CHECKPOINT_NOTE, NO_META, Collective, Link, Op, ParamMeta, StepInfo, Tensor,
                      TraceMeta, check_fields)
from .trace import Trace

__all__ = [
    "Abilities",
    "ReadinessMethod",
    "ComputeSource",
    "VariableOrder",
    "CollectiveKind",
    "Purpose",
    "Collective",
    "StepInfo",
    "NodeType",
    "OpKind",
    "TensorKind",
    "EdgeKind",
    "Op",
    "Tensor",
    "ParamMeta",
    "NO_META",
    "Link",
    "TraceMeta",
    "TraceGraph",
    "Trace",
    "DTYPE_BYTES",
    "BACKWARD_KINDS",
    "GENERIC_ABILITIES",
    "check_fields",
    "CHECKPOINT_NOTE",
]


def __getattr__(name: str):
    """``TraceGraph`` is made on first use: networkx costs a tenth of a second to import,
    and most commands never build the graph."""
    if name == "TraceGraph":
        from .graph import TraceGraph

        return TraceGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
