"""A parameter list given as the trace: a model before any profile.

The file is a sizes sidecar (:mod:`.sizes`): a JSON list, in ``named_parameters()`` order, of
``{"name", "shape", "dtype"}`` and the parameter's marks (:class:`~tracecli.model.ParamMeta`),
which a Megatron-Core or DeepSpeed user can write before any run, in one line of Python
(``docs/inputs.md``). With no trace, the step is a model, and every report says so:

- readiness: the reverse of the list's order, one gradient after another: what
  Megatron-Core assumes (``named_parameters()`` walked in reverse "to roughly follow
  backprop order") and what DDP's first buckets assume;
- compute: each parameter's backward a roofline of its bytes (``ComputeSource.PARAMETERS``),
  or ``--backward-ms`` shared in those proportions, or ``--op-times`` by parameter name.

Each parameter is a tensor ``p<K>`` (K its place in the list) whose gradient one backward op
``op<J>`` produces, ops in readiness order; the op is named after its parameter, so
``--op-times`` can time it by name or by layer.
"""

from __future__ import annotations

from ..errors import TraceFormatError, excerpt
from ..model import (
    Abilities, ComputeSource, Op, OpKind, ReadinessMethod, Tensor, TensorKind, Trace, TraceMeta,
    VariableOrder,
)
from .sizes import Variable, line_of, read_sizes, variable_layer

__all__ = ["looks_like", "parse", "FORMAT", "READINESS"]

FORMAT = "params"
READINESS = ("a model without a profile: gradients ready one after another in the reverse of "
             "the parameter list's (named_parameters()) order, as Megatron-Core assumes")


def looks_like(head: str) -> bool:
    """A JSON list whose first entry has a shape: a parameter list, not a trace."""
    text = head.lstrip("\ufeff \t\r\n")
    if not text.startswith("["):
        return False
    entry = text[1:].lstrip(" \t\r\n")
    return entry.startswith("{") and '"shape"' in entry[:4096]


def _layer(name: str) -> str:
    """A PyTorch name's module (``decoder.layers.0.mlp``), a TensorFlow name's scope."""
    if "/" not in name and "." in name:
        return name.rsplit(".", 1)[0]
    return variable_layer(name)


def parse(path: str, data: bytes) -> Trace:
    """The parameter list at ``path`` (its bytes ``data``) as a trace of one modelled step."""
    variables = read_sizes(path, data)
    seen: set[str] = set()
    for v in variables:
        if v.name in seen:
            raise TraceFormatError(f"parameter {excerpt(v.name)} is listed twice; a parameter list "
                                   "names each parameter once, as named_parameters() does",
                                   path=path, line=v.line or line_of(path, v.index))
        seen.add(v.name)
    tensors = [_tensor(v) for v in variables]
    ops = []
    for position, t in enumerate(reversed(tensors)):  # readiness: the list reversed
        ops.append(Op(f"op{position}", OpKind.BACKWARD, t.name, t.line or 1, position,
                      layer=t.layer, outputs=(t.id,)))
    notes = (f"a parameter list: {len(tensors)} parameters, no trace; {READINESS}",)
    meta = TraceMeta(notes=notes, sizes=path)
    abilities = Abilities(ReadinessMethod.RECORDED, ComputeSource.PARAMETERS, VariableOrder.INDEX,
                          READINESS)
    return Trace.build(path, FORMAT, ops, tensors, (), meta, abilities)


def _tensor(v: Variable) -> Tensor:
    return Tensor(f"p{v.index}", TensorKind.PARAMETER, v.name, v.nbytes, v.line or None,
                  _layer(v.name), v.dtype, v.shape, v.index, False, v.meta)
