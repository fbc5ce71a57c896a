"""Replay: execute bucket plans with real collectives (torch.distributed) and measure them.

torch is imported only inside this package, and only when a replay or calibration runs;
without it the commands raise :class:`~tracecli.errors.ReplayUnavailableError` with the
install command.
"""

import warnings

# torch's CPU wheel warns on import when numpy is absent; replay never touches numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

from ..planning.fit import RingFit, fit_ring  # noqa: E402
from .jobs import (  # noqa: E402
    BACKENDS, FAULT_MODES, CalibrationJob, Fault, FixedPlan, Launch, ReplayJob, Sweep,
)

__all__ = ["RingFit", "fit_ring", "BACKENDS", "FAULT_MODES", "CalibrationJob", "Fault",
           "FixedPlan", "Launch", "ReplayJob", "Sweep", "run_replay", "run_calibration"]


def run_replay(job: ReplayJob, launch: Launch, progress=None):
    """Replay ``job`` and return the report dict (rank 0; ``None`` on other torchrun ranks)."""
    from .launcher import launch as start
    from .report import replay_report

    payload = start(job, launch, progress)
    return None if payload is None else replay_report(job, payload)


def run_calibration(job: CalibrationJob, launch: Launch, progress=None):
    """Run the all-reduce sweep and return the calibration profile dict."""
    from .launcher import launch as start
    from .report import calibration_report

    payload = start(job, launch, progress)
    return None if payload is None else calibration_report(payload)
