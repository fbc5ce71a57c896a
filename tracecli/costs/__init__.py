"""Collective cost models: what a collective of a kind and size costs on some ranks.

One small protocol (:class:`~.model.CostModel`) that planning, the timeline and replay
call; implementations for each source of figures: the alpha-beta line and its interconnect
presets (:mod:`.alphabeta`), measured times with the line between and beyond them
(:mod:`.measured`), least-squares fits (:mod:`.fit`), the calibration profile file
(:mod:`.profile`), and one constructor per source (:mod:`.sources`). Per-kind formulas live
in one table (:mod:`.collectives`).
"""

from .alphabeta import ALGORITHMS, NETWORKS, AlphaBeta, Network
from .collectives import KINDS, KindCost, bus_bandwidth_gbps
from .error import ErrorBand, ErrorTable
from .fit import POOR_FIT_MAPE, POOR_FIT_R2, RingFit, fit_ring, monotone, trimmed_mean
from .alphabeta import DEFAULT_NETWORK
from .measured import MEASURED_KIND, Measured
from .model import CostModel, Linear
from .profile import CALIBRATION_FORMAT, CalibrationProfile, ProfilePoint, read_profile
from .sources import fitted_model, point_spread, profile_model, resolve_cost_model
from .topology import Topology

__all__ = [
    "ALGORITHMS", "NETWORKS", "ErrorBand", "ErrorTable", "AlphaBeta", "Network", "KINDS", "KindCost", "bus_bandwidth_gbps",
    "POOR_FIT_MAPE", "POOR_FIT_R2", "RingFit", "fit_ring", "monotone", "trimmed_mean", "Measured", "MEASURED_KIND", "DEFAULT_NETWORK",
    "CostModel", "Linear", "CALIBRATION_FORMAT", "CalibrationProfile", "ProfilePoint",
    "read_profile", "fitted_model", "profile_model", "resolve_cost_model", "Topology",
    "point_spread",
]
