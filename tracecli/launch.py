"""Launching a replay or a calibration: on which ranks, with which backend, checked first;
and the replay's report, refused when its buffers do not verify.

The steps the CLI calls between parsing and printing (:mod:`tracecli.pipeline` plans what
is replayed); torch is imported only inside :mod:`tracecli.replay`, when a run starts.
"""

from __future__ import annotations

import os
from typing import Optional

from .errors import ReplayError
from .costs import DEFAULT_NETWORK, CostModel, resolve_cost_model

__all__ = ["world_size", "in_torchrun", "plan_file_inputs", "replay_launch", "calibration_launch",
           "dry_run_cost", "verified_replay"]


def in_torchrun() -> bool:
    from .replay.launcher import in_torchrun as under

    return under()


def world_size(gpus: int) -> int:
    """The ranks a launch of ``gpus`` runs on: torchrun's world under torchrun, else ``gpus``."""
    from .replay.launcher import in_torchrun

    if not in_torchrun():
        return gpus
    text = os.environ["WORLD_SIZE"]
    if not text.isdigit() or not 1 <= int(text) <= 1 << 20:
        raise ReplayError(f"WORLD_SIZE={text[:20]!r} is not a rank count; torchrun "
                          "sets it: run under torchrun or unset RANK, WORLD_SIZE, MASTER_ADDR")
    return int(text)


def plan_file_inputs(path: str):
    """A replay of the plan file at ``path``: the planner's input, the plan, fixed, and the
    strategy's options it was made with."""
    from .planning.planfile import load_plan_file

    saved = load_plan_file(path)
    return saved.inp, saved.fixed, saved.options


def _launch(launch, oversubscribe: bool):
    from .replay.jobs import Launch
    from .replay.launcher import check_capacity, in_torchrun, resolve_backend

    world = world_size(launch.gpus)
    backend, notice = resolve_backend(launch)
    if not in_torchrun():
        check_capacity(world, backend, oversubscribe)
    return Launch(world, backend, launch.timeout_s, launch.fault), notice


def replay_launch(job, launch, oversubscribe: bool = False, plan_file: Optional[str] = None):
    """``launch`` as it runs ``job`` (torchrun's world, the backend resolved), checked against
    this machine's capacity and memory; with the notice on the backend chosen, if any."""
    from .replay.validate import check_job

    ready, notice = _launch(launch, oversubscribe)
    check_job(job, ready.gpus, ready.backend, plan_file)
    return ready, notice


def calibration_launch(job, launch, oversubscribe: bool = False):
    """As :func:`replay_launch`, for a calibration sweep."""
    from .replay.validate import check_sweep

    ready, notice = _launch(launch, oversubscribe)
    check_sweep(job.sweep, ready.gpus, ready.backend)
    return ready, notice


def dry_run_cost(job, world: int) -> tuple[CostModel, Optional[str]]:
    """The cost model a dry run predicts ``job`` with, and a notice when it is a stand-in for
    the in-place calibration the replay would run."""
    if job.cost is not None:
        return job.cost, None
    return resolve_cost_model(world, DEFAULT_NETWORK), (
        f"dry run: the replay calibrates in place first; predicted here with the "
        f"{DEFAULT_NETWORK} preset (pass --network or --calibration)")


def verified_replay(job, launch, progress=None):
    """Replay ``job``: its report (``None`` on torchrun ranks other than 0), refused when a
    reduced buffer does not hold the expected sum."""
    from .replay import run_replay

    report = run_replay(job, launch, progress)
    if report is not None and not report.verified:
        raise ReplayError("reduced buffers do not hold the expected sums; nothing "
                          "written")
    return report
