"""Which torch.nn layers pass which parameter to which operator, by argument position.

A profiler trace names an operator's arguments by position only (``Input Dims``,
``Input type``). For the layers below, torch's own ``forward`` passes its parameters
straight to one ATen operator, as that operator's arguments of the same name
(``nn.Linear.forward``: ``F.linear(input, self.weight, self.bias)``, i.e.
``aten::linear(Tensor input, Tensor weight, Tensor? bias)``). So where a gradient's shape
and dtype match exactly one argument of that operator, inside that layer's own scope, the
argument's position says which parameter it is. ``tests/parsers/test_kineto_roles.py``
checks the table against torch itself: each operator's schema, and each layer profiled.

Layers whose parameters share a shape (``BatchNorm*``, ``LayerNorm``, ``GroupNorm``: weight
and bias, and the running statistics, are all ``[C]``) are not here: their arguments cannot
be told apart by shape, and nothing else in the trace tells them apart.
"""

from __future__ import annotations

__all__ = ["LAYER_OPS", "ROLE_OPS"]

_WEIGHT_BIAS = {1: "weight", 2: "bias"}

# the operator each layer's forward calls, and its parameters by argument position
LAYER_OPS: dict[str, tuple[str, dict[int, str]]] = {
    "Linear": ("aten::linear", _WEIGHT_BIAS),
    "Conv1d": ("aten::conv1d", _WEIGHT_BIAS),
    "Conv2d": ("aten::conv2d", _WEIGHT_BIAS),
    "Conv3d": ("aten::conv3d", _WEIGHT_BIAS),
    "ConvTranspose1d": ("aten::conv_transpose1d", _WEIGHT_BIAS),
    "ConvTranspose2d": ("aten::conv_transpose2d", _WEIGHT_BIAS),
    "ConvTranspose3d": ("aten::conv_transpose3d", _WEIGHT_BIAS),
    "Embedding": ("aten::embedding", {0: "weight"}),
}

ROLE_OPS = frozenset(op for op, _ in LAYER_OPS.values())  # whose shapes the reader keeps
