"""Tensor sizes: parameters, activations, and statistics of the gradients."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

from ..model import TensorKind, Trace
from .readiness import Readiness

__all__ = ["SizeClass", "SizeReport", "size_report", "size_class"]


@dataclass(frozen=True, slots=True)
class SizeClass:
    """Gradients with ``low <= bytes < high`` (powers of two; ``[0, 1)`` for empty ones)."""

    low: int
    high: int
    count: int
    nbytes: int


@dataclass(frozen=True)
class SizeReport:
    parameters: int
    parameter_bytes: Optional[int]
    parameter_elements: Optional[int]
    activations: int
    activation_bytes: Optional[int]
    inputs: int
    input_bytes: Optional[int]
    gradients: int
    known: int  # gradients whose size is known
    min: Optional[int]
    median: Optional[float]
    mean: Optional[float]
    max: Optional[int]
    total: Optional[int]
    histogram: tuple[SizeClass, ...]


def size_class(nbytes: int) -> tuple[int, int]:
    """The power-of-two class ``[low, high)`` of a size.

    >>> size_class(4096), size_class(4097), size_class(0)
    ((4096, 8192), (4096, 8192), (0, 1))
    """
    if nbytes <= 0:
        return 0, 1
    low = 1 << (nbytes.bit_length() - 1)
    return low, low * 2


def _total(values: list[Optional[int]]) -> Optional[int]:
    return None if any(v is None for v in values) else sum(values)


def size_report(trace: Trace, ready: Readiness) -> SizeReport:
    params = trace.parameters()
    activation, input_kind = TensorKind.ACTIVATION, TensorKind.INPUT
    acts = [t for t in trace.tensors() if t.kind is activation]
    inputs = [t for t in trace.tensors() if t.kind is input_kind]
    sizes = [g.nbytes for g in ready.gradients if g.nbytes is not None]
    classes: dict[tuple[int, int], list[int]] = {}
    for s in sizes:
        classes.setdefault(size_class(s), []).append(s)
    histogram = tuple(
        SizeClass(low, high, len(members), sum(members))
        for (low, high), members in sorted(classes.items())
    )
    return SizeReport(
        parameters=len(params),
        parameter_bytes=_total([t.nbytes for t in params]) if params else 0,
        parameter_elements=_total([t.elements for t in params]) if params else 0,
        activations=len(acts),
        activation_bytes=_total([t.nbytes for t in acts]) if acts else None,
        inputs=len(inputs),
        input_bytes=_total([t.nbytes for t in inputs]) if inputs else None,
        gradients=len(ready.gradients),
        known=len(sizes),
        min=min(sizes) if sizes else None,
        median=statistics.median(sizes) if sizes else None,
        mean=statistics.fmean(sizes) if sizes else None,
        max=max(sizes) if sizes else None,
        total=sum(sizes) if sizes else None,
        histogram=histogram,
    )
