"""``tracecli collective``'s table: per size, what NCCL's model predicts one collective costs,
the (algorithm, protocol) it picks, and the algorithm and bus bandwidth nccl-tests would
print for that time; with a real nccl-tests run, its measured time and the error.

Sizes are nccl-tests' size column: the buffer for all-reduce and broadcast, the whole
gathered buffer for all-gather, the whole input for reduce-scatter; that column is exactly
the bytes NCCL's model charges (``ncclFuncMaxSendRecvCount``, src/include/enqueue.h:39-41),
so a size of the table and a row of nccl-tests are the same collective. ``algbw = size /
time``; ``busbw = algbw · bus`` with nccl-tests' factors (its doc/PERFORMANCE.md):
all-reduce ``2(n-1)/n``, all-gather and reduce-scatter ``(n-1)/n``, broadcast 1.

>>> from .model import NcclModel
>>> m = NcclModel.for_topology("h100", 1, 8, True, 0, 0, "2.30.7")
>>> r = sweep(m, "allreduce", [1 << 30])[0]
>>> r.algorithm, r.protocol, round(r.busbw_gbps / r.algbw_gbps, 3)
('NVLS', 'Simple', 1.75)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

from ...errors import CalibrationError
from ...model import CollectiveKind
from .model import FUNC_OF, NcclModel
from .tuning import ALGOS, PROTOS, best

__all__ = ["OPS", "SweepRow", "sweep", "check_measured", "bus_factor"]

OPS = {"allreduce": CollectiveKind.ALL_REDUCE, "allgather": CollectiveKind.ALL_GATHER,
       "reducescatter": CollectiveKind.REDUCE_SCATTER, "broadcast": CollectiveKind.BROADCAST}


def bus_factor(op: str, ranks: int) -> float:
    if op == "allreduce":
        return 2.0 * (ranks - 1) / ranks
    if op in ("allgather", "reducescatter"):
        return (ranks - 1) / ranks
    return 1.0


@dataclass(frozen=True)
class SweepRow:
    bytes: int
    predicted_us: float
    algorithm: str
    protocol: str
    algbw_gbps: float
    busbw_gbps: float
    measured_us: Optional[float] = None
    error_pct: Optional[float] = None  # (predicted - measured) / measured

    def to_json(self, measured: bool) -> dict[str, Any]:
        doc = asdict(self)
        if not measured:
            del doc["measured_us"], doc["error_pct"]
        return doc


def sweep(model: NcclModel, op: str, sizes: Sequence[int], run=None) -> list[SweepRow]:
    """One row per size (``run``: a :class:`~.nccl_tests.NcclTests` of the same collective)."""
    kind = OPS[op]
    ranks = model.gpus
    table = model._table() if ranks > 1 else None
    measured = {r.bytes: r.time_us for r in run.rows} if run is not None else {}
    rows = []
    for n in sizes:
        if table is None:
            us, algo, proto = 0.0, "none", "none"
        else:
            us, a, p = best(table, FUNC_OF[kind], n)
            algo, proto = ALGOS[a], PROTOS[p]
        algbw = n / us / 1000.0 if us > 0 else 0.0
        m = measured.get(n)
        err = 100.0 * (us - m) / m if m else None
        rows.append(SweepRow(n, us, algo, proto, algbw, algbw * bus_factor(op, ranks), m, err))
    return rows


def check_measured(run, op: str, model: NcclModel) -> None:
    """A run fit to compare with ``model``'s table: of ``op`` (when it says) and on as many
    ranks (when it lists them); else CalibrationError saying what to pass."""
    from .nccl_tests import BINARIES

    if run.binary is not None and not run.binary.startswith(BINARIES[op]):
        raise CalibrationError(f"this is {run.binary} output, not "
                               f"{BINARIES[op]}; pass the output of {BINARIES[op]} or run "
                               f"tracecli collective {next((o for o, b in BINARIES.items() if run.binary.startswith(b)), op)}", path=run.path)
    if run.ranks is not None and run.ranks != model.gpus:
        raise CalibrationError(f"measured on {run.ranks} ranks, but the topology "
                               f"has {model.gpus}; pass --nodes/--gpus-per-node (or --gpus) of "
                               "the run measured", path=run.path)
