"""Sizes sidecars: ``TRACE.sizes.json``, a model's parameters with shapes and dtypes.

A JSON list, in the model's own order (TensorFlow: trainable variables; PyTorch:
``model.named_parameters()``), of
``{"name": "conv1_conv/kernel:0", "shape": [7, 7, 3, 64], "dtype": "float32"}`` (a dtype
as ``str(p.dtype)`` writes it, ``torch.float32``, is read too), and a parameter's marks
(:class:`~tracecli.model.ParamMeta`) where a framework sets them: Megatron-Core's
``"expert": true`` (``param.allreduce == False``) and ``"shared_embedding": true``
(``param.shared_embedding``), DeepSpeed's ``"comm_dtype": "bfloat16"``. Other keys are
ignored. Op lists take their sizes from it; profiler traces their parameter names; a
parameter list given as the trace is all there is. Every entry is checked and reported at
its own line.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import NamedTuple, Optional

from ..errors import SizesError, excerpt
from ..inputfile import open_input
from ..jsonfile import strict_decoder
from ..model import DTYPE_BYTES, NO_META, ParamMeta, check_fields

__all__ = ["Variable", "DTYPE_BYTES", "load_sizes", "read_sizes", "line_of", "find_sidecar",
           "variable_layer",
           "MAX_SIDECAR_BYTES", "MAX_ELEMENTS"]

MAX_SIDECAR_BYTES = 256 << 20
MAX_ELEMENTS = 1 << 48  # no real parameter holds more


class Variable(NamedTuple):
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    line: int
    layer: str  # variable_layer(name)
    meta: ParamMeta = NO_META  # its marks

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


def variable_layer(name: str) -> str:
    """The part of a variable's name before the last ``/`` (``conv1_conv/kernel:0``).

    >>> variable_layer("conv1_conv/kernel:0")
    'conv1_conv'
    >>> variable_layer("bias:0")
    'bias'
    """
    if "/" in name:
        return name.rsplit("/", 1)[0]
    return name.split(":", 1)[0]


def find_sidecar(trace_path: str | Path) -> Optional[Path]:
    """``x.sizes.json`` beside ``x.txt``, ``x.json`` or ``x.json.gz`` (or
    ``x.txt.sizes.json``), if it exists.

    >>> find_sidecar("sample_traces/resnet50_horovod_tf.txt").name
    'resnet50_horovod_tf.sizes.json'
    """
    path = Path(trace_path)
    stem = path.with_suffix("") if path.suffix == ".gz" else path
    for candidate in (stem.with_suffix(".sizes.json"), Path(str(path) + ".sizes.json")):
        if candidate != path and candidate.is_file():
            return candidate
    return None


def load_sizes(path: str | Path) -> list[Variable]:
    """The variables of the sizes file at ``path``, each checked (``line`` 0: not counted,
    the file being valid; :func:`line_of` finds it)."""
    path = str(path)
    return read_sizes(path, open_input(path, SizesError, "sizes file", MAX_SIDECAR_BYTES).read())


def line_of(path: str, index: int) -> int:
    """The line of entry ``index`` of a valid sizes file (for a message about it); 1 where
    the file cannot be read again (standard input)."""
    try:
        text = open_input(path, SizesError, "sizes file", MAX_SIDECAR_BYTES).read().decode("utf-8-sig")
        return _load_carefully(path, text)[index].line
    except (SizesError, UnicodeDecodeError, IndexError, OSError):
        return 1


def read_sizes(path: str, data: bytes) -> list[Variable]:
    """The variables of a sizes file's ``data``."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SizesError("not UTF-8 text; a sizes file is a JSON list", path=path, line=line) from None
    try:  # the common case, a valid file: one pass of the C decoder
        doc = strict_decoder().decode(text)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, list) and doc:
        try:
            return [_variable(path, 0, i, entry) for i, entry in enumerate(doc)]
        except SizesError:
            pass  # the careful pass below reports the problem at its line
    return _load_carefully(path, text)


def _load_carefully(path: str, text: str) -> list[Variable]:
    """Entry by entry, so the first problem is reported at its own line."""
    decoder = strict_decoder()
    pos = _skip(text, 0)
    if pos >= len(text):
        raise SizesError("file is empty; expected a JSON list of "
                         '{"name", "shape", "dtype"} objects', path=path, line=1)
    if text[pos] != "[":
        raise SizesError("expected a JSON list of "
                         '{"name", "shape", "dtype"} objects in trainable-variable order', path=path, line=_line(text, pos))
    pos = _skip(text, pos + 1)
    variables: list[Variable] = []
    lines = _LineCounter(text)
    if pos < len(text) and text[pos] == "]":
        pos += 1
    else:
        while True:
            try:
                entry, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise SizesError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
            except ValueError as exc:  # duplicate keys, NaN, integers of 4,300+ digits
                raise SizesError(f"invalid JSON: {str(exc)[:80]}", path=path, line=lines.at(pos)) from None
            except RecursionError:
                raise SizesError("invalid JSON: nested too deeply", path=path, line=_line(text, pos)) from None
            variables.append(_variable(path, lines.at(pos), len(variables), entry))
            pos = _skip(text, end)
            if pos < len(text) and text[pos] == ",":
                pos = _skip(text, pos + 1)
                continue
            if pos < len(text) and text[pos] == "]":
                pos += 1
                break
            raise SizesError("invalid JSON: expected ',' or ']' after a list entry", path=path, line=_line(text, min(pos, len(text))))
    if _skip(text, pos) < len(text):
        raise SizesError("invalid JSON: extra data after the list", path=path, line=_line(text, _skip(text, pos)))
    if not variables:
        raise SizesError("the list is empty; it must name every trainable variable", path=path, line=1)
    return variables


def _variable(path: str, line: int, index: int, entry) -> Variable:
    if type(entry) is not dict or len(entry) != 3:
        return _checked_variable(path, line, index, entry)
    name, shape, dtype = entry.get("name"), entry.get("shape"), entry.get("dtype")
    if (type(name) is str and name and type(shape) is list and len(shape) <= 64
            and type(dtype) is str and dtype in DTYPE_BYTES
            and (not shape or (_INT_ONLY.issuperset(map(type, shape))  # exact ints: no bool
                               and min(shape) >= 0 and max(shape) <= MAX_ELEMENTS))):
        elements = math.prod(shape)  # the common case: every check passed at once
        if elements <= MAX_ELEMENTS:
            return _new(Variable, (index, name, tuple(shape), dtype, elements * DTYPE_BYTES[dtype],
                                   line, variable_layer(name), NO_META))
    return _checked_variable(path, line, index, entry)


_INT_ONLY = frozenset({int})
# A Variable without its Python __new__: Variable(...) with keywords costs ~0.6 us more an
# entry (40 ms on a 66,000-entry sidecar). Its values above follow these fields:
_new = tuple.__new__
check_fields(Variable, "index name shape dtype nbytes line layer meta")


def _checked_variable(path: str, line: int, index: int, entry) -> Variable:
    """An entry checked field by field, its first problem reported."""
    where = f"entry {index}"
    if not isinstance(entry, dict):
        raise SizesError(f"{where} must be an object with name, shape and dtype", path=path, line=line)
    missing = [k for k in ("name", "shape", "dtype") if k not in entry]
    if missing:
        raise SizesError(f"{where} lacks {', '.join(missing)}", path=path, line=line)
    name, shape, dtype = entry["name"], entry["shape"], entry["dtype"]
    if not isinstance(name, str) or not name:
        raise SizesError(f"{where}: name must be a non-empty string", path=path, line=line)
    if type(shape) is not list or len(shape) > 64 or not all(
        type(d) is int and 0 <= d <= MAX_ELEMENTS for d in shape  # an exact int: no bool
    ):
        raise SizesError(f"{where} ({excerpt(name)}): shape must be a list of "
                         "non-negative integers", path=path, line=line)
    if isinstance(dtype, str):
        dtype = dtype.removeprefix("torch.")  # str(p.dtype)
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise SizesError(f"{where} ({excerpt(name)}): unknown dtype {excerpt(str(dtype))}; use one of "
                         + ", ".join(sorted(DTYPE_BYTES)), path=path, line=line)
    elements = math.prod(shape)
    if elements > MAX_ELEMENTS:
        raise SizesError(f"{where} ({excerpt(name)}): shape {excerpt(str(shape))} holds "
                         "more elements than any real parameter", path=path, line=line)
    nbytes = elements * DTYPE_BYTES[dtype]
    try:
        meta = ParamMeta.read(entry)
    except ValueError as exc:
        raise SizesError(f"{where} ({excerpt(name)}): {exc}", path=path, line=line) from None
    return Variable(index, name, tuple(shape), dtype, nbytes, line, variable_layer(name), meta)


_WHITESPACE = re.compile(r"[ \t\r\n]*")


def _skip(text: str, pos: int) -> int:
    return _WHITESPACE.match(text, pos).end()


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


class _LineCounter:
    """Line numbers of increasing positions in linear total time."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line
