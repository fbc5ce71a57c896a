"""Which cost model a request gets, decided in one place (issue 22 item 2).

Sources, first that applies: a topology or ``--nccl-tests`` (NCCL's model, the measured sizes
answering for themselves); a calibration profile, a network preset or alpha/bandwidth
overrides (the flat line, the profile's points where it has them); else the trace's own
timed gradient all-reduces (:mod:`.tracefit`); else the default preset. Mixing the flat
line's flags with NCCL's, or a calibration with a preset, is one message here
(:func:`conflict`), which the CLI shows as a usage error. Every model resolved carries its
error (``error(kind, n)``) for plans and advice to read.

>>> model, notes = resolve(CostRequest(gpus=4, network="25gbe"))
>>> model.name, model.gpus, model.error(MEASURED_KIND, 1 << 20) is None, notes
('25gbe', 4, True, [])
>>> conflict(CostRequest(network="25gbe", calibration="p.json"))
'pass --calibration or --network, not both'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import CostModelError
from .alphabeta import DEFAULT_NETWORK
from .measured import MEASURED_KIND  # noqa: F401 (the doctest's)
from .model import CostModel
from .nccl.request import TopologyRequest, nccl_cost_model
from .profile import read_profile
from .sources import NOT_BOTH, resolve_cost_model
from .tracefit import TraceTimes, trace_fit

__all__ = ["CostRequest", "TraceTimes", "resolve", "conflict", "DEFAULT_GPUS"]

DEFAULT_GPUS = 8
_FLAT = ("network", "alpha_us", "bandwidth_gbps", "calibration", "algorithm", "launch_us")


@dataclass(frozen=True)
class CostRequest:
    """What the user asked of the cost model. ``gpus=None`` takes the calibration's or the
    trace's rank count, else 8; ``algorithm`` and ``launch_us`` ``None``: not given (ring,
    0 us); ``topology`` given: NCCL's model of it."""

    gpus: Optional[int] = None
    network: Optional[str] = None
    algorithm: Optional[str] = None
    alpha_us: Optional[float] = None
    bandwidth_gbps: Optional[float] = None
    launch_us: Optional[float] = None
    calibration: Optional[str] = None
    topology: Optional[TopologyRequest] = None
    nccl_tests: Optional[str] = None  # nccl-tests output measured on it

    @property
    def explicit(self) -> bool:
        """True when it names an interconnect (profile, preset, overrides or a topology)."""
        return any(v is not None for v in (self.calibration, self.network, self.alpha_us,
                                           self.bandwidth_gbps, self.topology, self.nccl_tests))

    @property
    def flat_flags(self) -> list[str]:
        """The flat line's flags given, as typed."""
        return ["--" + name.replace("_", "-") for name in _FLAT
                if getattr(self, name) is not None]

    def model(self, default_gpus: int = DEFAULT_GPUS) -> CostModel:
        return resolve(self, None, default_gpus)[0]


def conflict(request: CostRequest) -> Optional[str]:
    """What is wrong with mixing the sources asked for, or ``None``."""
    nccl = request.topology is not None and request.topology.given or request.nccl_tests is not None
    flat = request.flat_flags
    if nccl and flat:
        why = " ".join(request.topology.flags() if request.topology is not None else []) \
            or "--nccl-tests"
        more = " (measured times go in as --nccl-tests FILE)" if request.calibration else ""
        return (f"{', '.join(flat)} describe{'s' if len(flat) == 1 else ''} the flat alpha-beta "
                f"model; {why} ask{'s' if ' ' not in why else ''} for NCCL's model of a topology: "
                f"pass one or the other{more}")
    if request.calibration is not None and request.network is not None:
        return NOT_BOTH
    return None


def resolve(request: CostRequest, trace: Optional[TraceTimes] = None,
            default_gpus: int = DEFAULT_GPUS) -> tuple[CostModel, list[str]]:
    """The cost model for ``request`` (fitted to ``trace``'s own all-reduces where nothing
    else is asked for), with the notices the user should see."""
    problem = conflict(request)
    if problem:
        raise CostModelError(problem)
    if request.topology is not None or request.nccl_tests is not None:
        return nccl_cost_model(request.topology or TopologyRequest(), request.gpus,
                               request.nccl_tests)
    algorithm, launch_us = request.algorithm or "ring", request.launch_us or 0.0
    profile = read_profile(request.calibration) if request.calibration else None
    notices: list[str] = []
    gpus = request.gpus
    if gpus is None:
        world = trace.world_size if trace is not None else None
        gpus = profile.gpus if profile is not None else world or default_gpus
    elif profile is not None and profile.gpus != gpus:
        notices.append(f"{request.calibration} was measured on {profile.gpus} ranks; predicting "
                       f"{gpus} ranks from its latency and bandwidth")
    if not request.explicit and trace is not None:
        model, why = trace_fit(trace, gpus, algorithm, launch_us)
        if model is not None:
            if model.points_gpus != gpus:
                notices.append(f"the trace's all-reduces ran on {model.points_gpus} ranks; "
                               f"predicting {gpus} ranks extrapolates the line fitted to them "
                               f"(pass --calibration measured on {gpus} ranks to rely on it)")
            return model, notices + ([why] if why else [])
        if why:
            notices.append(why + f"; using the {DEFAULT_NETWORK} preset (pass --network or "
                           "--calibration)")
    model = resolve_cost_model(gpus, request.network, request.alpha_us, request.bandwidth_gbps,
                               request.calibration, algorithm, launch_us, profile=profile)
    return model, notices

