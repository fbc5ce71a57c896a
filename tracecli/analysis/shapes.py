"""Shape inference for Chainer dumps, and each op's FLOPs and bytes moved (DESIGN 2.1).

Dumps record byte sizes only. The batch comes from the label array (int32, one per
sample); channels from bias sizes; kernel sizes from weight sizes; spatial sizes from
activation sizes (square feature maps). Shapes propagate through the forward ops in rank
order; a tensor whose shape cannot be pinned down is left out rather than guessed.
FLOPs never need the shapes: a convolution or linear layer does
``2 · output elements · (weight elements / output channels)`` multiply-adds.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional

from ..model import DTYPE_BYTES, Op, OpKind, Tensor, TensorKind, Trace

__all__ = ["ShapeReport", "OpCost", "infer_shapes", "op_costs"]

_MATMUL_OPS = {"Convolution2DFunction", "Convolution2D", "LinearFunction", "Linear",
               "Deconvolution2DFunction", "ConvolutionND", "DilatedConvolution2DFunction"}
_LOSSES = {"SoftmaxCrossEntropy", "SigmoidCrossEntropy", "MeanSquaredError"}


class OpCost(NamedTuple):
    flops: float
    nbytes: float


class ShapeReport(NamedTuple):
    batch: Optional[int]
    shapes: dict[str, tuple[int, ...]]  # tensor id -> shape, where known


def _elements(t: Tensor) -> int:
    return t.nbytes // DTYPE_BYTES.get(t.dtype or "float32", 4)


def _square(n: float) -> Optional[int]:
    if n <= 0 or n != int(n):
        return None
    root = math.isqrt(int(n))
    return root if root * root == int(n) else None


def _batch(trace: Trace) -> Optional[int]:
    forward = OpKind.FORWARD
    for op in trace.ops():
        if op.kind is forward and op.name in _LOSSES and len(op.inputs) >= 2:
            labels = trace.tensor(op.inputs[1])
            if labels.kind is TensorKind.INPUT and labels.nbytes and labels.nbytes % 4 == 0:
                return labels.nbytes // 4  # int32 labels, one per sample
    return None


def infer_shapes(trace: Trace) -> ShapeReport:
    """Shapes of the tensors of a Chainer dump, where the sizes pin them down."""
    batch = _batch(trace)
    shapes: dict[str, tuple[int, ...]] = {}
    if batch is None or batch <= 0:
        return ShapeReport(batch, shapes)
    input_kind = TensorKind.INPUT
    for t in trace.tensors():
        if t.kind is input_kind and t.nbytes is not None and t.nbytes // 4 == batch and t.nbytes % 4 == 0:
            shapes[t.id] = (batch,)
    kind = OpKind.FORWARD
    forward = sorted((op for op in trace.ops() if op.kind is kind),
                     key=lambda op: (op.generation, op.position))
    tensor = {t.id: t for t in trace.tensors()}.__getitem__
    for op in forward:
        _infer(tensor, op, batch, shapes)
    return ShapeReport(batch, shapes)


@functools.lru_cache(maxsize=4096)
def _conv_shape(x: int, w: int, cout: int, y: int, n: int, groups: int, p: int,
                s: int) -> Optional[tuple[int, int, int, int, int]]:
    """``(C_in, H, C_in per group, kernel, H_out)`` of a square convolution whose arrays hold
    these element counts, if exactly that reading fits (cached: nets repeat their convs)."""
    per_sample = x / n
    ho = _square(y / (n * cout))
    if ho is None:
        return None
    for k in range(1, 12):
        cin_g = w / (cout * k * k)
        if cin_g != int(cin_g) or cin_g <= 0:
            continue
        cin = int(cin_g) * groups
        h = _square(per_sample / cin)
        if h is not None and (h + 2 * p - k) // s + 1 == ho:
            return cin, h, int(cin_g), k, ho
    return None


def _infer(tensor, op: Op, n: int, shapes: dict[str, tuple[int, ...]]) -> None:
    ins = list(map(tensor, op.inputs))
    outs = list(map(tensor, op.outputs))
    if not ins or not outs:
        return
    x, y = ins[0], outs[0]
    attrs = op.attrs or {}
    if op.name in ("Convolution2DFunction", "Convolution2D") and len(ins) >= 2:
        w = ins[1]
        cout = _elements(ins[2]) if len(ins) >= 3 else None
        if not cout:
            return
        found = _conv_shape(_elements(x), _elements(w), cout, _elements(y), n,
                            attrs.get("groups", 1) or 1, attrs.get("ph", 0), attrs.get("sy", 1) or 1)
        if found is not None:
            cin, h, cin_g, k, ho = found
            shapes.setdefault(x.id, (n, cin, h, h))
            shapes[w.id] = (cout, cin_g, k, k)
            shapes[ins[2].id] = (cout,)
            shapes[y.id] = (n, cout, ho, ho)
        return
    if op.name in ("LinearFunction", "Linear") and len(ins) >= 2:
        w = ins[1]
        out = _elements(ins[2]) if len(ins) >= 3 else _elements(y) // n
        if out and _elements(w) % out == 0:
            shapes[w.id] = (out, _elements(w) // out)
            if len(ins) >= 3:
                shapes[ins[2].id] = (out,)
            shapes[y.id] = (n, out)
            if x.id not in shapes:
                shapes[x.id] = (n, _elements(x) // n)
        return
    if op.name in ("MaxPooling2D", "AveragePooling2D") and x.id in shapes and len(shapes[x.id]) == 4:
        c = shapes[x.id][1]
        if not c:
            return
        ho = _square(_elements(y) / (n * c))
        if ho is not None:
            shapes[y.id] = (n, c, ho, ho)
        return
    if op.name in _LOSSES:
        if y.nbytes == 4:
            shapes[y.id] = ()
        return
    if op.name == "Reshape" and _elements(y) % n == 0:
        shapes[y.id] = (n, _elements(y) // n)
        return
    # elementwise (ReLU, Dropout, BatchNormalization, Add, ...): the shape of input 0
    if x.id in shapes and y.nbytes == x.nbytes:
        for out in outs:
            if out.nbytes == x.nbytes:
                shapes[out.id] = shapes[x.id]


def op_costs(trace: Trace) -> dict[str, OpCost]:
    """FLOPs and bytes moved by every forward and backward op of a Chainer dump.

    Convolutions and linear layers: ``2·out·(W/Cout)`` FLOPs forward, twice that backward
    (input and weight gradients). Other ops are memory-bound: one FLOP an output element
    (a pooling window's size for pooling) and the bytes of every array they read or write.
    """
    size = {t.id: t.nbytes or 0 for t in trace.tensors()}
    width = DTYPE_BYTES.get
    count = {t.id: t.nbytes // width(t.dtype or "float32", 4) for t in trace.tensors()}
    size_of, count_of = size.__getitem__, count.__getitem__
    costs: dict[str, OpCost] = {}
    forward_cost: dict[str, OpCost] = {}
    matmul_forward: set[str] = set()
    forward, backward = OpKind.FORWARD, OpKind.BACKWARD
    for op in trace.ops():
        if op.kind is not forward:
            continue
        ins, outs = op.inputs, op.outputs
        nbytes = float(sum(map(size_of, ins)) + sum(map(size_of, outs)))
        out_elems = sum(map(count_of, outs))
        if op.name in _MATMUL_OPS and len(ins) >= 2:
            matmul_forward.add(op.id)
            w = count[ins[1]]
            cout = count[ins[2]] if len(ins) >= 3 else None
            if not cout:  # no bias: assume square-free linear, y = N·out, x = N·in
                flops = 2.0 * math.sqrt(count[ins[0]] * out_elems * w)
            else:
                flops = 2.0 * out_elems * (w / cout)
        elif op.name in ("MaxPooling2D", "AveragePooling2D"):
            attrs = op.attrs or {}
            flops = float(out_elems * attrs.get("kh", 1) * attrs.get("kw", 1))
        else:
            flops = float(out_elems)
        forward_cost[op.id] = costs[op.id] = OpCost(flops, nbytes)
    for op in trace.ops():
        if op.kind is not backward:
            continue
        nbytes = float(sum(map(size_of, op.inputs)) + sum(map(size_of, op.outputs)))
        partner = forward_cost.get(op.partner) if op.partner else None
        flops = partner.flops * (2.0 if op.partner in matmul_forward else 1.0) if partner else 0.0
        costs[op.id] = OpCost(flops, nbytes)
    return costs
