"""``tracecli collective``'s table: per size, the (algorithm, protocol) NCCL's model picks, what
the time model (:mod:`.timing`) predicts it takes with its cross-validated error band, NCCL's
own model time, and the algorithm and bus bandwidth nccl-tests would print for the
prediction; with a real nccl-tests run, its measured time and the error.

Sizes are nccl-tests' size column: the buffer for all-reduce and broadcast, the whole
gathered buffer for all-gather, the whole input for reduce-scatter; that column is exactly
the bytes NCCL's model charges (``ncclFuncMaxSendRecvCount``, src/include/enqueue.h:39-41),
so a size of the table and a row of nccl-tests are the same collective. ``algbw = size /
time``; ``busbw = algbw · bus`` with nccl-tests' factors (its doc/PERFORMANCE.md):
all-reduce ``2(n-1)/n``, all-gather and reduce-scatter ``(n-1)/n``, broadcast 1.

>>> from .model import NcclModel
>>> m = NcclModel.for_topology("h100", 1, 8, True, 0, 0, "2.30.7")
>>> r = sweep(m, "allreduce", [1 << 30])[0]
>>> r.algorithm, r.protocol, round(r.busbw_gbps / r.algbw_gbps, 3), r.predicted_us > r.nccl_us
('NVLS', 'Simple', 1.75, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

from ...errors import CalibrationError
from ..collectives import KIND_OF_OP, NAMES, kind_cost
from ..error import ErrorBand
from .model import NcclModel
from .timing import launch_us

__all__ = ["OPS", "SweepRow", "sweep", "check_measured", "bus_factor", "launch_added"]

OPS = KIND_OF_OP


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw of ``op`` on ``ranks`` ranks."""
    return kind_cost(KIND_OF_OP[op]).bus(ranks)


@dataclass(frozen=True)
class SweepRow:
    bytes: int
    predicted_us: float     # the time model's (timing.py): NCCL's pick, timed
    algorithm: str
    protocol: str
    algbw_gbps: float
    busbw_gbps: float
    nccl_us: float = 0.0    # NCCL's own model time of its pick (its ranking key)
    band: Optional[ErrorBand] = None  # the cross-validated error of predicted_us here
    measured_us: Optional[float] = None
    error_pct: Optional[float] = None  # (predicted - measured) / measured

    def to_json(self, measured: bool) -> dict[str, Any]:
        doc = asdict(self)
        doc["error_band"] = self.band.to_json() if self.band is not None else None
        del doc["band"]
        if not measured:
            del doc["measured_us"], doc["error_pct"]
        return doc


def sweep(model: NcclModel, op: str, sizes: Sequence[int], run=None) -> list[SweepRow]:
    """One row per size (``run``: a :class:`~.nccl_tests.NcclTests` of the same collective;
    run by one thread driving several GPUs, ``-g N``, each prediction adds the launches that
    thread makes one after another: :func:`launch_added`)."""
    kind = OPS[op]
    ranks = model.gpus
    measured = {r.bytes: r.time_us for r in run.rows} if run is not None else {}
    per_thread = run.gpus_per_thread if run is not None else 1
    rows = []
    for n in sizes:
        algo, proto, nccl = model.pick(kind, n)
        us = model.timed_us(kind, n, per_thread)
        algbw = n / us / 1000.0 if us > 0 else 0.0
        m = measured.get(n)
        err = 100.0 * (us - m) / m if m else None
        rows.append(SweepRow(n, us, algo, proto, algbw, algbw * bus_factor(op, ranks), nccl,
                             model.error_charged(kind, n, us), m, err))
    return rows


def launch_added(model: NcclModel, run) -> float:
    """µs each prediction of :func:`sweep` adds to compare with ``run``: 0 unless one thread
    drove several GPUs (nccl-tests ``-g N`` launches their kernels one after another inside
    one group, src/common.cu:548-619), then the fitted launch term (timing.launch_us)."""
    hit = model.time_params()
    if run is None or hit is None:
        return 0.0
    return launch_us(hit[0], run.gpus_per_thread)


def check_measured(run, op: str, model: NcclModel) -> None:
    """A run fit to compare with ``model``'s table: of ``op`` and on as many ranks, as the
    file says (its ``Collective test starting`` and ``Rank`` lines) or, where it does not say,
    as its own busbw/algbw ratio says (nccl-tests' bus factor, :func:`bus_factor`); else
    CalibrationError saying what to pass."""
    binaries = {NAMES[k].op: NAMES[k].binary for k in NAMES}

    if run.binary is not None and not run.binary.startswith(binaries[op]):
        other = next((o for o, b in binaries.items() if run.binary.startswith(b)), op)
        raise CalibrationError(f"this is {run.binary} output, not {binaries[op]}; pass the "
                               f"output of {binaries[op]} or run tracecli collective {other}",
                               path=run.path)
    if run.ranks is not None and run.ranks != model.gpus:
        raise CalibrationError(f"measured on {run.ranks} ranks, but the topology "
                               f"has {model.gpus}; pass --nodes/--gpus-per-node (or --gpus) of "
                               "the run measured", path=run.path)
    ratio = bus_ratio(run)
    if ratio is None or model.gpus < 2:
        return
    want = bus_factor(op, model.gpus)
    if abs(ratio[0] - want) > 0.02 * want + 0.01:
        who = "" if run.binary is None else f" ({run.binary})"
        raise CalibrationError(
            f"its busbw/algbw ratio is {ratio[0]:.3f} (line {ratio[1]}), not the {want:.3f} of "
            f"{op} on {model.gpus} ranks{who}: a run of another collective or rank count; pass "
            f"{op}'s output on the topology's ranks", path=run.path, line=ratio[1])


def bus_ratio(run) -> Optional[tuple[float, int]]:
    """``(busbw / algbw, line)`` of the row with the largest algbw (both printed to 0.01
    GB/s: the largest is the most precise), ``None`` where no row has algbw of 1 GB/s."""
    rows = [r for r in run.rows if r.algbw_gbps >= 1.0]
    if not rows:
        return None
    r = max(rows, key=lambda r: r.algbw_gbps)
    return r.busbw_gbps / r.algbw_gbps, r.line
