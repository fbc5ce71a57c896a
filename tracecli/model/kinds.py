"""The kinds a trace's records take, and what a format's traces can answer.

Kinds follow the Chakra execution-trace schema's vocabulary (``NodeType``,
``CollectiveCommType``) where one exists; values are what the JSON outputs show.

>>> OpKind.GRADIENT.is_backward, OpKind.FORWARD.is_backward
(True, False)
>>> DTYPE_BYTES["bfloat16"]
2
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "DTYPE_BYTES",
    "ReadinessMethod",
    "ComputeSource",
    "VariableOrder",
    "Abilities",
    "GENERIC_ABILITIES",
    "CollectiveKind",
    "Purpose",
    "NodeType",
    "OpKind",
    "TensorKind",
    "EdgeKind",
    "BACKWARD_KINDS",
]

DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "half": 2, "float": 4,
    "double": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}


class ReadinessMethod(str, enum.Enum):
    """How the order in which gradients become ready is derived from a trace."""

    AUTOGRAD_REPLAY = "autograd-replay"  # replay the autograd engine from the loss (Chainer)
    RECORDED = "recorded"  # backward ops in recorded order; ready after the last producer
    OP_NAMES = "op-names"  # an executed op list: hand-offs, producers by name, fallbacks


class ComputeSource(str, enum.Enum):
    """Where a trace's compute times can come from."""

    ROOFLINE = "roofline"  # inferred shapes: FLOPs and bytes against a device preset
    MEASURED = "measured"  # op durations recorded in the trace
    NONE = "none"  # nothing: the user gives --backward-ms or --op-times


class VariableOrder(str, enum.Enum):
    """The model's own parameter order (tf_cnn_benchmarks groups gradients in it)."""

    FIRST_USE = "first-use"  # order of first use in forward
    INDEX = "index"  # each parameter tensor's ``index`` (trainable-variable order)


@dataclass(frozen=True)
class Abilities:
    """What a parser declares its traces can answer; analyses ask this, never the format.

    ``readiness_note`` names the readiness method in reports; ``sizes_hint`` says how to
    supply sizes the trace may lack ("" when it always carries them); ``framework`` names
    the training framework whose run produced the trace (``pytorch``, ``horovod``,
    ``tensorflow``, ``chainer``; "" when the trace does not say), so advice leads with it.
    """

    readiness: ReadinessMethod
    compute: ComputeSource
    variable_order: VariableOrder
    readiness_note: str
    infers_shapes: bool = False
    sizes_hint: str = ""
    framework: str = ""


GENERIC_ABILITIES = Abilities(ReadinessMethod.RECORDED, ComputeSource.NONE, VariableOrder.INDEX,
                              "backward ops in recorded order; ready after the last producer")


class CollectiveKind(str, enum.Enum):
    """A collective's kind (Chakra: ``CollectiveCommType``); values as the JSON shows them."""

    ALL_REDUCE = "allreduce"
    BROADCAST = "broadcast"
    ALL_GATHER = "allgather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "alltoall"
    REDUCE = "reduce"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"
    SEND = "send"  # point-to-point (Chakra: COMM_SEND_NODE), pipeline stages' activations
    RECV = "recv"  # (Chakra: COMM_RECV_NODE)
    OTHER = "other"

    @property
    def point_to_point(self) -> bool:
        """A send or a recv: two ranks, matched by their peers, not by a group's order."""
        return self in (CollectiveKind.SEND, CollectiveKind.RECV)


class Purpose(str, enum.Enum):
    """What a collective of the traced step was for; values as the JSON shows them."""

    GRADIENTS = "gradients"  # reduces gradients (a bucket)
    BUFFERS = "buffers"  # DDP's broadcast of buffers in forward
    UNUSED_MAP = "unused-map"  # DDP's integer map of the parameters used this step
    OTHER = "other"


class NodeType(str, enum.Enum):
    """What a graph node is (Chakra: ``NodeType``, reduced to what a step trace holds)."""

    OP = "op"
    TENSOR = "tensor"
    COLLECTIVE = "collective"  # Chakra: COMM_COLL_NODE


class OpKind(str, enum.Enum):
    """The role of an op in the step."""

    SETUP = "setup"  # constants, layout rewrites, shape ops, variable reads
    FORWARD = "forward"
    BACKWARD = "backward"
    GRADIENT = "gradient"  # a backward op that produces a parameter gradient
    ALLREDUCE_INPUT = "allreduce_input"  # the gradient handed to the collective library
    ALLREDUCE = "allreduce"  # the collective itself (Chakra ALL_REDUCE)
    ALLREDUCE_OUTPUT = "allreduce_output"  # the reduced gradient is available
    UPDATE = "update"  # optimizer step of one variable
    BROADCAST = "broadcast"  # initial variable broadcast (Chakra BROADCAST)
    OTHER = "other"

    @property
    def is_backward(self) -> bool:
        """Whether ops of this kind run in the backward pass."""
        return self in BACKWARD_KINDS


class TensorKind(str, enum.Enum):
    """The role of an array in the step."""

    PARAMETER = "parameter"
    INPUT = "input"  # a named input of the step: data, labels
    ACTIVATION = "activation"  # anonymous arrays: activations and temporaries


class EdgeKind(str, enum.Enum):
    """What a graph edge means (see :mod:`tracecli.model`)."""

    DATA = "data"
    GRADIENT = "gradient"
    BACKWARD_OF = "backward_of"
    HANDOFF = "handoff"
    ALLREDUCE = "allreduce"
    UPDATE = "update"
    LAUNCH = "launch"  # op -> the collective it issued
    CARRIED_BY = "carried_by"  # gradient -> the collective that reduced it (as run)
    NEXT = "next"  # op -> the next op on its thread; collective -> the next on its stream


BACKWARD_KINDS = frozenset({OpKind.BACKWARD, OpKind.GRADIENT})
