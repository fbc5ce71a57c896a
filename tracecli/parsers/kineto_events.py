"""The events of a PyTorch profiler (Kineto) trace that tracecli uses, checked and compact.

Reads ``export_chrome_trace`` output as a stream (see :mod:`._jsonstream`) and keeps, as
small records, only what the analyses need: host ops and annotations (``cpu_op``,
``user_annotation``; the shapes of collectives, of gradient accumulation and of FSDP's own
``fsdp::`` ops, of the layer operators :mod:`.kineto_roles` lists), the Python tracer's
``nn.Module: Class_N`` scopes (``with_stack=True``; see :mod:`.kineto_modules`), collective kernels (``nccl*``), the CUDA runtime calls that launch
work on the device (to pair a kernel with its host op), every device activity as a
:class:`Activity` (kernels, memory copies and sets: when each ran, for device time, see
:mod:`.kineto_device`), the device's ``ProfilerStep#K`` annotations, and ``fwdbwd`` flows.
Every kept event is checked where it is read: ``ts`` and ``dur`` finite, non-negative
numbers, ``Input Dims`` lists of non-negative integers; a bad one is reported at its line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, NamedTuple, Optional

from ..errors import TraceFormatError, excerpt
from ..jsonfile import finite_number
from ._jsonstream import iter_trace
from .kineto_roles import ROLE_OPS, layer_file

__all__ = ["Event", "Flow", "Activity", "KinetoEvents", "read_events", "torch_dtype", "COMM_ARGS",
           "MODULE_PREFIX", "DETACH", "input_shape"]

# args kept for the events that need them (collectives, gradient accumulation)
COMM_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
             "Process Group Name", "Seq", "In split size", "Out split size", "Src Rank",
             "Dst Rank")
_SHAPE_ARGS = ("Input Dims", "Input type")
DETACH = "aten::detach"  # its shape says what a reentrant backward detached (.kineto_ckpt)
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_INTEGER_ARGS = ("In msg nelems", "Out msg nelems", "Group size", "Seq", "Src Rank", "Dst Rank")
MAX_TEXT_ARG = 1 << 16  # a split list or Concrete Inputs entry longer than this is not read
_KEEP_CATS = frozenset({"cpu_op", "user_annotation"})
_OTHER_CATS = frozenset({"gpu_user_annotation", "python_function"})
MODULE_PREFIX = "nn.Module: "  # the Python tracer's scope of a module's __call__ (with_stack=True)
MAX_DIM = 1 << 48  # no real tensor dimension is larger
MAX_EVENTS = 50_000_000

# The spellings torch's profiler uses in "Input type" (C++ type names) and in the
# "dtype" of collectives (ScalarType names), mapped to torch's Python names.
_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "long int": "int64", "long": "int64", "int": "int32", "short int": "int16", "short": "int16",
    "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
    "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8",
    "Bool": "bool", "ComplexFloat": "complex64", "ComplexDouble": "complex128",
    "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2",
}


def torch_dtype(spelling: Any) -> Optional[str]:
    """torch's name for a profiler dtype spelling; ``None`` if unknown.

    >>> torch_dtype("c10::BFloat16"), torch_dtype("Float"), torch_dtype("long int")
    ('bfloat16', 'float32', 'int64')
    """
    return _DTYPES.get(spelling) if isinstance(spelling, str) else None


def input_shape(event: "Event") -> tuple[Optional[tuple[int, ...]], Optional[str]]:
    """The shape and dtype of ``event``'s first input (``Input Dims``, ``Input type``:
    ``record_shapes=True``), each ``None`` where not recorded; both ``None`` where the
    input is no tensor (``Input type`` ``''``)."""
    args = event.args or {}
    dims, types = args.get("Input Dims"), args.get("Input type")
    shape = None
    if isinstance(types, list) and types and types[0] == "":
        return None, None
    if isinstance(dims, list) and dims and isinstance(dims[0], list) \
            and all(isinstance(d, int) for d in dims[0]):
        shape = tuple(dims[0])
    dtype = torch_dtype(types[0]) if isinstance(types, list) and types else None
    return shape, dtype


class Event(NamedTuple):
    """A complete (``ph: X``) event: times in microseconds as recorded."""

    name: str
    cat: str
    tid: Any
    ts: float
    dur: float
    line: int
    args: Optional[dict] = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


class Flow(NamedTuple):
    id: Any
    phase: str  # "s" (start, at the forward op) or "f" (finish, at the backward op)
    tid: Any
    ts: float


class Activity(NamedTuple):
    """One activity on the device (a kernel, a memory copy or set), us as recorded."""

    ts: float
    end: float
    correlation: Any  # its launch's correlation id (None where the trace gives none)
    collective: bool  # a collective kernel (NCCL/RCCL), which runs on its own stream
    kernel: bool  # a kernel (else a memory copy or set)


@dataclass
class KinetoEvents:
    host: list[Event] = field(default_factory=list)  # cpu_op and user_annotation
    kernels: list[Event] = field(default_factory=list)  # collective kernels
    launches: dict[Any, tuple[Any, float]] = field(default_factory=dict)  # correlation -> (tid, ts)
    flows: list[Flow] = field(default_factory=list)
    device: list[Activity] = field(default_factory=list)  # every kernel, memcpy, memset
    device_steps: list[tuple[str, float, float]] = field(default_factory=list)  # ProfilerStep#K
    modules: list[Event] = field(default_factory=list)  # the Python tracer's nn.Module scopes
    frames: list[Event] = field(default_factory=list)  # its frames of torch's layers' forward
    top: dict[str, Any] = field(default_factory=dict)  # distributedInfo, schemaVersion, ...
    events: int = 0


def _number(value, path: str, line: int, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceFormatError(f"{what} must be a number, not {excerpt(repr(value))}", path=path, line=line)
    if type(value) is int and not finite_number(value):
        raise TraceFormatError(f"{what} must be a finite, non-negative number of "
                               "microseconds, not an integer that large", path=path, line=line)
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise TraceFormatError(f"{what} must be a finite, non-negative number of "
                               f"microseconds, not {value!r}", path=path, line=line)
    return value


def _key(value, path: str, line: int, what: str):
    """An id used to join events (thread, flow, correlation): an integer or a string."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and len(value) > 256):
        raise TraceFormatError(f"{what} must be an integer or a short string, not "
                               f"{excerpt(repr(value))}", path=path, line=line)
    return value


def _dims(value, path: str, line: int) -> list:
    """``Input Dims``: a list whose items are shapes (lists of ints) or lists of shapes."""
    if not isinstance(value, list):
        raise TraceFormatError("\"Input Dims\" must be a list of shapes", path=path, line=line)
    for item in value:
        if not isinstance(item, list):
            raise TraceFormatError("\"Input Dims\" must be a list of shapes", path=path, line=line)
        for d in item:
            inner = d if isinstance(d, list) else [d]
            for x in inner:
                if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_DIM:
                    raise TraceFormatError("\"Input Dims\" holds "
                                           f"{excerpt(repr(x))}; dimensions are non-negative "
                                           "integers", path=path, line=line)
    return value


def _kept_args(name: str, args: Any, path: str, line: int) -> Optional[dict]:
    """The args an analysis needs from this event, checked; ``None`` for the rest."""
    if not isinstance(args, dict):
        if args is None:
            return None
        raise TraceFormatError("\"args\" must be an object", path=path, line=line)
    if "Collective name" in args or name.startswith(("c10d::", "gloo:", "nccl:", "fsdp::")) \
            or name == "record_param_comms" \
            or "AccumulateGrad" in name or name in ROLE_OPS or name == DETACH:
        kept = {k: args[k] for k in COMM_ARGS + _SHAPE_ARGS if k in args}
        if name.startswith("c10d::") and "Concrete Inputs" in args:  # splits, peers
            kept["Concrete Inputs"] = args["Concrete Inputs"]
        if "Input Dims" in kept:
            _dims(kept["Input Dims"], path, line)
        _check_integers(kept, path, line)
        return kept or None
    return None


def _check_integers(kept: dict, path: str, line: int) -> None:
    for key in _INTEGER_ARGS:
        v = kept.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DIM):
            raise TraceFormatError(f"\"{key}\" must be a non-negative integer, not "
                                   f"{excerpt(repr(v))}", path=path, line=line)


def _is_collective_kernel(name: str) -> bool:
    return name.startswith("nccl") or "ncclKernel" in name or "ncclDevKernel" in name


def read_events(stream: BinaryIO, path: str,
                progress: Optional[Callable[[str, int, int], None]] = None) -> KinetoEvents:
    """The kept events of a trace stream."""
    out = KinetoEvents()
    flows = out.flows
    seen_events = False
    for kind, value, line in iter_trace(stream, path):
        if kind == "key":
            key, doc = value
            out.top[key] = doc
            continue
        if kind == "events":
            seen_events = True
            continue
        out.events += 1
        if out.events > MAX_EVENTS:
            raise TraceFormatError(f"more than {MAX_EVENTS:,} trace events", path=path, line=line)
        if progress and out.events % 200_000 == 0:
            progress("read events", out.events, 0)
        if not isinstance(value, dict):
            raise TraceFormatError("a trace event must be a JSON object", path=path, line=line)
        ph = value.get("ph")
        if ph == "X":
            _complete(out, value, path, line)
        elif ph in ("s", "f") and value.get("cat") == "fwdbwd":
            flows.append(Flow(_key(value.get("id"), path, line, "flow id"), ph,
                              _key(value.get("tid", 0), path, line, "tid"),
                              _number(value.get("ts"), path, line, "ts")))
        elif ph is None:
            raise TraceFormatError("a trace event without \"ph\" (its phase)", path=path, line=line)
    if not seen_events and "traceEvents" not in out.top:
        raise TraceFormatError("no \"traceEvents\": not a profiler trace (write one "
                               "with torch.profiler's export_chrome_trace)", path=path, line=1)
    if "traceEvents" in out.top:
        raise TraceFormatError("\"traceEvents\" must be a list of events", path=path, line=1)
    return out


def _complete(out: KinetoEvents, value: dict, path: str, line: int) -> None:
    """Keep a complete (``ph: X``) event where an analysis reads its category."""
    cat = value.get("cat")
    if not isinstance(cat, str):
        return  # uncategorised events are not ones tracecli reads
    if cat in ("cuda_runtime", "cuda_driver"):
        args = value.get("args")
        if isinstance(args, dict) and "correlation" in args:
            out.launches[_key(args["correlation"], path, line, "correlation")] = (
                _key(value.get("tid"), path, line, "tid"), _number(value.get("ts"), path, line, "ts"))
        return
    if cat not in _KEEP_CATS and cat not in _DEVICE_CATS and cat not in _OTHER_CATS:
        return
    name = value.get("name")
    if not isinstance(name, str):
        raise TraceFormatError("a trace event's \"name\" must be a string", path=path, line=line)
    if cat == "python_function":
        kept = out.modules if name.startswith(MODULE_PREFIX) else out.frames if layer_file(name) else None
        if kept is not None:
            kept.append(Event(name, cat, _key(value.get("tid", 0), path, line, "tid"),
                              _number(value.get("ts"), path, line, "ts"),
                              _number(value.get("dur", 0), path, line, "dur"), line))
        return
    ts = _number(value.get("ts"), path, line, "ts")
    dur = _number(value.get("dur", 0), path, line, "dur")
    args = value.get("args")
    if cat in _KEEP_CATS:
        tid = _key(value.get("tid", 0), path, line, "tid")
        out.host.append(Event(name, cat, tid, ts, dur, line, _kept_args(name, args, path, line)))
    elif cat == "gpu_user_annotation":
        if name.startswith("ProfilerStep#"):
            out.device_steps.append((name, ts, ts + dur))
    else:
        _device(out, cat, name, ts, dur, value, args, path, line)


def _device(out: KinetoEvents, cat: str, name: str, ts: float, dur: float, value: dict, args,
            path: str, line: int) -> None:
    """A device activity; a collective kernel is also kept whole, with its args."""
    corr = args.get("correlation") if isinstance(args, dict) else None
    if corr is not None:
        corr = _key(corr, path, line, "correlation")
    collective = cat == "kernel" and _is_collective_kernel(name)
    out.device.append(Activity(ts, ts + dur, corr, collective, cat == "kernel"))
    if collective:
        kept = {k: args[k] for k in ("correlation",) + COMM_ARGS
                if isinstance(args, dict) and k in args} or None
        _check_integers(kept or {}, path, line)
        tid = _key(value.get("tid", 0), path, line, "tid")
        out.kernels.append(Event(name, cat, tid, ts, dur, line, kept))
