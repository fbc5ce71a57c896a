"""Chainer forward/backward graph dumps (DESIGN 2.1).

::

    N_TENSORS N_OPS
    ID SIZE_BYTES NAME                      (N_TENSORS lines)
    forward|backward / N_IN N_OUT / N_IN x "ID ROLE" / N_OUT x "ID" / CLASS / {JSON attrs}

Tensors become ``t<ID>`` and records ``op<K>`` (K counts records from 0). Dumps carry bytes, not
dtypes: arrays are taken as float32 (Chainer's default). Every field is checked; the first problem is raised as a :class:`TraceFormatError` at its line.
"""

from __future__ import annotations

import json
import re
from typing import Optional

from ..errors import TraceFormatError, excerpt
from ..jsonfile import strict_decoder
from ..model import (
    Abilities, ComputeSource, Op, OpKind, ReadinessMethod, Tensor, TensorKind, Trace, VariableOrder,
)
from .chainer_pairing import pair_and_layer

__all__ = ["parse", "looks_like"]

FORMAT = "chainer"
ABILITIES = Abilities(
    ReadinessMethod.AUTOGRAD_REPLAY, ComputeSource.ROOFLINE, VariableOrder.FIRST_USE,
    "Chainer Variable.backward replay (heap of -rank, discovery order)", infers_shapes=True,
    framework="chainer",
)
_HEADER_RE = re.compile(r"^\s*\d+\s+\d+\s*$")
_INT_RE = re.compile(r"^[0-9]+$")
_CLASS_RE = re.compile(r"^[A-Za-z_][\w.<>]*$")
_BACKWARD_ROLES = ("gradient", "input", "output")
# Attributes shape inference reads: checked where they are read, so nothing downstream
# meets a NaN, a string or 1e308 where it expects a stride.
_INT_ATTRS = {"sy": 1, "sx": 1, "ph": 0, "pw": 0, "kh": 1, "kw": 1, "groups": 1, "dy": 1, "dx": 1}
MAX_ATTR = 1 << 20
MAX_RANK = 1 << 40
_DECODER = strict_decoder()


def looks_like(lines: list[str]) -> bool:
    """A header of two integers, then a tensor line."""
    return bool(lines) and bool(_HEADER_RE.match(lines[0]))


class _Reader:
    def __init__(self, path: str, lines: list[str]):
        self.path = path
        self.lines = lines
        self.pos = 0  # index of the next line

    def error(self, message: str, line: Optional[int] = None) -> TraceFormatError:
        return TraceFormatError(message, path=self.path, line=self.pos if line is None else line)

    def next(self, what: str) -> list[str]:
        if self.pos >= len(self.lines):
            raise TraceFormatError(
                f"file ends early: expected {what}; the dump is truncated", path=self.path, line=len(self.lines) + 1,
            )
        line = self.lines[self.pos]
        self.pos += 1
        return line.split()

    def ints(self, what: str, count: int) -> list[int]:
        fields = self.next(what)
        if len(fields) != count:
            raise self.error(f"expected {what}, found {excerpt(self.lines[self.pos - 1])}")
        return [self.to_int(f, what) for f in fields]

    def to_int(self, text: str, what: str) -> int:
        if text.isascii() and text.isdigit() and len(text) <= 18:
            return int(text)
        if not _INT_RE.match(text):
            kind = "negative" if _INT_RE.match(text[1:]) and text[0] == "-" else "not an integer"
            raise self.error(f"{what}: {text[:40]!r} is {kind}")
        if len(text) > 18:
            raise self.error(f"{what}: {text[:40]!r} is too large")
        return int(text)


def parse(path: str, lines: list[str], progress=None) -> Trace:
    """Parse a Chainer dump into a :class:`Trace`; ``progress(stage, done, total)`` is
    called every 10,000 op records."""
    r = _Reader(path, lines)
    if not lines:
        raise TraceFormatError("file is empty; expected 'N_TENSORS N_OPS'", path=path, line=1)
    n_tensors, n_ops = r.ints("'N_TENSORS N_OPS'", 2)
    tensors = _parse_tensors(r, n_tensors)
    ops = _parse_ops(r, n_ops, tensors, progress)
    while r.pos < len(lines):
        if lines[r.pos].strip():
            raise TraceFormatError(
                f"unexpected content after the last of {n_ops} op records; fix the header's "
                "op count or remove the extra lines", path=path, line=r.pos + 1,
            )
        r.pos += 1
    ops = pair_and_layer(path, ops, tensors)
    trace = Trace.build(path, FORMAT, ops, tensors.values(), abilities=ABILITIES)
    cycle = trace.find_forward_cycle()
    if cycle:
        first = min((trace.op(o) for o in cycle), key=lambda op: op.line)
        raise TraceFormatError(
            f"forward ops form a cycle ({len(cycle)} ops, starting with "
            f"{first.name}); a step's forward graph must be acyclic", path=path, line=first.line,
        )
    return trace


def _parse_tensors(r: _Reader, count: int) -> dict[str, Tensor]:
    tensors: dict[str, Tensor] = {}
    lines, match = r.lines, _TENSOR_LINE_RE.fullmatch
    for _ in range(count):
        quick = match(lines[r.pos]) if r.pos < len(lines) else None
        if quick is not None:  # the common case: canonical id, size and name
            tid, size, name = "t" + quick[1], int(quick[2]), quick[3]
            if tid not in tensors and (not name.startswith("/") or size % 4 == 0):
                r.pos += 1
                if name == "_":
                    tensors[tid] = Tensor(tid, TensorKind.ACTIVATION, name, size, r.pos, None, "float32")
                elif name.startswith("/"):
                    tensors[tid] = Tensor(tid, TensorKind.PARAMETER, name, size, r.pos,
                                          name.rsplit("/", 1)[0] or "/", "float32")
                else:
                    tensors[tid] = Tensor(tid, TensorKind.INPUT, name, size, r.pos, None, "float32")
                continue
        fields = r.next(f"a tensor line 'ID SIZE_BYTES NAME' ({count} expected)")
        line = r.pos
        if len(fields) != 3:
            raise r.error(
                f"expected a tensor line 'ID SIZE_BYTES NAME', found {excerpt(r.lines[line - 1])}"
                + ("; the header's tensor count may be too large" if fields and fields[0] in
                   ("forward", "backward") else "")
            )
        tid = "t" + str(r.to_int(fields[0], "tensor id"))
        size = r.to_int(fields[1], "tensor size")
        name = fields[2]
        if tid in tensors:
            raise r.error(f"duplicate tensor id {fields[0]} (first on line {tensors[tid].line})")
        if name == "_":
            kind, layer = TensorKind.ACTIVATION, None
        elif name.startswith("/"):
            kind, layer = TensorKind.PARAMETER, name.rsplit("/", 1)[0] or "/"
            if size % 4:
                raise r.error(f"parameter {excerpt(name)} has {size} bytes, not a whole number "
                              "of float32 elements (4 bytes each)")
        else:
            kind, layer = TensorKind.INPUT, None
        tensors[tid] = Tensor(tid, kind, name, size, line=line, layer=layer, dtype="float32")
    return tensors


_FORWARD, _BACKWARD = OpKind.FORWARD, OpKind.BACKWARD  # looked up once, not per record
_COUNTS_RE = re.compile(r"([0-9]{1,6}) ([0-9]{1,6})")
_TENSOR_LINE_RE = re.compile(r"([1-9][0-9]{0,17}|0) ([0-9]{1,18}) (\S+)")
_RANK_RE = re.compile(r'"rank":\s*(0|[1-9]\d{0,12})(?=\s*[,}])')


class _Fast:
    """Reads well-formed records without per-field calls; ``None`` means "not sure", and
    the careful reader takes the record (and reports its problem at the right line)."""

    def __init__(self, lines: list[str], tensors: dict[str, Tensor]):
        self.lines, self.tensors = lines, tensors
        self.classes: set[str] = set()
        self.attrs: dict[str, dict] = {}  # attribute text without its rank -> checked attrs
        self.seen: dict[str, dict] = {}  # whole attribute text -> its attrs (a backward record
        # repeats its forward record's text; records share the dict, which nobody changes)

    def record(self, pos: int, k: int) -> Optional[tuple[Op, int]]:
        lines, tensors = self.lines, self.tensors
        if pos + 1 >= len(lines):
            return None
        head = lines[pos]
        if head == "forward":
            kind, allowed = _FORWARD, ("_",)
        elif head == "backward":
            kind, allowed = _BACKWARD, _BACKWARD_ROLES
        else:
            return None
        counts = _COUNTS_RE.fullmatch(lines[pos + 1])
        if counts is None:
            return None
        n_in, n_out = int(counts[1]), int(counts[2])
        first = pos + 2
        end = first + n_in + n_out + 2
        if end > len(lines):
            return None
        inputs, roles = [], []
        for line in lines[first:first + n_in]:
            fields = line.split()
            if len(fields) != 2 or fields[1] not in allowed:
                return None
            tid = "t" + fields[0]
            if tid not in tensors:
                return None
            inputs.append(tid)
            roles.append(fields[1])
        outputs = []
        for line in lines[first + n_in:first + n_in + n_out]:
            tid = "t" + line.strip()
            if tid not in tensors:
                return None
            outputs.append(tid)
        name = lines[end - 2]
        if name not in self.classes:
            if not _CLASS_RE.match(name):
                return None
            self.classes.add(name)
        attrs = self.attributes(lines[end - 1])
        if attrs is None:
            return None
        layer = _layer(tensors, inputs) if kind is _FORWARD else None
        return Op(f"op{k}", kind, name, pos + 1, k, layer, attrs["rank"], attrs, tuple(inputs),
                  tuple(roles), tuple(outputs)), end

    def attributes(self, text: str) -> Optional[dict]:
        attrs = self.seen.get(text)
        if attrs is not None:
            return attrs
        found = _RANK_RE.findall(text)
        if len(found) != 1:
            return None
        key = _RANK_RE.sub('"rank": 0', text)
        template = self.attrs.get(key)
        if template is None:
            try:
                template = _DECODER.decode(key)
            except (ValueError, RecursionError):
                return None
            if not isinstance(template, dict) or not _valid_attrs(template):
                return None
            self.attrs[key] = template
        rank = int(found[0])
        if rank > MAX_RANK:
            return None
        attrs = dict(template)
        attrs["rank"] = rank
        self.seen[text] = attrs
        return attrs


def _valid_attrs(attrs: dict) -> bool:
    rank = attrs.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int):
        return False
    for key, least in _INT_ATTRS.items():
        if key in attrs:
            value = attrs[key]
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_ATTR:
                return False
    return True


def _parse_ops(r: _Reader, count: int, tensors: dict[str, Tensor], progress=None) -> list[Op]:
    """The op records; forward ops get their layers here, backward ops when paired."""
    ops = []
    fast = _Fast(r.lines, tensors)
    for k in range(count):
        if progress and k % 10_000 == 0:
            progress("parse", k, count)
        quick = fast.record(r.pos, k)
        if quick is not None:
            ops.append(quick[0])
            r.pos = quick[1]
            continue
        words = r.next(f"op record {k + 1} of {count} ('forward' or 'backward')")
        start = r.pos
        if words not in (["forward"], ["backward"]):
            raise r.error(
                f"expected 'forward' or 'backward' to start op record {k + 1} of {count}, "
                f"found {excerpt(r.lines[start - 1])}"
            )
        kind = OpKind.FORWARD if words[0] == "forward" else OpKind.BACKWARD
        n_in, n_out = r.ints("'N_IN N_OUT'", 2)
        inputs, roles = [], []
        for _ in range(n_in):
            fields = r.next("an input line 'TENSOR_ID ROLE'")
            if len(fields) != 2:
                raise r.error(f"expected an input line 'TENSOR_ID ROLE', found {excerpt(r.lines[r.pos - 1])}")
            inputs.append(_tensor_ref(r, fields[0], tensors))
            role = fields[1]
            allowed = ("_",) if kind is OpKind.FORWARD else _BACKWARD_ROLES
            if role not in allowed:
                raise r.error(
                    f"input role {excerpt(role)} is not valid in a {words[0]} record; use "
                    + " or ".join(repr(a) for a in allowed)
                )
            roles.append(role)
        outputs = []
        for _ in range(n_out):
            fields = r.next("an output line 'TENSOR_ID'")
            if len(fields) != 1:
                raise r.error(f"expected an output line 'TENSOR_ID', found {excerpt(r.lines[r.pos - 1])}")
            outputs.append(_tensor_ref(r, fields[0], tensors))
        fields = r.next("the function class name")
        if len(fields) != 1 or not _CLASS_RE.match(fields[0]):
            raise r.error(f"expected a function class name, found {excerpt(r.lines[r.pos - 1])}")
        name = fields[0]
        r.next("the function's JSON attributes")
        attrs = _attrs(r)
        layer = _layer(tensors, inputs) if kind is OpKind.FORWARD else None
        ops.append(Op(f"op{k}", kind, name, start, k, layer, attrs["rank"], attrs,
                      tuple(inputs), tuple(roles), tuple(outputs)))
    if progress:
        progress("parse", count, count)
    return ops


def _layer(tensors: dict[str, Tensor], inputs: list[str],
           parameter: TensorKind = TensorKind.PARAMETER) -> Optional[str]:
    """A forward op's layer: that of its first parameter input."""
    for tid in inputs:
        t = tensors[tid]
        if t.kind is parameter:
            return t.layer
    return None


def _tensor_ref(r: _Reader, text: str, tensors: dict[str, Tensor]) -> str:
    tid = "t" + text
    if tid in tensors:  # canonical ids: the common case
        return tid
    tid = "t" + str(r.to_int(text, "tensor id"))
    if tid not in tensors:
        raise r.error(f"unknown tensor id {text}; it is not among the header's tensors")
    return tid


def _attrs(r: _Reader) -> dict:
    text = r.lines[r.pos - 1]
    try:
        attrs = _DECODER.decode(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        message = getattr(exc, "msg", "too deeply nested")
        raise r.error(f"attributes are not valid JSON ({message}); expected one JSON object") from None
    except ValueError as exc:  # NaN, duplicate keys, integers of 4,300+ digits
        raise r.error(f"attributes are not valid JSON ({str(exc)[:60]}); expected one JSON "
                      "object") from None
    if not isinstance(attrs, dict):
        raise r.error("attributes must be one JSON object, e.g. {\"rank\": 0}")
    rank = attrs.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
        raise r.error("attributes need \"rank\", a non-negative integer (the function's "
                      "topological generation)")
    for key, least in _INT_ATTRS.items():
        if key in attrs:
            value = attrs[key]
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_ATTR:
                raise r.error(f"attribute {key!r} must be an integer from {least} to {MAX_ATTR}, "
                              f"not {excerpt(repr(value))}")
    return attrs
