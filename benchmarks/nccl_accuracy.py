"""How far NCCL's model, as tracecli reproduces it, lands from real measurements and from NCCL.

Per fixture of tests/fixtures/nccl (sources in its README.md) and per size: what was measured
(nccl-tests' out-of-place time; the "ref. us" column) or printed (NCCL's own model time), what tracecli predicts,
and the error ``(predicted - measured) / measured``. Three kinds of row:

- ``gcp-a3mega 2x8 H100`` all_reduce_perf: the prediction from the topology alone
  (``NcclModel.for_topology("h100", 2, 8, nvswitch, 1600 Gb/s over 8 NICs)``; the NCCL version
  of that run is not stated, so the default version's constants are used);
- ``b300 1x8 NVLink`` all_reduce_perf (NCCL 2.29.7, busbw averaged over 5 runs, time derived
  as ``bytes·2(n-1)/n / busbw``): from the topology alone, the B200 entry standing in;
- ``rtx5090 2x1 Socket`` broadcast_perf (NCCL 2.29.7): the prediction from the graph solved from
  that run's own TUNING log (tests/test_nccl_tuning.py);
- ``nccl#1453 3x8 H100`` (NCCL 2.22.3): NCCL's own printed model time, against tracecli's.

    PYTHONPATH=. python benchmarks/nccl_accuracy.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tracecli.costs.nccl.model import NcclModel  # noqa: E402
from tracecli.costs.nccl.nccl_tests import read_nccl_tests  # noqa: E402
from tracecli.costs.nccl.nccllog import read_nccl_log  # noqa: E402
from tracecli.costs.nccl.tuning import ALGOS, PROTOS, best, tune  # noqa: E402
from tracecli.costs.nccl.versions import constants_for  # noqa: E402
from tracecli.model import CollectiveKind  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "nccl"


def rows() -> list[tuple[str, int, float, float, str]]:
    """``(fixture, bytes, measured_us, predicted_us, algorithm/protocol)`` for every fixture."""
    from test_nccl_tuning import H100_3X8, RTX  # the graphs solved from those logs
    out = []
    a3 = read_nccl_tests(str(FIX / "gcp_a3mega_h100_2x8_all_reduce_perf.txt"), "allreduce")
    model = NcclModel.for_topology("h100", 2, 8, True, nic_gbps=1600.0, nics=8)
    for r in a3.rows:
        algo, proto, us = model.choice(CollectiveKind.ALL_REDUCE, r.bytes)
        out.append(("gcp-a3mega 2x8 H100 all_reduce_perf", r.bytes, r.time_us, us, f"{algo}/{proto}"))
    from test_nccl_accuracy import _b300_rows
    model = NcclModel.for_topology("b200", 1, 8, True, nic_gbps=0, nics=0, version="2.29.7")
    for nbytes, (_, us) in sorted(_b300_rows().items()):
        algo, proto, pred = model.choice(CollectiveKind.ALL_REDUCE, nbytes)
        out.append(("b300 1x8 NVLink all_reduce_perf (busbw)", nbytes, us, pred, f"{algo}/{proto}"))
    rtx = read_nccl_tests(str(FIX / "ebpf_rtx5090_2x1_broadcast_perf.txt"), "broadcast")
    table = tune(RTX, constants_for("2.29.7"))
    for r in rtx.rows:
        us, a, p = best(table, "Broadcast", r.bytes)
        out.append(("rtx5090 2x1 Socket broadcast_perf", r.bytes, r.time_us, us, f"{ALGOS[a]}/{PROTOS[p]}"))
    log = read_nccl_log(str(FIX / "nccl1453_h100_3x8_2.22.3_choices.log"))
    table = tune(H100_3X8, constants_for("2.22.3"))
    for nbytes, _, _, printed in log.choices_of("AllReduce"):
        us, a, p = best(table, "AllReduce", nbytes)
        out.append(("nccl#1453 3x8 H100 NCCL's model", nbytes, printed, us, f"{ALGOS[a]}/{PROTOS[p]}"))
    return out


def main() -> None:
    last = None
    for name, nbytes, measured, predicted, choice in rows():
        if name != last:
            print(f"\n{name}\n{'bytes':>12} {'ref. us':>12} {'predicted us':>13} {'error %':>9}  choice")
            last = name
        err = 100.0 * (predicted - measured) / measured
        print(f"{nbytes:>12} {measured:>12.2f} {predicted:>13.2f} {err:>+9.1f}  {choice}")


if __name__ == "__main__":
    main()
