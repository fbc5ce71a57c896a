"""TensorFlow / Horovod op-schedule lists (DESIGN 2.2): one executed node name a line.

Each line becomes an op ``op<POSITION>`` whose kind comes from its name. Trainable
variables (from the sizes sidecar, or from Horovod's ``cond_N`` indices when there is
none) become parameter tensors ``v<N>``, linked producer op -> variable (``GRADIENT``),
variable -> first Horovod node naming it (``HANDOFF``) -> all-reduce output
(``ALLREDUCE``) -> optimizer update (``UPDATE``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Optional, Sequence

from ..errors import SizesError, TraceFormatError
from ..model import EdgeKind, Link, Op, OpKind, Tensor, TensorKind, Trace
from .sizes import Variable

__all__ = ["parse", "looks_like", "classify", "variable_role", "producer_role"]

FORMAT = "tf-schedule"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/>:]*$")
_ALLREDUCE_RE = re.compile(r"(?:^|/)\w*Allreduce/cond(?:_(\d+))?/")
_UPDATE_RE = re.compile(r"(?:^|/)update(?:_(\d+))?/")
_SETUP_LAST_RE = re.compile(
    r"^(?:Const|[Ss]hape|ShapeN|paddings|reduction_indices|multiples|perm|axis|begin|size|"
    r"ReadVariableOp|\w+_recip|\w*matshapes-\d+|ShapeN-matshapes-\d+)(?:_\d+)?$"
)
_BACKWARD_SCOPES = ("gradient_tape", "gradients")
_PRODUCERS = (
    ("weight", re.compile(r"^(?:Conv2DBackpropFilter(?:V2)?|Conv3DBackpropFilter(?:V2)?)(?:_\d+)?$")),
    ("depthwise", re.compile(r"^DepthwiseConv2dNativeBackpropFilter(?:_\d+)?$")),
    ("weight", re.compile(r"^(?:MatMul|BatchMatMul(?:V[23])?|Einsum)_(?:\d*[13579])$")),
    ("bias", re.compile(r"^BiasAddGrad(?:_\d+)?$")),
    ("norm", re.compile(r"^FusedBatchNormGrad(?:V[23])?(?:_\d+)?$")),
    ("embedding", re.compile(r"^UnsortedSegmentSum(?:_\d+)?$")),
)
_ROLES = {
    "kernel": "weight", "weights": "weight", "W": "weight", "w": "weight",
    "pointwise_kernel": "weight", "recurrent_kernel": "weight",
    "depthwise_kernel": "depthwise",
    "bias": "bias", "biases": "bias", "b": "bias",
    "gamma": "norm", "beta": "norm", "scale": "norm", "offset": "norm",
    "embeddings": "embedding", "embedding": "embedding",
}


def looks_like(lines: Sequence[str]) -> bool:
    """Every one of the first non-blank lines is a TensorFlow node name with a scope."""
    head = [line.strip() for line in lines[:50] if line.strip()]
    return bool(head) and all(_NAME_RE.match(n) for n in head) and any("/" in n for n in head)


def producer_role(name: str) -> Optional[str]:
    """The kind of variable whose gradient an op named ``name`` produces, if any.

    >>> producer_role("gradient_tape/m/conv1/Conv2D/Conv2DBackpropFilter")
    'weight'
    >>> producer_role("gradient_tape/m/fc/MatMul_1"), producer_role("gradient_tape/m/fc/MatMul")
    ('weight', None)
    """
    last = name.rsplit("/", 1)[-1]
    for role, pattern in _PRODUCERS:
        if pattern.match(last):
            return role
    return None


def variable_role(name: str) -> Optional[str]:
    """``kernel`` -> weight, ``bias`` -> bias, ``gamma``/``beta`` -> norm, ...

    >>> variable_role("conv1_bn/gamma:0"), variable_role("dense/kernel:0")
    ('norm', 'weight')
    """
    short = name.rsplit("/", 1)[-1].split(":", 1)[0]
    return _ROLES.get(short)


def classify(name: str) -> tuple[OpKind, Optional[int]]:
    """The kind of an op from its name, and the variable index it names (if any).

    >>> classify("Func/DistributedGradientTape_Allreduce/cond_10/else/_81/input/_1797")
    (<OpKind.ALLREDUCE_INPUT: 'allreduce_input'>, 10)
    >>> classify("DistributedGradientTape_Allreduce/cond/output/_6")
    (<OpKind.ALLREDUCE_OUTPUT: 'allreduce_output'>, 0)
    >>> classify("SGD/SGD/update_3/ResourceApplyGradientDescent")
    (<OpKind.UPDATE: 'update'>, 3)
    >>> classify("gradient_tape/resnet50/conv1_conv/BiasAdd/BiasAddGrad")
    (<OpKind.GRADIENT: 'gradient'>, None)
    """
    if name.startswith("HorovodBroadcast") or "/HorovodBroadcast" in name:
        return OpKind.BROADCAST, None
    match = _ALLREDUCE_RE.search(name)
    if match:
        index = int(match.group(1) or 0)
        rest = name[match.end():]
        if rest.startswith("output/") or "/output/" in rest:
            return OpKind.ALLREDUCE_OUTPUT, index
        if "HorovodAllreduce" in rest:
            return OpKind.ALLREDUCE, index
        return OpKind.ALLREDUCE_INPUT, index
    if "HorovodAllreduce" in name:
        return OpKind.ALLREDUCE, None
    if "LayoutOptimizer" in name or name.startswith("ConstantFolding/"):
        return OpKind.SETUP, None
    last = name.rsplit("/", 1)[-1]
    if _SETUP_LAST_RE.match(last):
        return OpKind.SETUP, None
    match = _UPDATE_RE.search(name)
    if match or "ResourceApply" in last or last.startswith("Apply"):
        return OpKind.UPDATE, int(match.group(1) or 0) if match else None
    if _backward_scope(name) is not None:
        return (OpKind.GRADIENT if producer_role(name) else OpKind.BACKWARD), None
    if re.match(r"^AddN(?:_\d+)?$", name):
        return OpKind.BACKWARD, None  # sums the contributions of a variable used twice
    return OpKind.OTHER, None


def _backward_scope(name: str) -> Optional[list[str]]:
    """Path components after the last ``gradient_tape``/``gradients`` scope."""
    comps = name.split("/")
    for i in range(len(comps) - 1, -1, -1):
        if comps[i] in _BACKWARD_SCOPES and i < len(comps) - 1:
            return comps[i + 1:]
    return None


class _Layers:
    """Finds the layer of a scope: a known variable layer, else the first scope name."""

    def __init__(self, model: Optional[str], known: set[str]):
        self.model = model
        self.known = known

    def of(self, comps: list[str]) -> Optional[str]:
        if self.known:
            for candidate in (comps, comps[1:] if self.model and comps[0] == self.model else None):
                if candidate:
                    for k in range(len(candidate) - 1, 0, -1):
                        layer = "/".join(candidate[:k])
                        if layer in self.known:
                            return layer
        if self.model and comps[0] == self.model:
            comps = comps[1:]
        return comps[0] if len(comps) >= 2 else None


def parse(
    path: str,
    lines: list[str],
    variables: Optional[list[Variable]] = None,
    sizes_path: Optional[str] = None,
) -> Trace:
    names: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, 1):
        name = raw.strip()
        if not name:
            continue
        if not _NAME_RE.match(name):
            raise TraceFormatError(
                path, number, f"not a TensorFlow node name: {name[:60]!r}; an op list has "
                "one executed node name a line",
            )
        names.append((number, name))
    if not names:
        raise TraceFormatError(path, 1, "file is empty; expected one TensorFlow node name a line")

    kinds = [classify(name) for _, name in names]
    model = _model_scope(name for (_, name), (kind, _) in zip(names, kinds) if kind.is_backward)
    layers = _Layers(model, {v.layer for v in variables or ()})
    ops = []
    for position, ((number, name), (kind, index)) in enumerate(zip(names, kinds)):
        layer = None
        if kind.is_backward:
            comps = _backward_scope(name)
            layer = layers.of(comps) if comps else None
        elif kind is OpKind.OTHER and "/" in name:
            comps = name.split("/")
            if comps[0] == model or layers.of(comps) in layers.known:
                kind, layer = OpKind.FORWARD, layers.of(comps)
        ops.append(Op(f"op{position}", kind, name, line=number, position=position,
                      layer=layer, index=index))

    indices = sorted({op.index for op in ops if op.index is not None and op.kind in (
        OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE, OpKind.ALLREDUCE_OUTPUT)})
    if variables is not None and indices and indices[-1] + 1 != len(variables):
        raise SizesError(
            sizes_path, 1, f"has {len(variables)} variables but {path} names Horovod "
            f"gradients cond_0..cond_{indices[-1]} ({indices[-1] + 1} variables); pass the "
            "sizes file of this model with --sizes",
        )
    tensors = _tensors(variables, indices)
    ops, links = _link(ops, tensors)
    meta = {"model_scope": model, "sizes": sizes_path, "horovod": bool(indices)}
    return Trace.build(path, FORMAT, ops, tensors, links, meta)


def _model_scope(backward_names) -> Optional[str]:
    """The scope right under ``gradient_tape/`` that most backward ops share."""
    firsts = Counter()
    total = 0
    for name in backward_names:
        comps = _backward_scope(name)
        if comps and len(comps) >= 3:
            firsts[comps[0]] += 1
        total += 1
    if not firsts:
        return None
    scope, count = firsts.most_common(1)[0]
    return scope if count * 2 >= total else None


def _tensors(variables: Optional[list[Variable]], indices: list[int]) -> list[Tensor]:
    if variables is not None:
        return [
            Tensor(f"v{v.index}", TensorKind.PARAMETER, v.name, v.nbytes, line=v.line,
                   layer=v.layer, dtype=v.dtype, shape=v.shape, index=v.index)
            for v in variables
        ]
    return [
        Tensor(f"v{n}", TensorKind.PARAMETER, f"variable[{n}]", None, index=n)
        for n in range(indices[-1] + 1)
    ] if indices else []


def _link(ops: list[Op], tensors: list[Tensor]) -> tuple[list[Op], list[Link]]:
    """Producer -> variable, variable -> all-reduce input -> output -> update."""
    links: list[Link] = []
    by_index = {t.index: t for t in tensors}
    first: dict[tuple[OpKind, int], Op] = {}
    for op in ops:
        if op.index is not None and (op.kind, op.index) not in first:
            first[(op.kind, op.index)] = op
    for n, tensor in sorted(by_index.items()):
        chain = [tensor.id]
        handed = [first.get((k, n)) for k in (OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE)]
        handed = [op for op in handed if op is not None]
        if handed:
            chain.append(min(handed, key=lambda op: op.position).id)
        for kind in (OpKind.ALLREDUCE_OUTPUT, OpKind.UPDATE):
            if (kind, n) in first:
                chain.append(first[(kind, n)].id)
        kinds = [EdgeKind.HANDOFF, EdgeKind.ALLREDUCE, EdgeKind.UPDATE]
        if len(chain) > 1 and not handed:
            kinds = kinds[1:]
        links.extend(Link(a, b, k) for a, b, k in zip(chain, chain[1:], kinds))

    producers: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind is OpKind.GRADIENT and op.layer is not None:
            producers[op.layer].append(op)
    outputs: dict[str, list[str]] = defaultdict(list)
    for tensor in tensors:
        role = variable_role(tensor.name)
        for op in producers.get(tensor.layer, ()):
            if role is None or producer_role(op.name) == role:
                outputs[op.id].append(tensor.id)
    if outputs:
        ops = [
            Op(op.id, op.kind, op.name, op.line, op.position, op.layer, outputs=tuple(outputs[op.id]),
               index=op.index) if op.id in outputs else op
            for op in ops
        ]
    return ops, links
