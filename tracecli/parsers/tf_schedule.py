"""TensorFlow / Horovod op-schedule lists (DESIGN 2.2): one executed node name a line.

Each line becomes an op ``op<POSITION>`` whose kind comes from its name. Trainable
variables (from the sizes sidecar, or from Horovod's ``cond_N`` indices when there is
none) become parameter tensors ``v<N>``, linked producer op -> variable (``GRADIENT``),
variable -> first Horovod node naming it (``HANDOFF``) -> all-reduce output
(``ALLREDUCE``) -> optimizer update (``UPDATE``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from typing import Optional

from ..errors import SizesError, TraceFormatError
from ..model import (
    Abilities, ComputeSource, EdgeKind, Link, Op, OpKind, ReadinessMethod, Tensor, TensorKind, Trace,
    TraceMeta, VariableOrder,
)
from .sizes import Variable

__all__ = ["parse", "looks_like", "classify", "variable_role", "producer_role"]

FORMAT = "tf-schedule"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/>:]*$")
# ``(?:^|/)\w*Allreduce/cond(?:_(\d+))?/`` and ``(?:^|/)update(?:_(\d+))?/``, matched where a
# substring search puts them (a search from every position costs microseconds a line).
_ALLREDUCE_AT = re.compile(r"\w*Allreduce/cond(?:_(\d+))?/")
_UPDATE_AT = re.compile(r"update(?:_(\d+))?/")
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


_BAD_CHAR_RE = re.compile(r"[^A-Za-z0-9_.\-/>: \t\n\r\f\v]")
_INNER_SPACE_RE = re.compile(r"[^ \t\n\r\f\v][ \t\r\f\v]+[^ \t\n\r\f\v]")
_BAD_START_RE = re.compile(r"(?m)^[ \t\r\f\v]*[-/>:]")


_BAD_OPENER_RE = re.compile(r"\n[-/>:]")  # a literal first character: scanned in C
_NAME_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/>:\n"


def names_only(text: str) -> bool:
    """Every non-blank line of ``text`` is one node name, decided over the whole text in C:
    a text of name characters and newlines only needs no line to open with ``-/>:``
    (substring searches, milliseconds for a 500,000-line list); one with other characters
    or blanks takes three regular-expression searches (about a second).

    >>> names_only("model/dense/MatMul\\n  SGD/update_0/Apply\\n\\n"), names_only("a b\\n")
    (True, False)
    >>> names_only("a/b\\n/c\\n"), names_only("a/b\\nc\\n"), names_only("a/é\\n")
    (False, True, False)
    """
    if not text.isascii():
        return False  # node names are ASCII
    if not text.encode("ascii").translate(None, _NAME_BYTES):
        return not (text.startswith(("-", "/", ">", ":")) or _BAD_OPENER_RE.search(text))
    return not (_BAD_CHAR_RE.search(text) or _INNER_SPACE_RE.search(text)
                or _BAD_START_RE.search(text))


def looks_like(text: str) -> bool:
    """The whole text is node names, one a line, and some name has a scope. (Real lists
    may open with hundreds of scope-less placeholder names: the whole text decides.)"""
    return "/" in text and bool(text.strip()) and names_only(text)


MAX_INDEX_DIGITS = 9  # no model has a billion variables or op copies


def _split_suffix(last: str) -> tuple[str, Optional[int]]:
    """``MatMul_3`` -> ``("MatMul", 3)``; ``Conv2D`` -> ``("Conv2D", None)``; a suffix of
    more than nine digits is no copy number.

    >>> _split_suffix("x_" + "9" * 5000)[1] is None
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
    base, n = _split_suffix(last)
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
    kind, index, _ = _classify(name)
    return kind, index


# Kinds as module constants and the index- and scope-less results made once: looking an
# enum member up on its class costs more than most of the tests, 500,000 times a list.
_SETUP, _BACKWARD, _GRADIENT, _UPDATE, _ALLREDUCE, _ALLREDUCE_INPUT, _ALLREDUCE_OUTPUT = (
    OpKind.SETUP, OpKind.BACKWARD, OpKind.GRADIENT, OpKind.UPDATE, OpKind.ALLREDUCE,
    OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE_OUTPUT)
_SETUP_RESULT, _BACKWARD_RESULT, _UPDATE_RESULT, _ALLREDUCE_RESULT = (
    (kind, None, None) for kind in (_SETUP, _BACKWARD, _UPDATE, _ALLREDUCE))
_BROADCAST_RESULT, _OTHER_RESULT = (OpKind.BROADCAST, None, None), (OpKind.OTHER, None, None)


def _classify(name: str) -> tuple[OpKind, Optional[int], Optional[list[str]]]:
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
        match = (_ALLREDUCE_AT.match(name, name.rfind("/", 0, i) + 1)
                 or _scoped(name, "Allreduce/cond", _ALLREDUCE_AT, whole=False))
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
        match = _scoped(name, "update", _UPDATE_AT, whole=True)
        if match:
            return _UPDATE, _index(match.group(1)), None
    if "ResourceApply" in last or "SparseApply" in last or last.startswith("Apply"):
        return _UPDATE_RESULT
    if "gradient" in name and _backward_scope(name) is not None:
        return _classify_backward(name)
    if base == "AddN" and "/" not in name:
        return _BACKWARD_RESULT  # sums the contributions of a variable used twice
    return _OTHER_RESULT


def _scoped(name: str, key: str, pattern: re.Pattern, whole: bool) -> Optional[re.Match]:
    """The first match of ``pattern`` at the start of a path component, found where ``key``
    occurs: at the occurrence itself (``whole``: the key opens its component) or at the
    start of the occurrence's component.

    >>> _scoped("a/b.Allreduce/cond_1/c/DistributedGradientTape_Allreduce/cond_2/x",
    ...         "Allreduce/cond", _ALLREDUCE_AT, whole=False).group(1)
    '2'
    >>> _scoped("SGD/my_update_1/x/update_7/y", "update", _UPDATE_AT, whole=True).group(1)
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
    scope = _backward_scope(name)
    if scope is None:
        return _OTHER_RESULT
    return (_GRADIENT if role else _BACKWARD), None, scope


def _backward_scope(name: str) -> Optional[list[str]]:
    """Path components after the last ``gradient_tape``/``gradients`` scope."""
    comps = name.split("/")
    for i in range(len(comps) - 2, -1, -1):
        if comps[i] in _BACKWARD_SCOPES:
            return comps[i + 1:]
    return None


class _Layers:
    """Finds the layer of a scope: a known variable layer, else the first scope name."""

    def __init__(self, model: Optional[str], known: set[str]):
        self.model = model
        self.known = known
        self.depth = max((layer.count("/") + 1 for layer in known), default=0)
        if self.depth == 1:
            self.of = _flat_layers(model, known)

    def of(self, comps: list[str]) -> Optional[str]:
        if self.depth == 1:  # flat layer names (Keras): one lookup instead of a search
            first = comps[0]
            if first in self.known and len(comps) >= 2:
                return first
            if first == self.model and len(comps) >= 3 and comps[1] in self.known:
                return comps[1]
        elif self.known:
            for candidate in (comps, comps[1:] if self.model and comps[0] == self.model else None):
                if candidate:
                    for k in range(min(len(candidate) - 1, self.depth), 0, -1):
                        layer = "/".join(candidate[:k])
                        if layer in self.known:
                            return layer
        if self.model and comps[0] == self.model:
            comps = comps[1:]
        return comps[0] if len(comps) >= 2 else None


def _flat_layers(model: Optional[str], known: set[str]):
    """``_Layers.of`` for flat layer names (Keras), its lookups bound once (it runs for
    most lines of a list)."""
    def of(comps: list[str]) -> Optional[str]:
        first, n = comps[0], len(comps)
        if n >= 2 and first in known:
            return first
        if first == model and n >= 3 and comps[1] in known:
            return comps[1]
        if model and first == model:
            return comps[1] if n >= 3 else None
        return first if n >= 2 else None
    return of


def parse(
    path: str,
    lines: list[str],
    variables: Optional[list[Variable]] = None,
    sizes_path: Optional[str] = None,
    progress=None,
    checked: bool = False,
) -> Trace:
    """Parse an op list; ``progress(stage, done, total)`` is called every 50,000 lines;
    ``checked``: detection already found every line a node name."""
    numbers, names = _valid_names(path, lines, checked)
    model = _model_scope(names)
    layers = _Layers(model, {v.layer for v in variables or ()})
    ops, indexed = [], []
    append = ops.append
    other, forward, gradient = OpKind.OTHER, OpKind.FORWARD, OpKind.GRADIENT
    classify, layer_of, known, new = _classify, layers.of, layers.known, tuple.__new__
    produced = _Produced(variables or ())
    for position, name in enumerate(names):
        if progress and position % 50_000 == 0:
            progress("parse", position, len(names))
        kind, index, scope = classify(name)
        layer = None
        if scope:
            layer = layer_of(scope)
        elif kind is other and "/" in name:
            comps = name.split("/")
            found = layer_of(comps)
            if comps[0] == model or found in known:
                kind, layer = forward, found
        outputs = produced.by(layer, name) if kind is gradient and layer is not None else ()
        number = numbers[position] if numbers else position + 1
        op = new(Op, (f"op{position}", kind, name, number, position, layer, None, None, (), (),
                      outputs, None, index, None, None))  # Op(...) without its Python __new__
        append(op)
        if index is not None:
            if index == -1:
                raise TraceFormatError(path, number, f"names a variable index of more than "
                                       f"{MAX_INDEX_DIGITS} digits: {name[:60]!r}; no model "
                                       "has that many variables")
            indexed.append(op)

    if progress:
        progress("parse", len(names), len(names))
    collective = _COLLECTIVE_KINDS
    indices = sorted({op.index for op in indexed if op.kind in collective})
    if variables is not None and indices and indices[-1] + 1 != len(variables):
        raise SizesError(
            sizes_path, 1, f"has {len(variables)} variables but {path} names Horovod "
            f"gradients cond_0..cond_{indices[-1]} ({indices[-1] + 1} variables); pass the "
            "sizes file of this model with --sizes",
        )
    tensors = _tensors(variables, indices, _sparse(indexed))
    links = _link(tensors, indexed)
    meta = TraceMeta(sizes=sizes_path, model_scope=model, horovod=bool(indices))
    return Trace.build(path, FORMAT, ops, tensors, links, meta, abilities(bool(indices)))


def abilities(horovod: bool) -> Abilities:
    """Op lists: readiness from op names, no timings, trainable-variable order."""
    note = ("Horovod: first node naming Allreduce/cond_N" if horovod
            else "gradient-producing op of each layer (fallback: layer's last backward op)")
    return Abilities(ReadinessMethod.OP_NAMES, ComputeSource.NONE, VariableOrder.INDEX, note,
                     sizes_hint="no sizes sidecar; pass --sizes FILE")


_ALL_NAMES_RE = re.compile(r"(?:[A-Za-z0-9_.][A-Za-z0-9_.\-/>:]*\n)*[A-Za-z0-9_.][A-Za-z0-9_.\-/>:]*")


def _valid_names(path: str, lines: list[str],
                 checked: bool = False) -> tuple[Optional[list[int]], list[str]]:
    """The node names of the non-blank lines and their line numbers (``None`` when no line
    is blank: name K is on line K + 1); the first bad line is an error.

    One regular expression checks all names at once; only a failure walks line by line.
    """
    names = [line.strip() for line in lines]
    numbers = None
    if "" in names:
        numbers = [number for number, name in enumerate(names, 1) if name]
        names = [name for name in names if name]
    if not names:
        raise TraceFormatError(path, 1, "file is empty; expected one TensorFlow node name a line")
    if not checked and not _ALL_NAMES_RE.fullmatch("\n".join(names)):
        for number, name in zip(numbers or range(1, len(names) + 1), names):
            if not _NAME_RE.match(name):
                raise TraceFormatError(
                    path, number, f"not a TensorFlow node name: {name[:60]!r}; an op list has "
                    "one executed node name a line",
                )
    return numbers, names


def _model_scope(names: list[str], sample: int = 20_000) -> Optional[str]:
    """The scope right under ``gradient_tape/`` that most backward ops share (judged on the
    first ``sample`` backward ops)."""
    firsts: Counter = Counter()
    total = 0
    for name in names:
        if "gradient" not in name:
            continue
        comps = _backward_scope(name)
        if comps is None:
            continue
        if len(comps) >= 3:
            firsts[comps[0]] += 1
        total += 1
        if total >= sample:
            break
    if not firsts:
        return None
    scope, count = firsts.most_common(1)[0]
    return scope if count * 2 >= total else None


_COLLECTIVE_KINDS = frozenset({OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE, OpKind.ALLREDUCE_OUTPUT})
_SPARSE_UPDATES = ("Unique", "UnsortedSegmentSum")


def _sparse(indexed: list[Op]) -> set[int]:
    """Variables whose gradient is sparse (``IndexedSlices``): Horovod all-gathers it, or
    the optimizer deduplicates its indices and applies it sparsely."""
    found = set()
    allreduce, update = OpKind.ALLREDUCE, OpKind.UPDATE
    for op in indexed:
        kind = op.kind
        if kind is allreduce:
            if "HorovodAllgather" in op.name:
                found.add(op.index)
        elif kind is update:
            name = op.name
            last = name[name.rfind("/") + 1:]
            if ("SparseApply" in last or "ResourceScatter" in last
                    or _split_suffix(last)[0] in _SPARSE_UPDATES):
                found.add(op.index)
    return found


def _tensors(variables: Optional[list[Variable]], indices: list[int], sparse: set[int]) -> list[Tensor]:
    if variables is not None:
        parameter = TensorKind.PARAMETER
        return [Tensor(f"v{v.index}", parameter, v.name, v.nbytes, v.line, v.layer, v.dtype,
                       v.shape, v.index, v.index in sparse) for v in variables]
    # Without a sidecar, the variables are the ones the list names (never sized by an index).
    return [Tensor(f"v{n}", TensorKind.PARAMETER, f"variable[{n}]", None, index=n, sparse=n in sparse)
            for n in indices]


class _Produced:
    """The variables a gradient-producing op produces: those of its layer whose kind
    matches its own (a variable of no known kind takes every producer of its layer)."""

    def __init__(self, variables):
        self.of_layer: dict[str, list[tuple[str, Optional[str]]]] = defaultdict(list)
        for v in variables:
            self.of_layer[v.layer].append((f"v{v.index}", variable_role(v.name)))
        self.cache: dict[tuple[str, Optional[str]], tuple[str, ...]] = {}

    def by(self, layer: str, name: str) -> tuple[str, ...]:
        role = producer_role(name)
        key = (layer, role)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = tuple(
                tid for tid, kind in self.of_layer.get(layer, ()) if kind is None or kind == role)
        return found


def _link(tensors: list[Tensor], indexed: list[Op]) -> list[Link]:
    """Variable -> all-reduce input -> output -> update. ``indexed``: the ops naming a
    variable index, in list order (gathered while parsing, so the list is walked once)."""
    links: list[Link] = []
    kinds = (OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE, OpKind.ALLREDUCE_OUTPUT, OpKind.UPDATE)
    first: dict[OpKind, dict[int, Op]] = {kind: {} for kind in kinds}
    for op in indexed:
        of_kind = first.get(op.kind)
        if of_kind is not None and op.index not in of_kind:
            of_kind[op.index] = op
    handoffs, collectives, outputs, updates = (first[kind].get for kind in kinds)
    handoff, allreduce, update_kind = EdgeKind.HANDOFF, EdgeKind.ALLREDUCE, EdgeKind.UPDATE
    append, new = links.append, tuple.__new__  # Link(...) without its Python __new__
    for tensor in tensors:
        n = tensor.index
        handed, collective = handoffs(n), collectives(n)
        if handed is None or (collective is not None and collective.position < handed.position):
            handed = collective
        previous = tensor.id
        if handed is not None:
            append(new(Link, (previous, handed.id, handoff)))
            previous = handed.id
        output = outputs(n)
        if output is not None:
            append(new(Link, (previous, output.id, allreduce)))
            previous = output.id
        update = updates(n)
        if update is not None:
            append(new(Link, (previous, update.id, update_kind)))
    return links
