"""What a TensorFlow node name says: an op's kind, the variable index it names, and the
kind of variable whose gradient it produces.

Horovod's ``DistributedGradientTape_Allreduce/cond_N/...`` nodes carry variable N's
gradient to and from the collective; the optimizer's ``update_N/...`` nodes apply it; ops
under a ``gradient_tape``/``gradients`` scope are backward ops, and a few of them
(``Conv2DBackpropFilter``, ``BiasAddGrad``, the odd ``MatMul_K``, ...) produce a
parameter gradient. This runs once a line of 500,000-line lists: cheap substring tests
guard every regular expression.
"""

from __future__ import annotations

import functools
import re
from typing import Optional

from ..model import OpKind

__all__ = ["classify", "classify_name", "producer_role", "variable_role", "split_suffix",
           "backward_scope", "scoped", "ALLREDUCE_AT", "UPDATE_AT", "MAX_INDEX_DIGITS"]

# ``(?:^|/)\w*Allreduce/cond(?:_(\d+))?/`` and ``(?:^|/)update(?:_(\d+))?/``, matched where a
# substring search puts them (a search from every position costs microseconds a line).
ALLREDUCE_AT = re.compile(r"\w*Allreduce/cond(?:_(\d+))?/")
UPDATE_AT = re.compile(r"update(?:_(\d+))?/")
_SETUP_BASES = frozenset({
    "Const", "shape", "Shape", "ShapeN", "paddings", "reduction_indices", "multiples", "perm",
    "axis", "begin", "size", "ReadVariableOp",
})
_BACKWARD_SCOPES = ("gradient_tape", "gradients")
# Last name component (without a _K suffix) of ops that produce a parameter gradient.
_PRODUCERS = {
    "Conv2DBackpropFilter": "weight", "Conv2DBackpropFilterV2": "weight",
    "Conv3DBackpropFilter": "weight", "Conv3DBackpropFilterV2": "weight",
    "DepthwiseConv2dNativeBackpropFilter": "depthwise",
    "BiasAddGrad": "bias",
    "FusedBatchNormGrad": "norm", "FusedBatchNormGradV2": "norm", "FusedBatchNormGradV3": "norm",
    "UnsortedSegmentSum": "embedding",
}
# y = x @ W differentiates into MatMul (dx) and MatMul_1 (dW); a second application in the
# same scope gives MatMul_2 / MatMul_3: the odd-numbered ones produce the weight gradient.
_ODD_WEIGHT_PRODUCERS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
                                   "Einsum"})
_ROLES = {
    "kernel": "weight", "weights": "weight", "W": "weight", "w": "weight",
    "pointwise_kernel": "weight", "recurrent_kernel": "weight",
    "depthwise_kernel": "depthwise",
    "bias": "bias", "biases": "bias", "b": "bias",
    "gamma": "norm", "beta": "norm", "scale": "norm", "offset": "norm",
    "embeddings": "embedding", "embedding": "embedding",
}
MAX_INDEX_DIGITS = 9  # no model has a billion variables or op copies


def split_suffix(last: str) -> tuple[str, Optional[int]]:
    """``MatMul_3`` -> ``("MatMul", 3)``; ``Conv2D`` -> ``("Conv2D", None)``; a suffix of
    more than nine digits is no copy number.

    >>> split_suffix("x_" + "9" * 5000)[1] is None
    True
    """
    i = last.rfind("_")
    digits = last[i + 1:]
    if i > 0 and digits.isascii() and digits.isdigit() and len(digits) <= MAX_INDEX_DIGITS:
        return last[:i], int(digits)
    return last, None


def _index(digits: Optional[str]) -> int:
    """A variable index named in an op; -1 for one no model can have (too many digits)."""
    if not digits:
        return 0
    return int(digits) if len(digits) <= MAX_INDEX_DIGITS else -1


def producer_role(name: str) -> Optional[str]:
    """The kind of variable whose gradient an op named ``name`` produces, if any.

    >>> producer_role("gradient_tape/m/conv1/Conv2D/Conv2DBackpropFilter")
    'weight'
    >>> producer_role("gradient_tape/m/fc/MatMul_1"), producer_role("gradient_tape/m/fc/MatMul")
    ('weight', None)
    """
    return _last(name[name.rfind("/") + 1:])[1]


@functools.lru_cache(maxsize=1 << 16)
def _last(last: str) -> tuple[bool, Optional[str], str]:
    """What an op name's last component says: (a setup op?, the variable kind whose
    gradient it produces, its base without a copy suffix). Last components repeat across
    a list's lines, so this is cached."""
    base, n = split_suffix(last)
    setup = base in _SETUP_BASES or base.endswith("_recip") or "matshapes-" in last
    role = _PRODUCERS.get(base)
    if role is None and base in _ODD_WEIGHT_PRODUCERS and n is not None and n % 2 == 1:
        role = "weight"
    return setup, role, base


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
    kind, index, _ = classify_name(name)
    return kind, index


# Kinds as module constants and the index- and scope-less results made once: looking an
# enum member up on its class costs more than most of the tests, 500,000 times a list.
_SETUP, _BACKWARD, _GRADIENT, _UPDATE, _ALLREDUCE, _ALLREDUCE_INPUT, _ALLREDUCE_OUTPUT = (
    OpKind.SETUP, OpKind.BACKWARD, OpKind.GRADIENT, OpKind.UPDATE, OpKind.ALLREDUCE,
    OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE_OUTPUT)
_SETUP_RESULT, _BACKWARD_RESULT, _UPDATE_RESULT, _ALLREDUCE_RESULT = (
    (kind, None, None) for kind in (_SETUP, _BACKWARD, _UPDATE, _ALLREDUCE))
_BROADCAST_RESULT, _OTHER_RESULT = (OpKind.BROADCAST, None, None), (OpKind.OTHER, None, None)


def classify_name(name: str) -> tuple[OpKind, Optional[int], Optional[list[str]]]:
    """:func:`classify`, plus the components under the backward scope of a backward op.

    Cheap substring tests guard every regular expression: this runs once per line of
    500,000-line lists.
    """
    if name.startswith("gradient_tape/"):  # most lines of a step: skip the other tests
        return _classify_backward(name, _TAPE)
    if "Horovod" in name and (name.startswith("HorovodBroadcast") or "/HorovodBroadcast" in name):
        return _BROADCAST_RESULT
    i = name.find("Allreduce/cond")
    if i >= 0:  # at the start of its component (the first try of _scoped), else later ones
        match = (ALLREDUCE_AT.match(name, name.rfind("/", 0, i) + 1)
                 or scoped(name, "Allreduce/cond", ALLREDUCE_AT, whole=False))
        if match:
            index = _index(match.group(1))
            rest = name[match.end():]
            if rest.startswith("output/") or "/output/" in rest:
                return _ALLREDUCE_OUTPUT, index, None
            if "HorovodAllreduce" in rest or "HorovodAllgather" in rest:
                return _ALLREDUCE, index, None
            return _ALLREDUCE_INPUT, index, None
    if "HorovodAllreduce" in name:
        return _ALLREDUCE_RESULT
    if "LayoutOptimizer" in name or name.startswith("ConstantFolding/"):
        return _SETUP_RESULT
    last = name[name.rfind("/") + 1:]
    setup, _, base = _last(last)
    if setup:
        return _SETUP_RESULT
    if "update" in name:
        match = scoped(name, "update", UPDATE_AT, whole=True)
        if match:
            return _UPDATE, _index(match.group(1)), None
    if "ResourceApply" in last or "SparseApply" in last or last.startswith("Apply"):
        return _UPDATE_RESULT
    if "gradient" in name and backward_scope(name) is not None:
        return _classify_backward(name)
    if base == "AddN" and "/" not in name:
        return _BACKWARD_RESULT  # sums the contributions of a variable used twice
    return _OTHER_RESULT


def scoped(name: str, key: str, pattern: re.Pattern, whole: bool) -> Optional[re.Match]:
    """The first match of ``pattern`` at the start of a path component, found where ``key``
    occurs: at the occurrence itself (``whole``: the key opens its component) or at the
    start of the occurrence's component.

    >>> scoped("a/b.Allreduce/cond_1/c/DistributedGradientTape_Allreduce/cond_2/x",
    ...         "Allreduce/cond", ALLREDUCE_AT, whole=False).group(1)
    '2'
    >>> scoped("SGD/my_update_1/x/update_7/y", "update", UPDATE_AT, whole=True).group(1)
    '7'
    """
    i = name.find(key)
    while i >= 0:
        start = i if whole else name.rfind("/", 0, i) + 1
        if start == 0 or name[start - 1] == "/":
            match = pattern.match(name, start)
            if match:
                return match
        i = name.find(key, i + 1)
    return None


_TAPE = len("gradient_tape/")


def _classify_backward(name: str, tape: int = 0) -> tuple[OpKind, Optional[int], Optional[list[str]]]:
    """An op under a ``gradient_tape``/``gradients`` scope: setup, producer or backward.
    ``tape``: the name opens with ``gradient_tape/``."""
    if "LayoutOptimizer" in name:
        return _SETUP_RESULT
    setup, role, _ = _last(name[name.rfind("/") + 1:])
    if setup:
        return _SETUP_RESULT
    if tape and name.find("/gradient", tape - 1) < 0:  # no scope nested under the first
        return (_GRADIENT if role else _BACKWARD), None, name[tape:].split("/")
    scope = backward_scope(name)
    if scope is None:
        return _OTHER_RESULT
    return (_GRADIENT if role else _BACKWARD), None, scope


def backward_scope(name: str) -> Optional[list[str]]:
    """Path components after the last ``gradient_tape``/``gradients`` scope."""
    comps = name.split("/")
    for i in range(len(comps) - 2, -1, -1):
        if comps[i] in _BACKWARD_SCOPES:
            return comps[i + 1:]
    return None
