"""Which torch.nn layers pass which parameter to which operator, by argument position.

A profiler trace names an operator's arguments by position only (``Input Dims``,
``Input type``). For the layers below, torch's own ``forward`` passes its parameters
straight to one ATen operator, as that operator's arguments of the same name
(``nn.Linear.forward``: ``F.linear(input, self.weight, self.bias)``, i.e.
``aten::linear(Tensor input, Tensor weight, Tensor? bias)``). So where a gradient's shape
and dtype match exactly one argument of that operator, inside that layer's own scope, the
argument's position says which parameter it is. ``tests/parsers/test_kineto_roles.py``
checks the table against torch itself: each operator's schema, and each layer profiled.

The layer must be torch's own, not a class of the same ``__name__``: the trace names a
module by its class's ``__name__`` only, so the role is read only where the operator runs
inside torch's own ``forward`` of that layer, which the Python tracer records as a frame
``torch/nn/modules/<file>.py(<line>): forward`` (:data:`LAYER_FILES`, :func:`layer_file`)
inside the layer's scope. A user's class called ``Linear`` whose forward calls
``F.linear(x, self.w, self.b)`` runs it in its own file, so its gradients keep the
module and position.

Layers whose parameters share a shape (``BatchNorm*``, ``LayerNorm``, ``GroupNorm``: weight
and bias, and the running statistics, are all ``[C]``) are not here: their arguments cannot
be told apart by shape, and nothing else in the trace tells them apart.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["LAYER_OPS", "ROLE_OPS", "LAYER_FILES", "layer_file"]

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

# the file of torch/nn/modules/ that defines each layer's forward
LAYER_FILES: dict[str, str] = {"Linear": "linear", "Embedding": "sparse",
                               **{c: "conv" for c in LAYER_OPS if c.startswith("Conv")}}

_FORWARD_FRAME = re.compile(r"(?:.*/)?torch/nn/modules/(%s)\.py\(\d+\): forward"
                            % "|".join(sorted(set(LAYER_FILES.values()))))


def layer_file(frame: str) -> Optional[str]:
    """The file (``linear``) of a Python tracer frame that is the ``forward`` of one of
    torch's layers above, else ``None``.

    >>> layer_file("torch/nn/modules/linear.py(130): forward"), layer_file("model.py(12): forward")
    ('linear', None)
    """
    if "torch/nn/modules/" not in frame:  # most frames: a cheap test before the pattern
        return None
    m = _FORWARD_FRAME.fullmatch(frame)
    return m[1] if m else None
