"""What a replay of an FSDP plan runs (torch-free, the same on every rank): the compute spans
with the collectives each waits for, and each collective's channel, buffer sizes, process
groups, and the compute point (and collective) it waits for before it may start.

Process groups follow FSDP's mesh, ranks numbered ``replicate x shard`` as
``init_device_mesh((R, S))`` numbers them: all-gathers and reduce-scatters run on the shard
group of S consecutive ranks, HSDP's all-reduces on the replicate group (ranks S apart), and
the backward all-gather of a unit resharded to G ranks on G consecutive ranks within its
shard group (``mesh.view(-1, G)``, ``_fsdp_init.py:152-195``). Each channel has groups of its
own, so its collectives keep their order on every rank.

>>> rank_groups("shard", 4, 2, 2), rank_groups("replicate", 4, 2, 2)
([[0, 1], [2, 3]], [[0, 2], [1, 3]])
>>> rank_groups("post:2", 8, 4, 2)
[[0, 1], [2, 3], [4, 5], [6, 7]]
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ...errors import PlanError
from ...model import DTYPE_BYTES, CollectiveKind
from .details import channel_of
from .options import setup_of
from .rules import schedule_of

__all__ = ["ReplayComm", "ReplaySchedule", "replay_schedule", "rank_groups", "replay_bytes",
           "CHANNEL_ORDER", "SYSTEMS"]

SYSTEMS = ("fsdp2", "fsdp1")

CHANNEL_ORDER = ("allgather", "reducescatter", "allreduce")


class ReplayComm(NamedTuple):
    """One collective of the replay: its channel, kind, unsharded ``elements`` and dtype,
    the group family it runs on (``shard``, ``replicate``, ``post:G``) and its size,
    ``after`` compute spans, ``follows`` (a collective's index) before it may start."""

    channel: str
    kind: CollectiveKind
    elements: int
    dtype: str
    family: str
    group: int
    after: int
    follows: Optional[int] = None


class ReplaySchedule(NamedTuple):
    spans: tuple[float, ...]
    waits: tuple[tuple[int, ...], ...]
    comms: tuple[ReplayComm, ...]
    update_ms: float
    shard: int
    replicate: int

    def families(self) -> list[tuple[str, str]]:
        """Every (channel, group family) its collectives use, in a fixed order (every rank
        makes their process groups in it)."""
        used = {(c.channel, c.family) for c in self.comms}
        return sorted(used, key=lambda cf: (CHANNEL_ORDER.index(cf[0]), cf[1]))


def replay_schedule(plan) -> ReplaySchedule:
    """The schedule of an FSDP ``plan`` (its inputs, options and ranks: the planner's own)."""
    f = plan.inp.fsdp
    if f is None or plan.fsdp is None:
        raise PlanError("not an FSDP plan")
    setup = setup_of(f, plan.options, plan.cost.gpus)
    sched = schedule_of(setup)
    comms = []
    for issue in sched.issues:
        if issue.kind is CollectiveKind.ALL_REDUCE:
            family = "replicate"
        elif issue.kind is CollectiveKind.ALL_GATHER and issue.group < setup.shard:
            family = f"post:{issue.group}"
        else:
            family = "shard"
        comms.append(ReplayComm(channel_of(issue.kind), issue.kind, issue.elements, issue.dtype,
                                family, issue.group, issue.after, issue.follows))
    return ReplaySchedule(sched.spans, sched.waits, tuple(comms), plan.inp.update_ms,
                          setup.shard, setup.replicate)


def rank_groups(family: str, world: int, shard: int, replicate: int) -> list[list[int]]:
    """The ranks of each process group of ``family`` (see the module's docstring)."""
    if shard * replicate != world:
        raise PlanError(f"a mesh of {replicate} x {shard} does not hold {world} ranks")
    if family == "shard":
        return [[r * shard + s for s in range(shard)] for r in range(replicate)]
    if family == "replicate":
        return [[r * shard + s for r in range(replicate)] for s in range(shard)]
    size = int(family.split(":", 1)[1])
    return [[r * shard + b * size + k for k in range(size)]
            for r in range(replicate) for b in range(shard // size)]


def replay_bytes(inp, options, world: int) -> int:
    """Bytes of buffers one rank holds to replay the FSDP plan of ``inp`` under ``options``
    on ``world`` ranks: every collective's input and output at once (all are allocated
    before the first step)."""
    sched = schedule_of(setup_of(inp.fsdp, options, world))
    total = 0
    for issue in sched.issues:
        item = DTYPE_BYTES.get(issue.dtype, 4)
        if issue.kind is CollectiveKind.ALL_REDUCE:
            total += issue.elements * item
        else:  # the whole tensor and one rank's share of it
            total += (issue.elements + issue.elements // max(issue.group, 1)) * item
    return total
