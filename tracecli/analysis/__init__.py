"""Analyses: pure functions of a :class:`~tracecli.model.Trace` (they never read files)."""

from .readiness import GradientReady, LayerReady, Readiness, backward_schedule, readiness
from .sizes import SizeClass, SizeReport, size_report

__all__ = [
    "GradientReady", "LayerReady", "Readiness", "backward_schedule", "readiness",
    "SizeClass", "SizeReport", "size_report",
]
