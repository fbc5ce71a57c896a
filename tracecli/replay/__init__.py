"""Replay: execute bucket plans with real collectives (torch.distributed) and measure them.

torch is imported only inside this package, and only when a replay or calibration runs;
without it the commands raise :class:`~tracecli.errors.ReplayUnavailableError` with the
install command.
"""

import warnings

# torch's CPU wheel warns on import when numpy is absent; replay never touches numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

from .jobs import BACKENDS, FAULT_MODES, CalibrationJob, Fault, Ranks, ReplayJob, Sweep  # noqa: E402
from .report import ReplayReport  # noqa: E402

__all__ = ["BACKENDS", "FAULT_MODES", "CalibrationJob", "Fault", "Ranks", "ReplayJob", "Sweep",
           "ReplayReport", "run_replay", "run_calibration"]


def run_replay(job: ReplayJob, ranks: Ranks, progress=None):
    """Replay ``job``: its :class:`~.report.ReplayReport` (rank 0; ``None`` on other
    torchrun ranks)."""
    from .processes import start
    from .report import replay_report

    run = start(job, ranks, progress)
    return None if run is None else replay_report(job, run)


def run_calibration(job: CalibrationJob, ranks: Ranks, progress=None):
    """Run the all-reduce sweep: its :class:`~tracecli.costs.CalibrationProfile`."""
    from ..costs import CalibrationProfile
    from .processes import start

    run = start(job, ranks, progress)
    return None if run is None else CalibrationProfile.measured(run.points, run.world, run.backend,
                                                                run.device)
