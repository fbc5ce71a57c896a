"""``tracecli collective``'s table: per size, NCCL's predicted time, algorithm, protocol and
bandwidths, and the measured time and error where a run was given."""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.text import Text

from ..costs.collectives import KIND_OF_OP, NAMES
from ..costs.nccl.accuracy import one_cluster, reaches_line
from ..costs.nccl.wire import line_rate_us
from ..costs.nccl.ofi_tuner import tuner_doc
from ..units import format_size
from .layout import WORD, Column, Fitted, with_rank

__all__ = ["collective_view"]


# Which columns move to a second table first when the table is too wide: the last named.
ORDER = ("size", "predicted us", "error band", "measured us", "(pred-meas)/meas", "algorithm",
         "protocol", "NCCL us", "bytes", "pred algbw GB/s", "pred busbw GB/s")


def _us(x: float) -> str:
    return f"{x:.2f}" if x < 1e5 else f"{x:.0f}"


def collective_view(op: str, model, rows, measured: Optional[str] = None) -> Group:
    t = model.topology
    head = Text()
    head.append(f"{op} on {t.nodes} x {t.gpus_per_node} {model.device}", style="bold")
    head.append(f" ({t.ranks} ranks)\n")
    head.append(f"predicted: {model.summary()}")
    if measured:
        head.append(f"\nmeasured: out-of-place times of {measured}")
    title = "Per size: NCCL's pick, timed" + (", measured by nccl-tests" if measured else "")
    lines = []
    for r in rows:
        cells = [str(r.bytes), format_size(r.bytes), _us(r.predicted_us),
                 r.band.text() if r.band is not None else "-", r.algorithm, r.protocol,
                 _us(r.nccl_us), f"{r.algbw_gbps:.2f}", f"{r.busbw_gbps:.2f}"]
        if measured:
            cells += [_us(r.measured_us) if r.measured_us is not None else "-",
                      f"{r.error_pct:+.1f}%" if r.error_pct is not None else "-"]
        lines.append(cells)
    cols = ["bytes", "size", "predicted us", "error band", "algorithm", "protocol", "NCCL us",
            "pred algbw GB/s", "pred busbw GB/s"] + (["measured us", "(pred-meas)/meas"]
                                                      if measured else [])
    columns = [Column(h, WORD if h in ("algorithm", "protocol") else "value", key=h == "size")
               for h in cols]
    shown = Fitted(title, with_rank(columns, ORDER), lines)
    basis = next((r.band.basis for r in rows if r.band is not None), None)
    doc = tuner_doc(model) if getattr(model, "nccl_env", None) is not None else None
    picks = ("the (algorithm, protocol) aws-ofi-nccl's tuner makes NCCL take (NCCL's model's "
             "where it has no region)" if doc and doc["tunes"] and doc["modelled"] else
             "the (algorithm, protocol) NCCL's model picks")
    key = " of that pair" if doc and doc["tunes"] and doc["modelled"] else ", its ranking key"
    foot = Text(f"predicted: {picks}, timed by tracecli's "
                "model (floor, NCCL's latency and bandwidth terms scaled per link, fitted on "
                f"public nccl-tests tables); NCCL us: NCCL's own model time{key}; "
                "error band: (predicted - measured) / measured on tables the constants were not "
                "fitted on" + (f" ({basis.split(':')[0]})" if basis else "")
                + (", widened where the constants miss their own class's tables by more"
                   if basis and t.nodes > 1 else "")
                + _borrowed(rows, model) + _at_line(op, rows, model)
                + ("; error = (predicted - measured) / measured" if measured else ""))
    return Group(head, shown, foot)


def _borrowed(rows, model) -> str:
    """What the bands rest on where the model's transport class was measured by one cluster
    only (:func:`~tracecli.costs.nccl.accuracy.one_cluster`): other classes' held-out tables."""
    cls = getattr(model, "time_class", None)
    if not one_cluster(cls) or not any(r.band is not None for r in rows):
        return ""
    return (f"; {cls} was measured by one cluster's tables, which no other cluster of it "
            "checks: its bands are those of the classes held out against their own")


def _at_line(op: str, rows, model) -> str:
    """Said where a band's upper edge is the line rate's (:func:`~tracecli.costs.nccl.accuracy.
    capped`): no run is faster than the bytes cross a node's NICs."""
    kind, t = KIND_OF_OP.get(op), model.topology
    gbps = getattr(model, "nic_gbps", None)
    if kind is None or not gbps:
        return ""
    func = NAMES[kind].nccl
    if not any(r.band is not None and reaches_line(
            r.band, r.predicted_us, line_rate_us(func, r.bytes, t.nodes, gbps)) for r in rows):
        return ""
    return ("; where a prediction is at or near the line rate (the bytes through one node's "
            "NICs at their speed), the band's upper edge is capped there: no run is faster")
