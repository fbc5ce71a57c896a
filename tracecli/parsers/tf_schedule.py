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
from typing import Optional

from ..errors import SizesError, TraceFormatError
from ..model import (
    Abilities, ComputeSource, EdgeKind, Link, Op, OpKind, ReadinessMethod, Tensor, TensorKind, Trace,
    TraceMeta, VariableOrder, check_fields,
)
from .sizes import Variable
from .tf_names import (
    MAX_INDEX_DIGITS, backward_scope, classify, classify_name, producer_role, split_suffix,
    variable_role,
)

__all__ = ["parse", "looks_like", "classify", "variable_role", "producer_role"]

FORMAT = "tf-schedule"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/>:]*$")
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


# parse makes an Op a line, and _link a Link a hand-off, with tuple.__new__: Op(...) with
# keywords costs ~0.8 us more a record (0.4 s on a 500,000-line list), Link(...) ~0.35 us
# (70 ms on its 200,000 links). Their values follow these fields, checked at import:
check_fields(Op, "id kind name line position layer generation attrs inputs input_roles outputs "
                 "partner index start_ms dur_ms")
check_fields(Link, "source target kind")


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
    classify, layer_of, known, new = classify_name, layers.of, layers.known, tuple.__new__
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
                raise TraceFormatError(f"names a variable index of more than "
                                       f"{MAX_INDEX_DIGITS} digits: {name[:60]!r}; no model "
                                       "has that many variables", path=path, line=number)
            indexed.append(op)

    if progress:
        progress("parse", len(names), len(names))
    collective = _COLLECTIVE_KINDS
    indices = sorted({op.index for op in indexed if op.kind in collective})
    if variables is not None and indices and indices[-1] + 1 != len(variables):
        raise SizesError(
            f"has {len(variables)} variables but {path} names Horovod "
            f"gradients cond_0..cond_{indices[-1]} ({indices[-1] + 1} variables); pass the "
            "sizes file of this model with --sizes", path=sizes_path, line=1,
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
                     sizes_hint="no sizes sidecar; pass --sizes FILE",
                     framework="horovod" if horovod else "tensorflow")


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
        raise TraceFormatError("file is empty; expected one TensorFlow node name a line", path=path, line=1)
    if not checked and not _ALL_NAMES_RE.fullmatch("\n".join(names)):
        for number, name in zip(numbers or range(1, len(names) + 1), names):
            if not _NAME_RE.match(name):
                raise TraceFormatError(
                    f"not a TensorFlow node name: {name[:60]!r}; an op list has "
                    "one executed node name a line", path=path, line=number,
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
        comps = backward_scope(name)
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
                    or split_suffix(last)[0] in _SPARSE_UPDATES):
                found.add(op.index)
    return found


def _tensors(variables: Optional[list[Variable]], indices: list[int], sparse: set[int]) -> list[Tensor]:
    if variables is not None:
        parameter = TensorKind.PARAMETER
        return [Tensor(f"v{v.index}", parameter, v.name, v.nbytes, v.line, v.layer, v.dtype,
                       v.shape, v.index, v.index in sparse, v.meta) for v in variables]
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


def _consumes_gradient(name: str) -> bool:
    """An update op that takes the gradient itself: the apply (``ResourceApplyAdam``,
    ``ResourceSparseApplyKerasMomentum``, ``ResourceScatterAdd``) or the
    ``UnsortedSegmentSum`` that sums a sparse gradient's slices. An update scope's
    index-preparation ops (``Unique``, ``strided_slice``, ``Shape`` of the token ids) run as
    soon as the ids exist, often at the very start of the step, and say nothing about when
    the gradient was ready.

    >>> _consumes_gradient("SGD/SGD/update/Unique"), _consumes_gradient("SGD/SGD/update/UnsortedSegmentSum")
    (False, True)
    """
    last = name[name.rfind("/") + 1:]
    base = split_suffix(last)[0]
    return "Apply" in base or "ResourceScatter" in base or base == "UnsortedSegmentSum"


def _link(tensors: list[Tensor], indexed: list[Op]) -> list[Link]:
    """Variable -> all-reduce input -> output -> update. ``indexed``: the ops naming a
    variable index, in list order (gathered while parsing, so the list is walked once)."""
    links: list[Link] = []
    kinds = (OpKind.ALLREDUCE_INPUT, OpKind.ALLREDUCE, OpKind.ALLREDUCE_OUTPUT, OpKind.UPDATE)
    first: dict[OpKind, dict[int, Op]] = {kind: {} for kind in kinds}
    update_kind_op = OpKind.UPDATE
    consumer: dict[int, Op] = {}  # the update op that consumes gradient N (not index prep)
    for op in indexed:
        of_kind = first.get(op.kind)
        if of_kind is not None and op.index not in of_kind:
            of_kind[op.index] = op
        if op.kind is update_kind_op and op.index not in consumer and _consumes_gradient(op.name):
            consumer[op.index] = op
    first[update_kind_op].update(consumer)
    handoffs, collectives, outputs, updates = (first[kind].get for kind in kinds)
    handoff, allreduce, update_kind = EdgeKind.HANDOFF, EdgeKind.ALLREDUCE, EdgeKind.UPDATE
    append, new = links.append, tuple.__new__  # Link(...) without its __new__ (fields checked above)
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
